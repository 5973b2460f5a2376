package bench_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/bench"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// binary is the pgleader executable (nodes and the limit's holder), built once.
var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := cluster.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	// A race-enabled node skips the race runtime's one-second pause when it exits
	// after a SIGTERM (the graceful scenario waits for that exit).
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	pgtest.Main(m, cleanup)
}

func setup(t *testing.T) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// These runs check that the figures exist and fit together, never how fast they
// are: figures belong in the benchmark's output, not in pass/fail.

func TestFailoverLimit(t *testing.T) {
	pgtest.Slow(t)
	tests := []struct {
		name      string
		scenarios []string
		figure    string // the failover figure set beside the limit
	}{
		{"InterleavedWithCrash", []string{"limit", "crash"}, "crash failover"},
		{"AddedBeforeGraceful", []string{"graceful"}, "graceful handover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var progress strings.Builder
			rep, err := bench.Run(ctx, bench.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), N: 2, Nodes: 3,
				Scenarios: tt.scenarios, Progress: &progress, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			l := rep.Limit
			if l == nil || l.N != 2 || l.MinMS <= 0 || l.MedianMS <= 0 || l.P99MS < l.MedianMS {
				t.Fatalf("limit figures %+v", l)
			}
			var fig *bench.Stat
			for i, s := range rep.Stats {
				if s.Name == tt.figure {
					fig = &rep.Stats[i]
				} else if s.VsLimit != nil {
					t.Errorf("%s is not a failover figure but has ratios %+v", s.Name, s.VsLimit)
				}
			}
			if fig == nil || fig.N != 2 || fig.VsLimit == nil {
				t.Fatalf("%s figures %+v in %+v", tt.figure, fig, rep.Stats)
			}
			v := fig.VsLimit
			if v.LimitP50MS != l.MedianMS || v.LimitP99MS != l.P99MS ||
				v.P50Ratio != fig.MedianMS/l.MedianMS || v.P99Ratio != fig.P99MS/l.P99MS || v.P50Ratio <= 0 || v.P99Ratio <= 0 {
				t.Errorf("ratios %+v for %s (median %.3f, p99 %.3f) against limit (median %.3f, p99 %.3f)",
					v, fig.Name, fig.MedianMS, fig.P99MS, l.MedianMS, l.P99MS)
			}
			var table strings.Builder
			rep.WriteTable(&table)
			for _, want := range []string{"physical limit", "p99 × limit", tt.figure} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
			if tt.figure != "crash failover" {
				return
			}
			if len(rep.Targets) != 1 {
				t.Fatalf("targets %+v, want the crash target", rep.Targets)
			}
			tg := rep.Targets[0]
			if tg.Ratio != v.P99Ratio || tg.Max != bench.CrashTarget || tg.Met != (tg.Ratio <= tg.Max) ||
				(tg.Verdict != "PASS" && tg.Verdict != "MISS") {
				t.Errorf("target %+v", tg)
			}
			if !strings.Contains(table.String(), "target crash failover p99 ≤ 2× limit p99: ") {
				t.Errorf("table lacks the target line:\n%s", table.String())
			}
		})
	}
}

// TestFailoverSplit: with Split, every crash sample is the sum of its two parts
// (kill → the leader's locks freed, freed → the successor's gate open), and the
// first part is set beside the limit like a failover figure.
func TestFailoverSplit(t *testing.T) {
	pgtest.Slow(t)
	dsn := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := bench.Run(ctx, bench.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), N: 3, Nodes: 3,
		Scenarios: []string{"crash"}, Split: true, Progress: &progress, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	stats := map[string]bench.Stat{}
	for _, s := range rep.Stats {
		stats[s.Name] = s
	}
	crash, freed, election := stats["crash failover"], stats["crash: leader's locks freed"], stats["election after the locks freed"]
	if crash.N != 3 || freed.N != 3 || election.N != 3 {
		t.Fatalf("want 3 samples of each part, got %+v", rep.Stats)
	}
	for i := range crash.Samples {
		if freed.Samples[i] <= 0 || math.Abs(freed.Samples[i]+election.Samples[i]-crash.Samples[i]) > 1e-6 {
			t.Errorf("sample %d: freed %.3f + election %.3f ≠ crash %.3f", i, freed.Samples[i], election.Samples[i], crash.Samples[i])
		}
	}
	if freed.VsLimit == nil || election.VsLimit != nil {
		t.Errorf("ratios: freed %+v (want set), election %+v (want none)", freed.VsLimit, election.VsLimit)
	}
	// The second reference: a holder whose process also keeps an idle session,
	// sampled once per iteration beside the limit, set beside it as a ratio.
	guarded := stats["limit, holder with an idle 2nd session"]
	if guarded.N != 3 || guarded.VsLimit == nil || slices.ContainsFunc(guarded.Samples, func(x float64) bool { return x <= 0 }) {
		t.Errorf("holder with an idle session: %+v", guarded)
	}
	if !strings.Contains(progress.String(), "locks freed after") {
		t.Errorf("progress lacks the split:\n%s", progress.String())
	}
}

// TestFailoverLease: in lease mode, through a real PgBouncer, the failover figures
// are checked against the bounds the timing sets (not the lock's limit), the
// terminate scenario is skipped saying why, and the idle load has its target.
func TestFailoverLease(t *testing.T) {
	pgtest.Slow(t)
	dsn := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	args := []string{"--heartbeat-interval", "50ms", "--heartbeat-timeout", "100ms", "--trust-window", "300ms", "--session-lease", "500ms"}
	rep, err := bench.Run(ctx, bench.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), N: 2, Nodes: 3, Mode: "lease",
		Scenarios: []string{"crash", "frozen", "terminate"}, NodeArgs: args, Progress: &progress, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if rep.Mode != "lease" || len(rep.Skipped) != 1 || !strings.HasPrefix(rep.Skipped[0], "terminate: ") {
		t.Fatalf("mode %q, skipped %q", rep.Mode, rep.Skipped)
	}
	targets := map[string]bench.Target{}
	for _, tg := range rep.Targets {
		targets[tg.Stat] = tg
		if tg.Verdict != "PASS" && tg.Verdict != "MISS" {
			t.Errorf("target %+v", tg)
		}
	}
	crash, frozen := targets["crash failover"], targets["frozen gate gap"]
	if crash.Max != 550 || crash.Value <= 0 || crash.Met != (crash.Value <= crash.Max) {
		t.Errorf("crash target %+v, want p99 against lease + interval = 550 ms", crash)
	}
	// The frozen gap is a safety property, not a speed: it must hold every time.
	if frozen.Min != 200 || !frozen.Met || frozen.Value < 200 {
		t.Errorf("frozen target %+v: the old gate must close ≥ lease − trust window = 200 ms before the new opens", frozen)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, want := range []string{"mode: lease, every node through PgBouncer", "skipped terminate:", "target crash failover p99 ≤ lease + interval (550ms)", "(min 200.00)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestScale(t *testing.T) {
	pgtest.Slow(t)
	dsn := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	const nodes, scopes = 3, 20
	rep, err := bench.RunScale(ctx, bench.ScaleOptions{Bin: binary, DSN: dsn, Dir: t.TempDir(), Nodes: nodes, Scopes: scopes,
		LimitN: 3, IdleWindow: time.Second, Progress: &progress, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if rep.Led != scopes || rep.AllLedMS <= 0 {
		t.Errorf("%d/%d scopes led after %.1f ms", rep.Led, scopes, rep.AllLedMS)
	}
	if len(rep.PerNode) != nodes {
		t.Fatalf("%d node rows, want %d", len(rep.PerNode), nodes)
	}
	led, killed := 0, 0
	for _, f := range rep.PerNode {
		if f.Connections <= 0 || f.RSSKiB <= 0 || f.PID <= 0 {
			t.Errorf("node figures %+v", f)
		}
		led += f.Led
		if f.Killed {
			killed++
			if f.Node != rep.Killed || f.Led != rep.KilledLed {
				t.Errorf("killed row %+v, report says %s led %d", f, rep.Killed, rep.KilledLed)
			}
		}
	}
	if led != scopes || killed != 1 {
		t.Errorf("rows lead %d scopes (want %d) and %d are marked killed (want 1)", led, scopes, killed)
	}
	if rep.Load == nil || rep.Load.Transactions <= 0 {
		t.Errorf("idle load %+v", rep.Load)
	}
	if rep.Limit == nil || rep.Limit.N != 3 || rep.Limit.MinMS <= 0 {
		t.Errorf("limit %+v", rep.Limit)
	}
	tk := rep.Takeover
	if rep.KilledLed == 0 || !rep.AllReLed || rep.ReLed != rep.KilledLed || tk == nil || tk.N != rep.KilledLed || tk.MinMS <= 0 {
		t.Fatalf("killed %s leading %d, %d led again (all: %v), takeover %+v", rep.Killed, rep.KilledLed, rep.ReLed, rep.AllReLed, tk)
	}
	if tk.VsLimit == nil || tk.VsLimit.P99Ratio <= 0 {
		t.Errorf("takeover not set beside the limit: %+v", tk.VsLimit)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, want := range []string{"every scope led", "scale takeover", "physical limit", "(killed)", "led again (all)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestRunSupervised checks that the figures of `pgleader bench run` exist and fit
// together, and that no child outlived its killed supervisor (that one is a
// correctness check, not a timing).
func TestRunSupervised(t *testing.T) {
	pgtest.Slow(t)
	dsn := setup(t)
	rep, err := bench.RunSupervised(context.Background(), bench.RunOptions{Bin: binary, DSN: dsn, Dir: t.TempDir(), N: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Orphans != 0 {
		t.Fatalf("%d children outlived their killed supervisor", rep.Orphans)
	}
	for _, s := range []bench.Stat{rep.NodeFailover, rep.RunFailover, rep.RunGate, rep.GateToGone} {
		if s.N != 2 || s.MinMS <= 0 {
			t.Errorf("%s: n=%d min %.3f ms; want 2 positive samples", s.Name, s.N, s.MinMS)
		}
	}
	for i := range rep.RunFailover.Samples {
		if rep.RunFailover.Samples[i] < rep.RunGate.Samples[i] {
			t.Errorf("sample %d: the child started (%.2f ms) before the gate opened (%.2f ms)", i, rep.RunFailover.Samples[i], rep.RunGate.Samples[i])
		}
	}
}

// TestDashboardLatency: `pgleader bench dashboard` drives pgleader top in tmux
// with leadership changes made as a node's session makes them (registered on
// that session, as the schema's caller proofs require), and each one reaches
// the screen.
func TestDashboardLatency(t *testing.T) {
	pgtest.Slow(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is missing: .ci/install-deps installs it")
		}
		t.Skip("needs tmux")
	}
	dsn := setup(t)
	res, err := bench.DashboardLatency(context.Background(), binary, dsn, 2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CommitToScreen) != 2 {
		t.Fatalf("%d changes timed, want 2", len(res.CommitToScreen))
	}
	for i, d := range res.CommitToScreen {
		if d <= 0 {
			t.Errorf("change %d: %v from commit to screen", i+1, d)
		}
	}
}
