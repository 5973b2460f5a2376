//go:build linux

package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/demo"
	"github.com/pgleader/pgleader/demo/reaper"
	"github.com/pgleader/pgleader/tui"
)

func (a *app) demoCommand() *cobra.Command {
	var (
		o          demo.Options
		scopes     []string
		scopeCount int
		headless   bool
		theme      string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local cluster you can break and watch heal, on the on-call dashboard",
		Long: `demo starts a throwaway PostgreSQL (unless --dsn or DATABASE_URL names a database),
--nodes ` + "`pgleader node`" + ` processes campaigning for every --scope and doing a fenced
write every --work-interval while they lead, the collector, the Prometheus exporter
(its /metrics URL is printed) and the dashboard. Each node reaches PostgreSQL
through its own in-process proxy, so its link can be hung.

--scopes N replaces the --scope names with N generated ones, scope-0001 …
scope-N, to watch a cluster at scale (e.g. --scopes 1000): the dashboard's header
then counts the verdicts and names only the scopes in trouble.

Fault keys (they act on the scope under the cursor; each failover's measured time
appears in the event log):
  K  kill -9 the leader              Z  freeze the leader (SIGSTOP); again: thaw
  H  hang the leader's database link (silence, no RST); again: heal
  G  the leader resigns (SIGUSR1)    B  restart PostgreSQL (throwaway server only)
  A  add a node                      D  remove a node (SIGTERM)
Dead nodes are started again after --restart-after. q quits and removes everything.

--theme light or dark picks the dashboard's colours for that background; auto
(the default) asks the terminal, and until it answers uses colours that read on
either. [ replays the cluster's past, as in pgleader top.

The operator actions of pgleader top --allow-actions need no flag here (the demo
acts on its own scopes only), each after a y/N question:
  R  the leader resigns gracefully, asked through the database
  x  evict: terminate the leader's session
  O  hand the scope over to its best follower
The header shows the database's DSN with its user (never a password), to paste
into psql or pgleader status --dsn; c copies it to the clipboard (OSC 52).

--headless needs no terminal: it logs leadership changes, with --faults applies a
fault every few seconds (kill -9, freeze, hung link, resign, PostgreSQL restart),
and at the end prints a summary (failover times, gate overlap, stale writes
refused) judged by the chaos checker; it exits 1 on any safety violation.

With --dsn the demo writes to that database (schema pgleader, created if missing).`,
		Example: `  pgleader demo
  pgleader demo --nodes 5 --scope billing --scope reports --scope mailer
  pgleader demo --scopes 1000
  pgleader demo --headless --faults --duration 1m`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if o.Nodes < 1 || o.Nodes > 20 {
				return cli.BadInput("--nodes must be between 1 and 20 (got %d)", o.Nodes)
			}
			if cmd.Flags().Changed("scopes") {
				if scopeCount < 1 || scopeCount > 10000 {
					return cli.BadInput("--scopes must be between 1 and 10000 (got %d)", scopeCount)
				}
				scopes = demo.NumberedScopes(scopeCount)
			}
			if len(scopes) == 0 || (len(scopes) > 16 && !cmd.Flags().Changed("scopes")) {
				return cli.BadInput("--scope: give between 1 and 16 scopes (got %d), or a count with --scopes N", len(scopes))
			}
			if err := checkScopes(scopes); err != nil {
				return err
			}
			if cmd.Flags().Changed("work-interval") && o.Work < 10*time.Millisecond {
				return cli.BadInput("--work-interval must be at least 10ms (got %v)", o.Work)
			}
			th, err := tui.ParseTheme(theme)
			if err != nil {
				return cli.BadInput("--%v", err)
			}
			o.Theme = th
			if o.Faults && !headless {
				return cli.BadInput("--faults goes with --headless (the dashboard has fault keys)")
			}
			o.Headless = headless
			if !headless && !isTerminal(os.Stdout) {
				return cli.BadInput("the dashboard needs a terminal: run in one, or use --headless")
			}
			// SIGHUP too: a closed SSH session tears the demo down in order.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.Bin, o.DSN, o.Scopes, o.Out = bin, a.harnessDSN(), scopes, a.stdout
			if err := demo.CheckDSN(o.DSN); err != nil {
				return cli.BadInput("%v", err)
			}
			if o.Seed == 0 {
				o.Seed = time.Now().UnixNano() % 1_000_000
			}
			err = demo.Run(ctx, o)
			if errors.Is(err, demo.ErrUnsafe) {
				return err
			}
			if err != nil && ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 3, "node processes")
	f.StringArrayVar(&scopes, "scope", []string{"billing", "reports"}, "scopes every node campaigns for (repeatable)")
	f.IntVar(&scopeCount, "scopes", 0, "campaign for `N` generated scopes, scope-0001 … scope-N, instead of --scope (1–10000)")
	cmd.MarkFlagsMutuallyExclusive("scope", "scopes")
	f.DurationVar(&o.Work, "work-interval", 0, "fenced write interval of a leader, per scope (default 200ms; beyond 10 scopes, 20ms × scopes: about 50 writes a second in all)")
	f.DurationVar(&o.Restart, "restart-after", 3*time.Second, "delay before a dead node is started again")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long (default: until q or Ctrl-C)")
	f.StringVar(&o.Listen, "listen", "", "exporter `ADDR` (default 127.0.0.1:9817, or a free port when taken; \"off\": none)")
	f.BoolVar(&headless, "headless", false, "no dashboard: log to stdout (no terminal needed)")
	f.BoolVar(&o.Faults, "faults", false, "with --headless: apply a fault every few seconds and judge the run")
	f.Int64Var(&o.Seed, "seed", 0, "fault schedule seed of --faults (default: random, printed)")
	f.BoolVar(&o.NoColor, "no-color", false, "dashboard without colours (also: NO_COLOR=1)")
	f.StringVar(&theme, "theme", "auto", "dashboard colours for the terminal's background: light, dark or auto (ask the terminal)")
	return cmd
}

// reapCommand is the demo's reaper child (demo/reaper): hidden.
func (a *app) reapCommand() *cobra.Command {
	return &cobra.Command{
		Use:    reaper.Command,
		Hidden: true,
		Args:   cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			reaper.Serve(os.Stdin, a.stderr)
		},
	}
}
