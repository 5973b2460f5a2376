package collector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestHandoverAndLifecycle: Collector.Handover moves the scope to the named
// follower and returns its epoch; refusals change nothing; a scope whose
// candidates all stopped cleanly is IDLE (no alert); Retire takes it out of the
// snapshot (refused while a node campaigns for it), and a node that campaigns
// for it again revives it.
func TestHandoverAndLifecycle(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.NoLeaderAfter = 200 * time.Millisecond
	c := newCollector(t, cfg)
	run(t, c)
	ctx := context.Background()
	a := testnode.Start(t, testnode.FastConfig(dsn, "a", "billing"))
	pgtest.WaitFor(t, "a leads", 15*time.Second, func() bool { return a.Leads("billing") })
	b := testnode.Start(t, testnode.FastConfig(dsn, "b", "billing"))
	waitSnap(t, c, "b follows", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && len(sc.Followers) == 1 && sc.Followers[0] == "b"
	})

	if _, err := c.Handover(ctx, "billing", "nobody", "test", 5*time.Second); !errors.Is(err, ErrHandoverRefused) {
		t.Fatalf("handover to an unknown node: %v, want ErrHandoverRefused", err)
	}
	res, err := c.Handover(ctx, "billing", "b", "test", 10*time.Second)
	if err != nil {
		t.Fatalf("Handover to b: %v", err)
	}
	if res.From != "a" || res.To != "b" || res.Epoch != res.FromEpoch+1 {
		t.Fatalf("Handover = %+v, want a → b at the next epoch", res)
	}
	pgtest.WaitFor(t, "b's gate", 15*time.Second, func() bool { return b.Leads("billing") })
	s := waitSnap(t, c, "the handed-over term", func(s *Snapshot) bool {
		for _, tm := range s.Terms {
			if tm.Scope == "billing" && tm.Epoch == res.FromEpoch && tm.EndedBy == "handed_over" && tm.HandedTo == "b" {
				return true
			}
		}
		return false
	})
	if n, ok := s.Node("b"); !ok || n.Priority != 1 || !n.Eligible() {
		t.Fatalf("node b in the snapshot: %+v", n)
	}

	if _, err := c.Retire(ctx, "billing", "test"); !errors.Is(err, ErrRetireRefused) {
		t.Fatalf("Retire while nodes campaign: %v, want ErrRetireRefused", err)
	}

	// Every candidate stops cleanly: IDLE, no no_leader alert.
	a.Stop()
	b.Stop()
	s = waitSnap(t, c, "an idle scope", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.Verdict == VerdictIdle && sc.LeaderlessFor > cfg.NoLeaderAfter
	})
	if _, ok := alert(s, AlertNoLeader, "billing"); ok {
		t.Fatal("no_leader alert for a scope whose candidates all stopped cleanly")
	}

	done, err := c.Retire(ctx, "billing", "test")
	if err != nil || !done {
		t.Fatalf("Retire = %v, %v", done, err)
	}
	waitSnap(t, c, "the scope out of the views", func(s *Snapshot) bool {
		_, ok := s.Scope("billing")
		return !ok && s.Retired == 1
	})
	testnode.Start(t, testnode.FastConfig(dsn, "c", "billing"))
	waitSnap(t, c, "the scope revived and led", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && s.Retired == 0 && sc.Leader == "c"
	})
}

// TestCrashedCandidatesKeepAlerting: a scope whose only candidate vanished
// without stopping cleanly is not idle: no_leader fires.
func TestCrashedCandidatesKeepAlerting(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.NoLeaderAfter = 200 * time.Millisecond
	c := newCollector(t, cfg)
	run(t, c)
	conn := pgtest.Connect(t, dsn)
	// A candidate registered for "jobs" that never stopped (its process died
	// before it claimed), last seen long ago.
	exec(t, conn, `INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, heartbeat_interval_ms,
	               trust_window_ms, session_lease_ms, last_seen) VALUES ('gone', 'h', 1, 'v', '{jobs}', 100, 300, 500, now() - interval '30 minutes')`)
	s := waitSnap(t, c, "a no_leader alert", func(s *Snapshot) bool {
		_, ok := alert(s, AlertNoLeader, "jobs")
		return ok
	})
	if sc := scope(t, s, "jobs"); sc.Verdict != VerdictNoLeader {
		t.Fatalf("verdict %s, want NO LEADER", sc.Verdict)
	}
}
