package collector

import (
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestCrashedCandidatesKeepAlerting: a scope whose only candidate vanished
// without stopping cleanly is not idle: no_leader fires.
func TestCrashedCandidatesKeepAlerting(t *testing.T) {
	pgtest.Slow(t)
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
