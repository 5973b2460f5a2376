package collector

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// A collector watching a primary and its asynchronous standby through a multi-host
// DSN follows the promotion: it says once that the database failed over (timeline
// and epoch floor), shows the new primary's state rather than the old one's, and
// its logical stream restarts on the new one: on a new temporary slot, or on its
// permanent slot created anew there (slots are not carried to a promoted standby
// before PostgreSQL 17), where the position it had read on the old primary, which
// may be ahead of the new primary's WAL, must not make it skip what comes next.
func TestCollectorFollowsAFailover(t *testing.T) {
	pgtest.Slow(t)
	for _, slot := range []string{"", "pgleader_failover_test"} {
		name := "TemporarySlot"
		if slot != "" {
			name = "PermanentSlotAheadOfTheNewPrimary"
		}
		t.Run(name, func(t *testing.T) { testCollectorFollowsAFailover(t, slot) })
	}
}

func testCollectorFollowsAFailover(t *testing.T, slot string) {
	ctx := context.Background()
	primary := pgtest.NewServer(t)
	if err := primary.CreateDatabase(ctx, "fo"); err != nil {
		t.Fatal(err)
	}
	pgtest.Migrate(t, primary.DSN("fo"))
	standby := pgtest.NewStandby(t, primary)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/fo?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())

	cfg := testConfig(t, dsn)
	cfg.Source = SourceModeLogical
	cfg.Slot = slot
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	n := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
	before := waitSnap(t, c, "n1 leads s", func(s *Snapshot) bool {
		sc, ok := s.Scope("s")
		return ok && sc.Leader == "n1" && s.Health.Source == SourceLogical
	})
	if before.Timeline != 1 || before.EpochFloor != 0 {
		t.Fatalf("before the failover: timeline %d, floor %d; want 1, 0", before.Timeline, before.EpochFloor)
	}
	if err := standby.WaitReplayed(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if slot != "" {
		// The standby stops receiving; the collector streams terms the new primary
		// will never have, so its position runs ahead of the new primary's WAL.
		if err := standby.StopReceiving(ctx); err != nil {
			t.Fatal(err)
		}
		// Plus a megabyte of WAL the standby never receives, so that the new
		// primary's WAL stays behind that position for a while.
		exec(t, pgtest.Connect(t, primary.DSN("fo")), "CREATE TABLE filler AS SELECT repeat('x', 1000) AS x FROM generate_series(1, 1000)")
		for i := range 3 {
			resign(t, n, "s")
			rec.waitEvent(t, fmt.Sprintf("elected epoch %d", i+2), func(e Event) bool {
				return e.Kind == EventElected && e.Epoch == int64(i+2)
			})
		}
	}
	if err := primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	ev := rec.waitEvent(t, "the failover event", func(e Event) bool { return e.Kind == EventFailover })
	if ev.Epoch != 1<<40 || !strings.Contains(ev.Detail, "timeline 1 → 2") {
		t.Fatalf("failover event %+v", ev)
	}
	after := waitSnap(t, c, "n1 leads s on the new primary, above the floor, streaming again", func(s *Snapshot) bool {
		sc, ok := s.Scope("s")
		return ok && sc.Leader == "n1" && sc.Epoch > 1<<40 && s.Health.Source == SourceLogical
	})
	if after.Timeline != 2 || after.EpochFloor != 1<<40 {
		t.Fatalf("after the failover: timeline %d, floor %d; want 2, %d", after.Timeline, after.EpochFloor, int64(1)<<40)
	}
	if after.Health.Reconnects == 0 {
		t.Errorf("the collector did not reconnect: %+v", after.Health)
	}
	// What happens on the new primary reaches the event log.
	for i := range 2 {
		prev := after.Scopes[0].Epoch + int64(i)
		resign(t, n, "s")
		rec.waitEvent(t, fmt.Sprintf("elected epoch %d on the new primary", prev+1), func(e Event) bool {
			return e.Kind == EventElected && e.Epoch == prev+1
		})
	}
}

// resign waits until n's gate for scope is open (the collector sees a claim commit
// before the claimer has its answer) and resigns it.
func resign(t *testing.T, n *testnode.Node, scope string) {
	t.Helper()
	pgtest.WaitFor(t, n.NodeID()+" leading "+scope, wait, func() bool { return n.Leads(scope) })
	if err := n.Scope(scope).Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
}
