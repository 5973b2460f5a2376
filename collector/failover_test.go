package collector

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/internal/pgtest"
)

// A collector watching a primary and its asynchronous standby through a multi-host
// DSN follows the promotion: it says once that the database failed over (timeline
// and epoch floor), shows the new primary's state rather than the old one's, and
// its logical stream, whose temporary slot died with the old primary, restarts on
// the new one.
func TestCollectorFollowsAFailover(t *testing.T) {
	ctx := context.Background()
	primary := pgtest.NewServer(t)
	if err := primary.CreateDatabase(ctx, "fo"); err != nil {
		t.Fatal(err)
	}
	migrate(t, primary.DSN("fo"))
	standby := pgtest.NewStandby(t, primary)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/fo?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())

	for _, mode := range []SourceMode{SourceModeLogical} {
		cfg := testConfig(t, dsn)
		cfg.Source = mode
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		startNode(t, dsn, "n1", "s")
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
	}
}
