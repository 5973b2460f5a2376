package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pgleader/pgleader/lab/chaos"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/faultnet"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

var binary string

func TestMain(m *testing.M) {
	// Nodes without the race detector: chaos is about timing under faults, and
	// 20 race-instrumented processes on 2 cores would starve each other's heartbeats.
	bin, cleanup, err := cluster.Build(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	// toxiproxy v2.12.0 (lab/faultnet) leaves a toxic's goroutine blocked in a
	// channel send, sometimes with its link's reader, when a connection dies with
	// data in flight (a reset, or a heal that closes hung connections). They hold
	// no sockets; everything of ours is still checked.
	pgtest.IgnoreLeaks(
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
	)
	pgtest.Main(m, cleanup)
}

// TestShortProfile is the chaos profile of `make test`: a handful of scenarios for a
// few seconds each (`make chaos` runs all of them for longer). Every scenario must
// pass H1–H5 with zero gate overlap and leave its footprint.
func TestShortProfile(t *testing.T) {
	pgtest.Slow(t)
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "chaos"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("chaos")
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	dir := t.TempDir()
	// On failure, the nodes' warnings are what tells a hang from a crash.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
		more, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range append(logs, more...) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var keep []string
			for _, l := range strings.Split(string(b), "\n") {
				// Warnings, errors, and lines of no log level: a node process that
				// exited prints its error plainly as its last line.
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "panic") ||
					(l != "" && !strings.HasPrefix(l, "time=")) {
					keep = append(keep, l)
				}
			}
			if len(keep) > 20 {
				keep = keep[len(keep)-20:]
			}
			t.Logf("%s (last warnings):\n%s", f, strings.Join(keep, "\n"))
		}
	})
	rs, err := chaos.Run(ctx, chaos.Options{Bin: binary, DSN: dsn, Server: srv, Dir: dir, Seed: 1,
		Duration: 4 * time.Second,
		Scenarios: []string{"kill9", "stop-short", "stop-long", "pause-write", "terminate", "pg-immediate", "net-hang", "latency-low", "partition",
			"pg-failover-sync", "pg-failover-async", "squat", "handover", "notify-flood"},
		Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	checkProfile(t, rs, &progress, 14, nil)
}

// TestLeaseProfile is lease mode's chaos profile in `make test`: every node through
// a real PgBouncer in transaction mode, the process and network faults, H1–H5 and
// zero overlap as in lock mode; a scenario without meaning in lease mode is
// skipped, saying why.
func TestLeaseProfile(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	var progress strings.Builder
	rs, err := chaos.Run(context.Background(), chaos.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), Seed: 1, Mode: "lease",
		Duration:  4 * time.Second,
		Scenarios: []string{"kill9", "sigterm", "stop-long", "pause-write", "handover", "net-hang", "terminate"},
		Progress:  &progress})
	if err != nil {
		t.Fatal(err)
	}
	checkProfile(t, rs, &progress, 7, map[string]string{
		"terminate": "not in lease mode: no leadership session to terminate (a lease outlives any backend)"})
}

// TestSupervisedProfile is the supervised chaos profile of `make test`: every node
// is `pgleader run` with a child doing the fenced writes; H1–H5, zero gate
// overlap, and the children's checks (exits recorded, no two at once, no orphan).
func TestSupervisedProfile(t *testing.T) {
	pgtest.Slow(t)
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "chaosrun"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("chaosrun")
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	rs, err := chaos.Run(ctx, chaos.Options{Bin: binary, DSN: dsn, Server: srv, Dir: t.TempDir(), Seed: 1, Supervised: true,
		Duration:  4 * time.Second,
		Scenarios: []string{"kill9", "sigterm", "stop-long", "terminate", "handover", "pg-immediate"},
		Progress:  &progress})
	if err != nil {
		t.Fatal(err)
	}
	checkProfile(t, rs, &progress, 6, nil)
	for _, r := range rs {
		if r.Children == nil || r.Children.Started < 2 {
			t.Errorf("%s: children %+v; want at least two started (a takeover)", r.Scenario, r.Children)
		}
	}
}

// checkProfile checks a chaos profile's results: n of them, each passed with
// zero overlap after applying faults, or skipped for the reason skip names.
func checkProfile(t *testing.T, rs []chaos.Result, progress *strings.Builder, n int, skip map[string]string) {
	t.Helper()
	var table strings.Builder
	chaos.WriteTable(&table, rs)
	t.Logf("\n%s\n%s", progress.String(), table.String())
	if len(rs) != n {
		t.Fatalf("%d results, want %d", len(rs), n)
	}
	netnsSkip := faultnet.NamespaceSupport()
	if netnsSkip != "" && os.Getenv("CI") != "" {
		t.Errorf("partition cannot run in CI: %s (CI runs as root with iproute2 and nftables)", netnsSkip)
	}
	for _, r := range rs {
		if why, ok := skip[r.Scenario]; ok {
			if r.Skipped != why {
				t.Errorf("%s: skipped %q, want %q", r.Scenario, r.Skipped, why)
			}
			continue
		}
		if r.Scenario == "partition" && netnsSkip != "" {
			// Only where this machine lacks the privilege, and saying so.
			if r.Skipped != netnsSkip {
				t.Errorf("partition: skipped %q, want %q", r.Skipped, netnsSkip)
			}
			continue
		}
		if r.Skipped != "" {
			t.Errorf("%s skipped: %s", r.Scenario, r.Skipped)
		}
		if !r.OK() {
			t.Errorf("%s failed", r.Scenario)
		}
		if r.Faults == 0 {
			t.Errorf("%s applied no fault", r.Scenario)
		}
		if o := r.Report.Figures.GateOverlap; o != 0 {
			t.Errorf("%s: gates overlapped for %v", r.Scenario, o)
		}
		if r.Scenario == "squat" && (r.SquattersNamed == 0 || r.SquattersNamed%2 != 0 || len(r.ResumeMS) == 0) {
			t.Errorf("squat: %d collector reads named the squatter and %d resumptions were measured; want two reads per squat and at least one squat",
				r.SquattersNamed, len(r.ResumeMS))
		}
		if strings.HasPrefix(r.Scenario, "pg-failover-") && len(r.ResumeMS) == 0 {
			t.Errorf("%s: no failover completed", r.Scenario)
		}
	}
}

// TestCatchesUnfencedWrites shows the whole pipeline is not vacuous: nodes whose
// workload forgets to fence, under the pause-between-check-and-write fault, get
// their stale writes accepted, and the run must fail with H3 violations.
func TestCatchesUnfencedWrites(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.DSN(t)
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	rs, err := chaos.Run(context.Background(), chaos.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), Seed: 1,
		Duration: 3 * time.Second, Scenarios: []string{"pause-write"}, NodeArgs: []string{"--test-unsafe-skip-fence"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	r := rs[0]
	h3 := 0
	for _, v := range r.Report.Violations {
		if v.Rule == "H3" {
			h3++
		}
	}
	if r.OK() || h3 == 0 || r.Report.Figures.StaleAccepted == 0 {
		var table strings.Builder
		chaos.WriteTable(&table, rs)
		t.Fatalf("unfenced stale writes went unnoticed (ok=%v, H3=%d, stale accepted=%d):\n%s",
			r.OK(), h3, r.Report.Figures.StaleAccepted, table.String())
	}
	t.Logf("caught: %d H3 violations, %d stale writes accepted, e.g. %s", h3, r.Report.Figures.StaleAccepted, r.Report.Violations[0])
}

// TestShippedBinarySkipsHookScenarios: on a node built without the lab tag (no
// --test-* flags), pause-write is skipped, saying why, before any node starts.
func TestShippedBinarySkipsHookScenarios(t *testing.T) {
	rs, err := chaos.Run(context.Background(), chaos.Options{Bin: "/nonexistent/pgleader", Dir: t.TempDir(),
		Duration: time.Second, Scenarios: []string{"pause-write"}, NoTestHooks: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !strings.Contains(rs[0].Skipped, "pgleader_lab") || !rs[0].OK() {
		t.Fatalf("pause-write without the hooks: %+v, want skipped naming the pgleader_lab tag", rs)
	}
}
