package cluster_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// Lease mode through a transaction pooler: the nodes reach PostgreSQL only
// through a PgBouncer in transaction mode, for their leadership and their fenced
// writes alike; the faults and the history checks are those of lock mode.

// leaseArgs: the fast timing of nodeArgs, in lease mode (L − W = 200 ms).
var leaseArgs = append(slices.Clone(nodeArgs), "--mode", "lease")

// setupLease starts nodes in lease mode behind a PgBouncer in transaction mode
// and returns the cluster and the database's direct DSN (for the checks).
func setupLease(t *testing.T, nodes int) (*cluster.Cluster, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	return startCluster(t, nodes, dsn, via, leaseArgs), dsn
}

// TestLeaseKillLeader: a killed lease holder is replaced, and — the lease-mode
// rule — never before its trust ran out: nothing tells a follower that the
// process is dead, so it waits out the lease whether the holder died or froze.
func TestLeaseKillLeader(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setupLease(t, 3)
	killRounds(t, c, 3, func(old *cluster.Node, killed int64, next eventlog.Record) {
		trust := lastTrust(c, old.ID, killed)
		if trust == 0 || next.MonoNS <= trust {
			t.Fatalf("%s opened at %d, the killed holder's trust ran to %d: the successor did not wait out the lease",
				next.Node, next.MonoNS, trust)
		}
		t.Logf("  %v after the killed holder's trust ran out", time.Duration(next.MonoNS-trust))
	})
	checkHistory(t, c, dsn)
}

func TestLeaseFrozenLeader(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setupLease(t, 3)
	freezeAndThaw(t, c, dsn)
	checkHistory(t, c, dsn)
}

// TestLeaseSIGTERMHandsOver: a clean stop releases the lease row; a follower
// claims it at its next heartbeat, without waiting out a lease.
func TestLeaseSIGTERMHandsOver(t *testing.T) {
	c, dsn := setupLease(t, 3)
	old, _ := leader(t, c)
	t0, err := old.Signal(syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	next := wait(t, c, "handover after SIGTERM", gateOpenAfter(t0, old.ID))
	if err := old.Wait(10 * time.Second); err != nil {
		t.Fatalf("node exit after SIGTERM: %v", err)
	}
	var reason string
	queryRow(t, dsn, "SELECT release_reason FROM pgleader.terms WHERE scope = 's' AND epoch = $1", []any{next.Epoch - 1}, &reason)
	if reason != "shutdown" {
		t.Fatalf("the term before epoch %d closed as %q, want shutdown", next.Epoch, reason)
	}
	t.Logf("SIGTERM → %s gate open in %v", next.Node, time.Duration(next.MonoNS-t0))
	checkHistory(t, c, dsn)
}

// TestLeaseHandover: pgleader handover reaches a lease holder through its
// heartbeat, and the named follower, and only it, leads next.
func TestLeaseHandover(t *testing.T) {
	conclusively(t, func(t *testing.T) {
		c, dsn := setupLease(t, 3)
		handoverRounds(t, c, dsn, 2)
		checkHistory(t, c, dsn)
	})
}

// TestSplitModeKillLeader: lock mode with the leadership direct (--leader-dsn)
// and the fenced workload through PgBouncer in transaction mode, the arrangement
// docs/poolers.md recommends: failover at lock-mode speed, every write fenced
// through the pooler, the history clean.
func TestSplitModeKillLeader(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.DSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	c := startCluster(t, 3, dsn, via, append(slices.Clone(nodeArgs), "--leader-dsn", dsn))
	killRounds(t, c, 2, nil)
	checkHistory(t, c, dsn)
}
