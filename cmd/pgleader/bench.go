package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/internal/bench"
	"github.com/pgleader/pgleader/internal/cli"
)

func (a *app) benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure pgleader on this machine",
	}
	cmd.AddCommand(a.benchFailoverCommand())
	return cmd
}

func (a *app) benchFailoverCommand() *cobra.Command {
	var (
		n         int
		nodes     int
		scenarios []string
		jsonPath  string
		nodeArgs  string
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure crash, graceful and frozen-leader failover, the gate check and idle load",
		Long: `failover runs real ` + "`pgleader node`" + ` processes (this binary) on this host and
applies faults to the leader, timing each takeover from the moment the fault was
sent to the successor's gate opening, as both record them on CLOCK_MONOTONIC:

  crash     kill -9 of the leader           → a follower's gate open
  graceful  SIGTERM of the leader (drain)   → a follower's gate open; and the gap
                                              between the old gate closing and the new opening
  frozen    SIGSTOP of the leader           → a follower's gate open; and the gap
                                              between the old trust window's end and the new opening
  terminate pg_terminate_backend of the leader's session → a follower's gate open;
            and how fast the old leader closed its gate (it lives on and rejoins)
  gate      Scope.Require / Token.Valid on a live leader: ns/op, allocs/op
  load      transactions per node per heartbeat interval on an idle cluster

Every iteration restarts the faulted node and waits until all nodes follow the
leader again. The frozen scenario takes about one session lease (2s by default)
per iteration. Without --dsn or DATABASE_URL it starts a throwaway PostgreSQL
(as the postgres OS user when run as root) and removes it afterwards; with one,
it migrates that database and uses scopes named bench-*.`,
		Example: `  pgleader bench failover -n 50 --json docs/bench-failover.json
  pgleader bench failover -n 10 --scenarios crash,graceful`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			for _, s := range scenarios {
				if !contains(bench.AllScenarios, s) {
					return cli.BadInput("unknown scenario %q for --scenarios; choose from %s", s, strings.Join(bench.AllScenarios, ","))
				}
			}
			if n < 1 || nodes < 2 {
				return cli.BadInput("-n must be ≥ 1 and --nodes ≥ 2 (got %d and %d)", n, nodes)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			h, done, err := a.newHarness(ctx, "bench", false)
			if err != nil {
				return err
			}
			defer done()
			began := time.Now()
			rep, err := bench.Run(ctx, bench.Options{Bin: h.bin, DSN: h.dsn, Dir: h.dir, N: n, Nodes: nodes,
				Scenarios: scenarios, NodeArgs: strings.Fields(nodeArgs), Progress: a.stderr})
			if rep != nil {
				fmt.Fprintln(a.stdout)
				rep.WriteTable(a.stdout)
				fmt.Fprintf(a.stdout, "\n(%s in %v)\n", strings.Join(scenarios, ", "), time.Since(began).Round(time.Second))
				if jsonPath != "" {
					b, _ := json.MarshalIndent(rep, "", "  ")
					if werr := os.WriteFile(jsonPath, append(b, '\n'), 0o644); werr != nil {
						return werr
					}
				}
			}
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVarP(&n, "iterations", "n", 50, "iterations per fault scenario")
	f.IntVar(&nodes, "nodes", 3, "candidate processes")
	f.StringSliceVar(&scenarios, "scenarios", bench.AllScenarios, "scenarios to run, comma-separated")
	f.StringVar(&jsonPath, "json", "", "also write the report as JSON to `FILE`")
	f.StringVar(&nodeArgs, "node-args", "", "extra flags for every node, e.g. \"--session-lease 3s\" (default: the engine's defaults)")
	return cmd
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
