package operator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestHandoverAndLifecycle: Operator.Handover moves the scope to the named
// follower and returns its epoch; refusals change nothing; a scope whose
// candidates all stopped cleanly is IDLE (no alert); Retire takes it out of the
// snapshot (refused while a node campaigns for it), and a node that campaigns
// for it again revives it.
func TestHandoverAndLifecycle(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.NoLeaderAfter = 200 * time.Millisecond
	c := newCollector(t, cfg)
	op := newOperator(t, cfg, c)
	run(t, c)
	ctx := context.Background()
	a := testnode.Start(t, testnode.FastConfig(dsn, "a", "billing"))
	pgtest.WaitFor(t, "a leads", 15*time.Second, func() bool { return a.Leads("billing") })
	b := testnode.Start(t, testnode.FastConfig(dsn, "b", "billing"))
	waitSnap(t, c, "b follows", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && len(sc.Followers) == 1 && sc.Followers[0] == "b"
	})

	if _, err := op.Handover(ctx, "billing", "nobody", "test", 5*time.Second); !errors.Is(err, ErrHandoverRefused) {
		t.Fatalf("handover to an unknown node: %v, want ErrHandoverRefused", err)
	}
	res, err := op.Handover(ctx, "billing", "b", "test", 10*time.Second)
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

	if _, err := op.Retire(ctx, "billing", "test"); !errors.Is(err, ErrRetireRefused) {
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

	done, err := op.Retire(ctx, "billing", "test")
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

// TestHandoverThroughPooler: an operator and a collector that reach PostgreSQL
// only through PgBouncer in transaction mode (as a dashboard does where nothing
// else is reachable) notice the pooler, and a handover between lease-mode
// nodes through it completes (the collector's own side is its
// TestThroughTransactionPooler).
func TestHandoverThroughPooler(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	cfg := testConfig(t, via)
	cfg.Source = collector.SourceModeAuto // the logical source cannot cross a pooler either
	c := newCollector(t, cfg)
	op := newOperator(t, cfg, c)
	run(t, c)
	start := func(id string) *testnode.Node { return startLeaseNode(t, via, id) }
	start("a")
	start("b")
	s := waitSnap(t, c, "a lease-mode leader and its follower", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.HasLeader() && sc.Verdict == collector.VerdictOK && len(sc.Followers) == 1
	})
	sc := scope(t, s, "billing")
	to := "a"
	if sc.Leader == "a" {
		to = "b"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := op.Handover(ctx, "billing", to, "test", 10*time.Second)
	if err != nil {
		t.Fatalf("handover through the pooler: %v", err)
	}
	if !op.dial.Pooled() {
		t.Fatal("the operator did not notice the pooler")
	}
	if res.To != to || res.Epoch <= sc.Epoch {
		t.Fatalf("handover %+v after epoch %d", res, sc.Epoch)
	}
	waitSnap(t, c, "the target leading", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.Leader == to && sc.Epoch == res.Epoch && len(s.Alerts) == 0
	})
}

// startLeaseNode runs a lease-mode elector for scope billing through dsn (a pooler).
func startLeaseNode(t *testing.T, dsn, id string) *testnode.Node {
	t.Helper()
	cfg := testnode.FastConfig(dsn, id, "billing")
	cfg.Mode = election.ModeLease
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testnode.Run(t, e)
}
