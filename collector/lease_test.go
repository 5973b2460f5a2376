package collector

import (
	"testing"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestLeaseModeScope: a scope led in lease mode (nodes behind a transaction
// pooler) is OK with its leader, and no lock-based check fires over several
// reads; once every node stops cleanly it is IDLE.
func TestLeaseModeScope(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	c := newCollector(t, testConfig(t, dsn))
	run(t, c)
	start := func(id string) *testnode.Node { return startLeaseNode(t, via, id) }
	a, b := start("a"), start("b")
	s := waitSnap(t, c, "a lease-mode leader", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.HasLeader() && sc.Verdict == VerdictOK && len(sc.Followers) == 1
	})
	if sc := scope(t, s, "billing"); sc.Mode != "lease" || len(sc.LockPIDs) != 0 {
		t.Fatalf("scope %+v, want mode lease and no lock", sc)
	}
	// Several more reads past the split-brain grace: nothing lock-based fires.
	deadline := time.Now().Add(c.cfg.SplitBrainGrace + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		s = settle(t, c, 1)
		if len(s.Alerts) > 0 {
			t.Fatalf("alerts on a healthy lease-mode scope: %+v", s.Alerts)
		}
	}
	if n, ok := s.Node("a"); !ok || n.Mode != "lease" {
		t.Fatalf("node a: %+v", n)
	}
	a.Stop()
	b.Stop()
	waitSnap(t, c, "an idle scope", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.Verdict == VerdictIdle
	})
}

// TestThroughTransactionPooler: the collector itself reaches PostgreSQL only
// through PgBouncer in transaction mode (as a dashboard or exporter does where
// nothing else is reachable): it reads with unnamed statements and settings set
// per transaction, polls instead of listening, and sees the lease-mode leader
// (a handover through the pooler is operator's TestHandoverThroughPooler).
func TestThroughTransactionPooler(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	cfg := testConfig(t, via)
	cfg.Source = SourceModeAuto // the logical source cannot cross a pooler either
	c := newCollector(t, cfg)
	run(t, c)
	start := func(id string) *testnode.Node { return startLeaseNode(t, via, id) }
	start("a")
	start("b")
	s := waitSnap(t, c, "a lease-mode leader and its follower", func(s *Snapshot) bool {
		sc, ok := s.Scope("billing")
		return ok && sc.HasLeader() && sc.Verdict == VerdictOK && len(sc.Followers) == 1
	})
	if !c.dial.Pooled() {
		t.Fatal("the collector did not notice the pooler")
	}
	if h := s.Health; h.Source != SourcePolling || !h.Pooler || h.LastError != "" {
		t.Fatalf("health through a pooler: source %q, pooler %v, last error %q; want polling, true, none", h.Source, h.Pooler, h.LastError)
	}
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
