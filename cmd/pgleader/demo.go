package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/demo"
	"github.com/pgleader/pgleader/internal/cli"
)

func (a *app) demoCommand() *cobra.Command {
	var (
		nodes    int
		scopes   []string
		work     time.Duration
		restart  time.Duration
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local cluster to watch: throwaway PostgreSQL, several nodes, live leadership log",
		Long: `demo starts a throwaway PostgreSQL (unless --dsn or DATABASE_URL names a database),
several ` + "`pgleader node`" + ` processes doing a fenced write every --work-interval while they
lead, and prints every leadership change as it happens plus a status line every 5s.

Break it from another terminal: kill -9 a node's pid (printed at start), freeze one
with kill -STOP and thaw it with kill -CONT, or terminate the leader's session from
psql. Dead nodes are restarted after --restart-after. Ctrl-C stops everything and
removes the throwaway database.`,
		Example: `  pgleader demo
  pgleader demo --nodes 5 --scope billing --scope reports`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 || nodes > 20 {
				return cli.BadInput("--nodes must be between 1 and 20 (got %d)", nodes)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			return demo.Run(ctx, demo.Options{Bin: bin, DSN: a.harnessDSN(), Nodes: nodes, Scopes: scopes,
				Work: work, Restart: restart, Duration: duration, Out: a.stdout})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 3, "node processes")
	f.StringSliceVar(&scopes, "scope", []string{"demo"}, "scopes every node campaigns for (repeatable)")
	f.DurationVar(&work, "work-interval", 200*time.Millisecond, "fenced write interval of a leader")
	f.DurationVar(&restart, "restart-after", 3*time.Second, "delay before a dead node is started again")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	return cmd
}
