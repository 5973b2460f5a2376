//go:build pgleader_lab

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/lab/bench"
)

func (a *app) benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure pgleader on this machine",
	}
	cmd.AddCommand(a.benchFailoverCommand(), a.benchScaleCommand(), a.benchCollectorCommand(), a.benchDashboardCommand(),
		a.benchDemoCommand(), a.benchHolderCommand(), a.benchRunCommand())
	return cmd
}

// latencyFigures is the JSON of the collector and dashboard benchmarks.
type latencyFigures struct {
	Name  string  `json:"name"`
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// The exporter-over-a-fleet figures only: memory held and series served.
	HeapMiB float64 `json:"heap_mib,omitempty"`
	RSSMiB  float64 `json:"rss_mib,omitempty"`
	Series  int     `json:"series,omitempty"`
	// The dashboard-over-a-fleet figures only: p99 as a share of the poll
	// interval, and p50 against one database's in the same run.
	OfInterval float64 `json:"p99_of_interval,omitempty"`
	VsOne      float64 `json:"p50_vs_one_database,omitempty"`
	CPUMS      float64 `json:"cpu_ms_per_refresh,omitempty"`
}

func figures(name string, ds []time.Duration) latencyFigures {
	msf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return latencyFigures{Name: name, N: len(ds), P50MS: msf(bench.Quantile(ds, .5)), P99MS: msf(bench.Quantile(ds, .99)), MaxMS: msf(bench.Quantile(ds, 1))}
}

func (a *app) writeFigures(jsonPath string, fs ...latencyFigures) error {
	for _, f := range fs {
		fmt.Fprintf(a.stdout, "%-40s n=%-4d p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms", f.Name, f.N, f.P50MS, f.P99MS, f.MaxMS)
		if f.OfInterval > 0 {
			fmt.Fprintf(a.stdout, "   p99 %.0f%% of the interval", 100*f.OfInterval)
		}
		if f.VsOne > 0 {
			fmt.Fprintf(a.stdout, "   p50 ×%.1f one database", f.VsOne)
		}
		if f.CPUMS > 0 {
			fmt.Fprintf(a.stdout, "   CPU %.0f ms/refresh", f.CPUMS)
		}
		if f.HeapMiB > 0 {
			fmt.Fprintf(a.stdout, "   heap %.0f MiB, RSS %.0f MiB", f.HeapMiB, f.RSSMiB)
		}
		fmt.Fprintln(a.stdout)
	}
	return writeJSON(jsonPath, fs)
}

// debugf is the progress log of the benchmarks: debug lines (--log-level debug).
func (a *app) debugf(f string, args ...any) { a.log.Debug(fmt.Sprintf(f, args...)) }

// latencyCommand is the shape of the benchmarks that time leadership changes made
// by SQL on a throwaway PostgreSQL: run returns the figures to print.
func (a *app) latencyCommand(use, short, long, example string, defaultN int,
	run func(ctx context.Context, h *harness, n int, logf func(string, ...any)) ([]latencyFigures, error)) *cobra.Command {
	var (
		n        int
		jsonPath string
	)
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if n < 1 {
				return cli.BadInput("-n must be ≥ 1 (got %d)", n)
			}
			return a.withHarness(cmd, "bench", false, func(ctx context.Context, h *harness) error {
				fs, err := run(ctx, h, n, a.debugf)
				if err != nil {
					return err
				}
				return a.writeFigures(jsonPath, fs...)
			})
		}),
	}
	cmd.Flags().IntVarP(&n, "iterations", "n", defaultN, "leadership changes")
	cmd.Flags().StringVar(&jsonPath, "json", "", "also write the figures as JSON to `FILE`")
	return cmd
}

// runReport runs a benchmark that produces a report (bench failover, bench
// scale) on a fresh harness, then prints the report's table and what ran in how
// long, and writes the report as JSON to jsonPath. A run that failed part-way
// still returns what it measured: that is printed too, before its error.
func runReport[T any, R interface {
	*T
	WriteTable(io.Writer)
}](a *app, cmd *cobra.Command, what, jsonPath string, keep bool, run func(ctx context.Context, h *harness) (R, error)) error {
	return a.withHarness(cmd, "bench", keep, func(ctx context.Context, h *harness) error {
		began := time.Now()
		rep, err := run(ctx, h)
		if rep == nil {
			return err
		}
		fmt.Fprintln(a.stdout)
		rep.WriteTable(a.stdout)
		fmt.Fprintf(a.stdout, "\n(%s in %v)\n", what, time.Since(began).Round(time.Second))
		if werr := writeJSON(jsonPath, rep); werr != nil {
			return werr
		}
		return err
	})
}

func (a *app) benchCollectorCommand() *cobra.Command {
	var fleet fleetSize
	cmd := a.latencyCommand("collector",
		"Measure commit → collector event latency, a full read, and the exporter over a fleet (10 databases × 1,000 scopes)",
		`collector makes -n leadership changes by SQL and times each from the moment its
commit returned to the moment the collector's event stream delivered it (LISTEN
leader_change → re-read), then times full reads over 100 forged scopes and 300
forged nodes; then the same changes on the logical replication source (pgoutput
from a temporary slot). Targets: event p99 ≤ 100 ms (notify), ≤ 20 ms (logical);
full read < 50 ms.

Then the exporter over a fleet: --databases databases on the same server (created,
migrated and forged with SQL: --scopes led scopes over --nodes nodes each,
heartbeats kept fresh, dropped afterwards), a collector per database and one
exporter over them, scraped 20 times over loopback — first over one database of
the fleet, then over all of them, in the same run: scrape time, series, the
collectors' full reads and the memory held, with the fleet's ratios to one
database's. Target: scrape < 1 s. --databases 0 skips it.`,
		`  pgleader bench collector -n 200 --json docs/bench-collector.json
  pgleader bench collector -n 20 --databases 3 --scopes 200`, 200,
		func(ctx context.Context, h *harness, n int, logf func(string, ...any)) ([]latencyFigures, error) {
			var out []latencyFigures
			for _, src := range []collector.SourceMode{collector.SourceModeNotify, collector.SourceModeLogical} {
				res, err := bench.CollectorSourceLatency(ctx, h.dsn, src, n, logf)
				if err != nil {
					return nil, fmt.Errorf("%s source: %w", src, err)
				}
				out = append(out, figures(fmt.Sprintf("commit → collector event (%s)", res.Source), res.CommitToEvent))
				if src == collector.SourceModeNotify {
					full := latencyFigures{Name: fmt.Sprintf("full read (%d scopes, %d nodes)", res.Scopes, res.Nodes), N: 30,
						P50MS: float64(res.PollFull.Microseconds()) / 1000, P99MS: float64(res.PollP99.Microseconds()) / 1000}
					full.MaxMS = full.P99MS
					out = append(out, full)
				}
			}
			if fleet.databases == 0 {
				return out, nil
			}
			res, err := a.fleetScrape(ctx, h, fleet, logf)
			if err != nil {
				return out, err
			}
			for _, f := range []bench.ScrapeFigures{res.One, res.Fleet} {
				fig := figures(fmt.Sprintf("exporter scrape (%d × %d scopes)", f.Databases, res.Scopes), f.Scrape)
				fig.HeapMiB, fig.RSSMiB, fig.Series = f.HeapMiB, f.RSSMiB, f.Series
				out = append(out, fig)
			}
			return out, nil
		})
	fleet.register(cmd, 10)
	cmd.PreRunE = func(*cobra.Command, []string) error { return fleet.check() }
	return cmd
}

// fleetSize is the size of a forged fleet: --databases × (--scopes, --nodes).
type fleetSize struct{ databases, scopes, nodes int }

func (s *fleetSize) register(cmd *cobra.Command, databases int) {
	f := cmd.Flags()
	f.IntVar(&s.databases, "databases", databases, "databases of the forged fleet (0: no fleet run)")
	f.IntVar(&s.scopes, "scopes", 1000, "led scopes per database of the fleet")
	f.IntVar(&s.nodes, "nodes", 5, "nodes per database of the fleet")
}

func (s fleetSize) check() error {
	switch {
	case s.databases < 0 || s.databases > 50:
		return cli.BadInput("--databases must be between 0 and 50 (got %d)", s.databases)
	case s.scopes < 1 || s.scopes > 5000:
		return cli.BadInput("--scopes must be between 1 and 5000 (got %d)", s.scopes)
	case s.nodes < 1 || s.nodes > 100:
		return cli.BadInput("--nodes must be between 1 and 100 (got %d)", s.nodes)
	}
	return nil
}

// fleetScrape forges the fleet on the harness's server, measures the exporter
// over it (bench.FleetScrape), prints its table and drops the fleet.
func (a *app) fleetScrape(ctx context.Context, h *harness, s fleetSize, logf func(string, ...any)) (bench.FleetScrapeResult, error) {
	f, err := bench.ForgeFleet(ctx, bench.FleetOptions{DSN: h.dsn, Databases: s.databases, Scopes: s.scopes, Nodes: s.nodes, Logf: logf})
	if err != nil {
		return bench.FleetScrapeResult{}, fmt.Errorf("forge the fleet: %w", err)
	}
	defer f.Close()
	res, err := bench.FleetScrape(ctx, f, s.scopes, s.nodes, 20, logf)
	if err != nil {
		return res, err
	}
	fmt.Fprintln(a.stdout)
	res.WriteTable(a.stdout)
	fmt.Fprintln(a.stdout)
	return res, nil
}

func (a *app) benchDashboardCommand() *cobra.Command {
	var fleet fleetSize
	cmd := a.latencyCommand("dashboard", "Measure commit → on screen: pgleader top in a real terminal (tmux); with --databases, a full refresh over a fleet",
		`dashboard runs `+"`pgleader top`"+` in a detached tmux session (120×40) and makes -n
leadership changes by SQL, timing each from the moment its commit returned until
capture-pane shows the new leader in the scope's row (sampled every 2 ms). Target:
p99 ≤ 250 ms. Needs tmux.

With --databases N it measures instead a full refresh of top over a fleet: N
databases on the same server (created, migrated and forged with SQL: --scopes led
scopes over --nodes nodes each, heartbeats kept fresh, dropped afterwards), -n
refreshes one per second — every database read at once through its collector and
merged, then a dashboard taking the snapshot and drawing a 120×40 frame — first
over one database of the fleet, then over all of them, in the same run, with the
live heap after each and the fleet's ratio to one database. Target: the fleet's
p99 within the 1 s poll interval.`,
		`  pgleader bench dashboard -n 50 --json docs/bench-dashboard.json
  pgleader bench dashboard --databases 10 -n 30 --json docs/bench-dashboard-fleet.json`, 50,
		func(ctx context.Context, h *harness, n int, logf func(string, ...any)) ([]latencyFigures, error) {
			if fleet.databases > 0 {
				return a.dashboardFleet(ctx, h, fleet, n, logf)
			}
			res, err := bench.DashboardLatency(ctx, h.bin, h.dsn, n, logf)
			if err != nil {
				return nil, err
			}
			return []latencyFigures{figures("commit → on screen (pgleader top, tmux)", res.CommitToScreen)}, nil
		})
	fleet.register(cmd, 0)
	cmd.PreRunE = func(*cobra.Command, []string) error { return fleet.check() }
	return cmd
}

// dashboardFleet forges the fleet on the harness's server, times top's
// refreshes over it (bench.DashboardFleet) and drops the fleet: each
// configuration's full refresh, read and render, the fleet's beside one
// database's.
func (a *app) dashboardFleet(ctx context.Context, h *harness, s fleetSize, n int, logf func(string, ...any)) ([]latencyFigures, error) {
	f, err := bench.ForgeFleet(ctx, bench.FleetOptions{DSN: h.dsn, Databases: s.databases, Scopes: s.scopes, Nodes: s.nodes, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("forge the fleet: %w", err)
	}
	defer f.Close()
	res, err := bench.DashboardFleet(ctx, f, time.Second, n, 120, 40, logf)
	if err != nil {
		return nil, err
	}
	var out []latencyFigures
	oneP50 := bench.Quantile(res.One.Total, .5)
	for _, c := range []bench.RefreshFigures{res.One, res.Fleet} {
		what := fmt.Sprintf("%d × %d scopes", c.Databases, s.scopes)
		total := figures("top refresh ("+what+")", c.Total)
		total.OfInterval = float64(bench.Quantile(c.Total, .99)) / float64(res.Interval)
		if c.Databases > 1 && oneP50 > 0 {
			total.VsOne = float64(bench.Quantile(c.Total, .5)) / float64(oneP50)
		}
		total.HeapMiB, total.RSSMiB = c.HeapMiB, c.RSSMiB
		total.CPUMS = float64(c.CPU.Microseconds()) / 1000
		out = append(out, total, figures("  read + merge ("+what+")", c.Read), figures("  render ("+what+")", c.Render))
	}
	return out, nil
}

func (a *app) benchFailoverCommand() *cobra.Command {
	var (
		n         int
		nodes     int
		scenarios []string
		jsonPath  string
		nodeArgs  string
		mode      string
		keep      bool
		split     bool
		baseline  string
		pairs     int
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure crash, graceful and frozen-leader failover against the physical limit, the gate check and idle load",
		Long: `failover runs real ` + "`pgleader node`" + ` processes (this binary) on this host and
applies faults to the leader, timing each takeover from the moment the fault was
sent to the successor's gate opening, as both record them on CLOCK_MONOTONIC:

  limit     kill -9 of a holder process     → a bare follower's pg_advisory_lock
                                              returns: the physical limit, on the
                                              same server in the same run
  crash     kill -9 of the leader           → a follower's gate open
  graceful  SIGTERM of the leader (drain)   → a follower's gate open; and the gap
                                              between the old gate closing and the new opening
  frozen    SIGSTOP of the leader           → a follower's gate open; and the gap
                                              between the old trust window's end and the new opening
  terminate pg_terminate_backend of the leader's session → a follower's gate open;
            and how fast the old leader closed its gate (it lives on and rejoins)
  handover  pgleader handover --to a follower started → that follower's gate open;
            and the gap between the old gate closing and the new opening
  priority  kill -9 of the leader with priorities 3, 2, 1 set → the highest-priority
            live follower's gate open (which node won is checked every time)
  gate      Scope.Require / Token.Valid on a live leader: ns/op, allocs/op
  load      transactions per node per heartbeat interval on an idle cluster

Every iteration restarts the faulted node and waits until all nodes follow the
leader again. The limit runs whenever a failover scenario does: one sample before
each crash iteration (same machine load), else first, beside an idle cluster.
Every failover figure is printed beside it, as p50 and p99 ratios; the targets are
crash p99 ≤ 2× limit p99 (one scope, 3 nodes; with priorities too), handover p99
≤ 50 ms, and the highest-priority candidate winning every kill, reported PASS or
MISS (a miss does not fail the command). The frozen scenario takes about one session lease (2s by default)
per iteration. Without --dsn or DATABASE_URL it starts a throwaway PostgreSQL
(as the postgres OS user when run as root) and removes it afterwards; with one,
it migrates that database and uses scopes named bench-*.

--mode lease runs every node in lease mode through a PgBouncer (transaction
pooling) that the benchmark starts in front of the database; terminate is
skipped. Its bounds follow from the timing, not from the lock's limit (printed
beside it all the same): crash p99 ≤ session lease + heartbeat interval, a
frozen leader's gate closed ≥ session lease − trust window before the new one
opens (every time), idle load ≤ 2 transactions per leader and 1 per follower per
interval.

--split adds to every crash iteration a bare waiter in pg_advisory_lock_shared on
the leader's beacon (its leadership session holds it beside the scope locks), and
splits the crash figure: kill → the leader's locks freed (the leader's death, beside
the limit), and freed → the successor's gate open (the election). The waiter is
one more backend woken by the death. It also samples, beside each limit sample,
a second reference: the same holder, whose process also keeps an idle session
(an advisory lock and a LISTEN, the shape of a node's guard session). Every idle
backend of a killed process exits at the same moment, so this is the floor for
any leader with two sessions on this machine.

--baseline REF (a git commit or tag of this repository, built once and cached,
or the path of a pgleader binary) measures an earlier build beside this one in
the same run: --pairs times, alternately (the baseline first in odd pairs), the
same scenarios on each, every side on its own database of the throwaway server,
migrated by its own build (so its nodes run its own SQL). The table gives both
sides pair by pair and pooled, with this build's difference and ratio.`,
		Example: `  pgleader bench failover -n 50 --json docs/bench-failover.json
  pgleader bench failover -n 50 --scenarios crash,handover --baseline a00a362 --pairs 3
  pgleader bench failover -n 10 --scenarios crash,graceful
  pgleader bench failover -n 20 --scenarios crash --split
  pgleader bench failover --mode lease -n 20 --scenarios crash,frozen,load`,
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
			if mode != "lock" && mode != "lease" {
				return cli.BadInput("--mode %q: choose lock or lease", mode)
			}
			if split && (mode == "lease" || !contains(scenarios, "crash")) {
				return cli.BadInput("--split splits the crash figure of lock mode; run it with crash in --scenarios and without --mode lease")
			}
			if mode == "lease" && cmd.Flags().Changed("scenarios") && contains(scenarios, "terminate") {
				return cli.BadInput("--scenarios terminate has no meaning with --mode lease (a lease-mode node has no leadership session to terminate); leave it out")
			}
			opts := bench.Options{N: n, Nodes: nodes, Scenarios: scenarios, NodeArgs: strings.Fields(nodeArgs),
				Progress: a.stderr, Mode: mode, Split: split}
			if baseline != "" {
				if pairs < 1 {
					return cli.BadInput("--pairs must be ≥ 1 (got %d)", pairs)
				}
				if a.harnessDSN() != "" {
					return cli.BadInput("--baseline needs the throwaway PostgreSQL (each build gets a database of its own there): leave out --dsn and DATABASE_URL")
				}
				bin, label, err := baselineBinary(baseline)
				if err != nil {
					return err
				}
				return runReport(a, cmd, "A/B "+strings.Join(scenarios, ", "), jsonPath, keep, func(ctx context.Context, h *harness) (*bench.Comparison, error) {
					dsn, err := baselineDatabase(ctx, h, bin)
					if err != nil {
						return nil, err
					}
					opts.Bin, opts.DSN, opts.Dir = h.bin, h.dsn, h.dir
					return bench.Compare(ctx, opts, bench.Baseline{Label: label, Bin: bin, DSN: dsn}, pairs)
				})
			}
			return runReport(a, cmd, strings.Join(scenarios, ", "), jsonPath, keep, func(ctx context.Context, h *harness) (*bench.Report, error) {
				opts.Bin, opts.DSN, opts.Dir = h.bin, h.dsn, h.dir
				return bench.Run(ctx, opts)
			})
		}),
	}
	f := cmd.Flags()
	f.IntVarP(&n, "iterations", "n", 50, "iterations per fault scenario")
	f.IntVar(&nodes, "nodes", 3, "candidate processes")
	f.StringSliceVar(&scenarios, "scenarios", bench.AllScenarios, "scenarios to run, comma-separated")
	f.StringVar(&jsonPath, "json", "", "also write the report as JSON to `FILE`")
	f.StringVar(&nodeArgs, "node-args", "", "extra flags for every node, e.g. \"--session-lease 3s\" (default: the engine's defaults)")
	f.StringVar(&mode, "mode", "lock", "`MODE` of the nodes: lock, or lease (through a PgBouncer in transaction pooling that the benchmark starts)")
	f.BoolVar(&keep, "keep", false, "keep the nodes' events files and logs (to look into an outlier: the iteration's timestamps are on the nodes' mono_ns clock)")
	f.BoolVar(&split, "split", false, "crash: also time when the leader's locks are freed (a bare waiter on its beacon), splitting death from election")
	f.StringVar(&baseline, "baseline", "", "also measure an earlier build in the same run: a git `REF` of this repository (built and cached) or a pgleader binary's path")
	f.IntVar(&pairs, "pairs", 3, "with --baseline: alternating pairs of runs (baseline, this build)")
	return cmd
}

func (a *app) benchScaleCommand() *cobra.Command {
	var (
		nodes, scopes, n int
		idle, timeout    time.Duration
		jsonPath         string
		nodeArgs         string
		keep             bool
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure N nodes × M scopes: election time, connections, idle cost, takeover of a killed leader",
		Long: `scale runs --nodes ` + "`pgleader node`" + ` processes (this binary) on this host, each
campaigning for the same --scopes scopes, and measures:

  - the time from starting the first node until every scope is led (gate open);
  - server connections per node (pg_stat_activity, by application_name
    "pgleader <role> <node>");
  - transactions per node per heartbeat interval, CPU (utime+stime) and RSS of
    every node over an idle window (--idle-window);
  - the physical limit, -n samples on the same server (see bench failover);
  - kill -9 of the node leading the most scopes → each of its scopes' successor
    gate opening: p50, p99, max, beside the limit, and whether every scope was
    led again.

The engine caps the scopes a node may campaign for (MaxScopes): if --scopes
exceeds it, the nodes refuse to start and the command prints their error. Without
--dsn or DATABASE_URL it starts a throwaway PostgreSQL and removes it afterwards.`,
		Example: `  pgleader bench scale
  pgleader bench scale --nodes 3 --scopes 50 --json docs/bench-scale.json`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if nodes < 2 || scopes < 1 || n < 0 {
				return cli.BadInput("--nodes must be ≥ 2, --scopes ≥ 1 and -n ≥ 0 (got %d, %d and %d)", nodes, scopes, n)
			}
			return runReport(a, cmd, "scale", jsonPath, keep, func(ctx context.Context, h *harness) (*bench.ScaleReport, error) {
				return bench.RunScale(ctx, bench.ScaleOptions{Bin: h.bin, DSN: h.dsn, Dir: h.dir, Nodes: nodes, Scopes: scopes,
					LimitN: n, IdleWindow: idle, NodeArgs: strings.Fields(nodeArgs), Progress: a.stderr, Timeout: timeout})
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 5, "node processes")
	f.IntVar(&scopes, "scopes", 1000, "scopes every node campaigns for")
	f.IntVarP(&n, "iterations", "n", 20, "physical-limit samples (0: none)")
	f.DurationVar(&idle, "idle-window", 10*time.Second, "window of the idle load, CPU and memory figures")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "limit of each phase (all led, settled, all led again)")
	f.StringVar(&jsonPath, "json", "", "also write the report as JSON to `FILE`")
	f.StringVar(&nodeArgs, "node-args", "", "extra flags for every node, e.g. \"--heartbeat-interval 1s\" (default: the engine's defaults)")
	f.BoolVar(&keep, "keep", false, "keep the nodes' events files and logs")
	return cmd
}

// benchHolderCommand is the holder process of the physical limit: bench failover
// and bench scale start it, wait for its ready line and kill it.
func (a *app) benchHolderCommand() *cobra.Command {
	var (
		key  int64
		idle int
	)
	cmd := &cobra.Command{
		Use:    "holder --key K",
		Short:  "Hold pg_advisory_lock(K) until killed (the physical limit's holder)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			t, err := a.resolve()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if idle < 0 {
				return cli.BadInput("--idle-sessions must be ≥ 0 (got %d)", idle)
			}
			return bench.Hold(ctx, t.Config, key, idle, a.stdout)
		}),
	}
	cmd.Flags().Int64Var(&key, "key", 0, "advisory lock `K` to hold")
	cmd.Flags().IntVar(&idle, "idle-sessions", 0, "also keep `N` idle sessions, each with an advisory lock and a LISTEN")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func (a *app) benchDemoCommand() *cobra.Command {
	var (
		n        int
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Measure `pgleader demo`: start → leaders on the dashboard, q → shell back (tmux)",
		Long: `demo launches ` + "`pgleader demo`" + ` -n times in a detached tmux session (120×40), times
the start until the dashboard shows every scope OK (throwaway PostgreSQL started,
nodes elected) and the quit from pressing q until the shell runs again, and checks
that no node process is left. Targets: < 10 s and < 2 s. Needs tmux.`,
		Example: `  pgleader bench demo -n 5 --json docs/bench-demo.json`,
		Args:    cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if n < 1 {
				return cli.BadInput("-n must be ≥ 1 (got %d)", n)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			res, err := bench.DemoTiming(ctx, bin, n, a.debugf)
			if err != nil {
				return err
			}
			if len(res.Leftovers) > 0 {
				return fmt.Errorf("left behind after quitting: %s", strings.Join(res.Leftovers, "; "))
			}
			return a.writeFigures(jsonPath, figures("demo start → leaders on screen", res.ToLeaders),
				figures("demo q → shell back", res.ToShell))
		}),
	}
	cmd.Flags().IntVarP(&n, "iterations", "n", 5, "demo runs")
	cmd.Flags().StringVar(&jsonPath, "json", "", "also write the figures as JSON to `FILE`")
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
