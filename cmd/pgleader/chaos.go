//go:build pgleader_lab

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/chaos"
)

func (a *app) chaosCommand() *cobra.Command {
	var (
		seed       int64
		duration   time.Duration
		scenarios  []string
		jsonPath   string
		nodeArgs   string
		keep       bool
		mode       string
		supervised bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Break a local cluster in named ways and check that no safety property failed",
		Long: `chaos runs real ` + "`pgleader node`" + ` processes (this binary) doing fenced writes, applies
each scenario's faults over and over for --duration, then checks the history — every
node's events, pgleader.terms and pgleader.demo_actions:

  H1 each epoch granted at most once, to one node
  H2 epochs strictly increase and never regress
  H3 every accepted fenced write carries the epoch current at its commit
  H4 its writer held that epoch
  H5 acknowledged writes appear exactly once, rejected ones never, unknown at most once

plus gate overlap between nodes and figures (failover, detection, leaderless time,
stale writes rejected, transitions per minute). Each scenario also names the
footprint it must leave (a takeover happened, a stale write was refused, …): a fault
that did nothing fails the run. Exit status 1 on any violation.

Scenarios: ` + strings.Join(chaos.Names(), ", ") + `.
Without --dsn or DATABASE_URL it starts a throwaway PostgreSQL (needed by the scenarios
that restart the server); with one, those are skipped and the verdict says so.

--mode lease runs every node in lease mode through a PgBouncer (transaction pooling)
that chaos starts in front of the database; the scenarios that have no meaning
there (terminating a leadership session, squatting a lock, a standby failover
behind one bouncer) are skipped, saying why.

--supervised runs every node as pgleader run with a child doing the fenced writes
(lab-writer, in a lab build): the scenarios kill9, sigterm, resign, handover,
stop-long, terminate and the PostgreSQL restarts and failover, checked as above
plus: every child's exit recorded, no two nodes' children running at once, no child
alive after the run.

pause-write drives the node's fault-test hooks (--test-pause-before-write), which
this lab build's nodes have and the production binary's do not.`,
		Example: `  pgleader chaos --duration 20s
  pgleader chaos --scenario kill9 --scenario stop-long --seed 42 --json chaos.json
  pgleader chaos --mode lease --duration 30s`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			for _, s := range scenarios {
				if !chaos.Lookup(s) {
					return cli.BadInput("unknown --scenario %q; choose from %s", s, strings.Join(chaos.Names(), ", "))
				}
			}
			if mode != "lock" && mode != "lease" {
				return cli.BadInput("--mode %q: want lock or lease", mode)
			}
			if duration < time.Second {
				return cli.BadInput("--duration must be at least 1s (got %v)", duration)
			}
			if !cmd.Flags().Changed("seed") {
				seed = time.Now().UnixNano() % 1_000_000
			}
			return a.withHarness(cmd, "chaos", keep, func(ctx context.Context, h *harness) error {
				fmt.Fprintf(a.stderr, "chaos: seed %d, %v per scenario\n", seed, duration)
				rs, runErr := chaos.Run(ctx, chaos.Options{Bin: h.bin, DSN: h.dsn, Server: h.srv, Dir: h.dir, Seed: seed,
					Duration: duration, Scenarios: scenarios, NodeArgs: strings.Fields(nodeArgs), Mode: mode, NoTestHooks: !labBuild, Supervised: supervised, Progress: a.stderr})
				fmt.Fprintln(a.stdout)
				chaos.WriteTable(a.stdout, rs)
				if err := writeJSON(jsonPath, map[string]any{"seed": seed, "duration": duration.String(), "results": rs}); err != nil {
					return err
				}
				if runErr != nil {
					return runErr
				}
				failed, skipped := 0, 0
				for _, r := range rs {
					switch {
					case r.Skipped != "":
						skipped++
					case !r.OK():
						failed++
					}
				}
				if failed > 0 {
					return fmt.Errorf("chaos: %d of %d scenarios failed (seed %d)", failed, len(rs), seed)
				}
				if skipped > 0 {
					fmt.Fprintf(a.stdout, "\n%d scenarios passed, %d skipped (seed %d)\n", len(rs)-skipped, skipped, seed)
					return nil
				}
				fmt.Fprintf(a.stdout, "\nall %d scenarios passed (seed %d)\n", len(rs), seed)
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.Int64Var(&seed, "seed", 0, "seed of the fault schedule (default: random, printed)")
	f.DurationVar(&duration, "duration", 20*time.Second, "how long each scenario applies its faults")
	f.StringArrayVar(&scenarios, "scenario", nil, "scenario to run; repeat for several (default: all)")
	f.StringVar(&jsonPath, "json", "", "also write the verdicts as JSON to `FILE`")
	f.StringVar(&nodeArgs, "node-args", "", "extra flags for every node (after the chaos timing)")
	f.BoolVar(&keep, "keep", false, "keep the nodes' events files and logs")
	f.StringVar(&mode, "mode", "lock", "`MODE` of every node: lock, or lease (through a PgBouncer in transaction mode that chaos starts)")
	f.BoolVar(&supervised, "supervised", false, "run every node as pgleader run with a child doing the fenced writes (lab build; the process and database scenarios)")
	return cmd
}
