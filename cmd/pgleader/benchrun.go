//go:build pgleader_lab

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/bench"
)

func (a *app) benchRunCommand() *cobra.Command {
	var (
		n        int
		jsonPath string
		nodeArgs string
		keep     bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Measure pgleader run: crash failover to the successor's child, and gate closed → child group gone",
		Long: `run measures pgleader run beside pgleader node in the same run, alternating:

  node crash  kill -9 of the leading pgleader node → the successor's gate open
              (the reference)
  run crash   kill -9 of the leading pgleader run → the successor's child started
              (exec'd); also → its gate open
  exec        fork + exec + wait of /bin/true from this process: the cost of
              starting a trivial child
  gate→gone   pg_terminate_backend of a supervising leader's session: its
              gate_closed → its child's group reaped by the guard
  orphans     children of a killed pgleader run alive 1 s after the kill

Targets: run crash p99 ≤ 2× node crash p99 + exec p99; gate→gone p99 ≤ 50 ms;
0 orphans (PASS or MISS; a miss does not fail the command). Without --dsn or
DATABASE_URL it starts a throwaway PostgreSQL.`,
		Example: `  pgleader bench run --n 20 --json /tmp/run.json`,
		Args:    cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if n < 1 {
				return cli.BadInput("-n must be ≥ 1 (got %d)", n)
			}
			return a.withHarness(cmd, "bench-run", keep, func(ctx context.Context, h *harness) error {
				rep, err := bench.RunSupervised(ctx, bench.RunOptions{Bin: h.bin, DSN: h.dsn, Dir: h.dir, N: n,
					NodeArgs: strings.Fields(nodeArgs), Progress: debugWriter{a}})
				if err != nil {
					return err
				}
				for _, s := range []bench.Stat{rep.NodeFailover, rep.RunGate, rep.RunFailover, rep.Exec, rep.GateToGone} {
					fmt.Fprintf(a.stdout, "%-30s n=%-3d median %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", s.Name, s.N, s.MedianMS, s.P99MS, s.MaxMS)
				}
				pass := map[bool]string{true: "PASS", false: "MISS"}
				fmt.Fprintf(a.stdout, "run crash p99 %.2f ms vs 2×node p99 + exec p99 = %.2f ms (ratio to node p99 %.2f): %s\n",
					rep.RunFailover.P99MS, rep.TargetFailoverMS, rep.RunFailover.P99MS/max(rep.NodeFailover.P99MS, 0.001), pass[rep.FailoverMet])
				fmt.Fprintf(a.stdout, "gate closed → group gone p99 %.2f ms vs 50 ms: %s\n", rep.GateToGone.P99MS, pass[rep.GateToGoneMet])
				fmt.Fprintf(a.stdout, "orphans after %d kills: %d: %s\n", rep.RunFailover.N, rep.Orphans, pass[rep.Orphans == 0])
				return writeJSON(jsonPath, rep)
			})
		}),
	}
	fl := cmd.Flags()
	fl.IntVarP(&n, "n", "n", 10, "samples per figure")
	fl.StringVar(&jsonPath, "json", "", "write the figures as JSON to `FILE`")
	fl.StringVar(&nodeArgs, "node-args", "", "extra flags for every node, e.g. \"--heartbeat-interval 200ms\"")
	fl.BoolVar(&keep, "keep", false, "keep the events files and logs")
	return cmd
}

// debugWriter writes benchmark progress lines as debug logs.
type debugWriter struct{ a *app }

func (w debugWriter) Write(p []byte) (int, error) {
	w.a.debugf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
