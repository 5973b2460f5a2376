package replay

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestReplay runs real elections, notes the database's time between the
// transitions, and checks that a replay at each of those instants shows what
// was true then.
func TestReplay(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	admin := pgtest.Connect(t, dsn)
	ctx := context.Background()
	now := func() time.Time {
		t.Helper()
		var at time.Time
		if err := admin.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	epoch := func(scope string) int64 {
		return queryInt(t, admin, "SELECT epoch FROM pgleader.leader_state WHERE scope = $1", scope)
	}

	n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "a", "b"))
	pgtest.WaitFor(t, "n1 leading a and b", wait, func() bool { return n1.Leads("a") && n1.Leads("b") })
	e1 := epoch("a")
	t1 := now()

	n2 := testnode.Start(t, testnode.FastConfig(dsn, "n2", "a"))
	pgtest.WaitFor(t, "n2 registered", wait, func() bool {
		return queryInt(t, admin, "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'n2' AND stopped_at IS NULL") == 1
	})
	t2 := now()

	n1.Stop()
	pgtest.WaitFor(t, "n2 leading a", wait, func() bool { return n2.Leads("a") })
	t3 := now()

	exec(t, admin, "SELECT pgleader.retire_scope('b', 'test')")
	t4 := now()

	replay := func(at time.Time) *collector.Snapshot {
		t.Helper()
		s, err := replayAt(ctx, admin, at)
		if err != nil {
			t.Fatal(err)
		}
		if s.Replay == nil || !s.Replay.At.Equal(at) || s.Health.Source != collector.SourceReplay {
			t.Fatalf("replay at %v: info %+v, source %s", at, s.Replay, s.Health.Source)
		}
		return s
	}

	t.Run("T1", func(t *testing.T) {
		s := replay(t1)
		for _, name := range []string{"a", "b"} {
			if sc := scope(t, s, name); !sc.HasLeader() || sc.Leader != "n1" || sc.Verdict != collector.VerdictOK {
				t.Errorf("%s at T1: leader %q live %v verdict %s", name, sc.Leader, sc.LeaderLive, sc.Verdict)
			}
		}
		if sc := scope(t, s, "a"); sc.Epoch != e1 {
			t.Errorf("a at T1: epoch %d, want %d", sc.Epoch, e1)
		}
		if n, ok := s.Node("n1"); !ok || n.State != collector.NodeLive {
			t.Errorf("n1 at T1: %+v", n)
		}
		if _, ok := s.Node("n2"); ok {
			t.Errorf("n2 at T1, before it ever registered: shown")
		}
	})
	t.Run("T2", func(t *testing.T) {
		s := replay(t2)
		sc := scope(t, s, "a")
		if sc.Leader != "n1" || sc.Epoch != e1 || !slices.Equal(sc.Followers, []string{"n2"}) {
			t.Errorf("a at T2: leader %q epoch %d followers %v", sc.Leader, sc.Epoch, sc.Followers)
		}
	})
	t.Run("T3", func(t *testing.T) {
		s := replay(t3)
		sc := scope(t, s, "a")
		if !sc.HasLeader() || sc.Leader != "n2" || sc.Epoch <= e1 || sc.OpenTerm == nil {
			t.Errorf("a at T3: %+v", sc)
		}
		if b := scope(t, s, "b"); b.HasLeader() || b.Verdict != collector.VerdictIdle {
			t.Errorf("b at T3 (its only candidate stopped): leader %q verdict %s", b.Leader, b.Verdict)
		}
		if n, _ := s.Node("n1"); n.State != collector.NodeStopped {
			t.Errorf("n1 at T3: %s, want stopped", n.State)
		}
		if n, _ := s.Node("n2"); n.State != collector.NodeLive || !slices.Equal(n.Leads, []string{"a"}) {
			t.Errorf("n2 at T3: %s leads %v", n.State, n.Leads)
		}
	})
	t.Run("T4", func(t *testing.T) {
		s := replay(t4)
		if _, ok := s.Scope("b"); ok || s.Retired != 1 {
			t.Errorf("b at T4 (retired): shown, retired %d", s.Retired)
		}
	})
	t.Run("StepInMemory", func(t *testing.T) {
		h, err := readHistory(ctx, admin, t2, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// From T1, the next transitions lead to n2's registration, then to
		// n1's release of a and n2's claim.
		at := t1
		var leaders []string
		for range 20 {
			next := h.Next(at)
			if next.IsZero() || next.After(t4) {
				break
			}
			at = next
			if sc, ok := h.At(at).Scope("a"); ok && (len(leaders) == 0 || leaders[len(leaders)-1] != sc.Leader) {
				leaders = append(leaders, sc.Leader)
			}
		}
		if !slices.Contains(leaders, "n2") {
			t.Errorf("stepping from T1 to T4, a's leaders: %v; want n2 among them", leaders)
		}
		if ev := h.Events(t4, 100); !slices.ContainsFunc(ev, func(e collector.Event) bool { return e.Kind == collector.EventScopeRetired && e.Scope == "b" }) {
			t.Errorf("events up to T4 lack b's retirement: %+v", ev)
		}
	})
	t.Run("Future", func(t *testing.T) {
		if _, err := replayAt(ctx, admin, now().Add(time.Hour)); !errors.Is(err, collector.ErrReplayFuture) {
			t.Errorf("an hour ahead: %v, want collector.ErrReplayFuture", err)
		}
	})
}
