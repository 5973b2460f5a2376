package collector

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestNodeState: the node's own timing decides, not a collector-wide 30 s:
// live within its trust window W, late past W, down past its session lease L
// or as soon as its leadership session is gone; stopped wins.
func TestNodeState(t *testing.T) {
	alive, gone := true, false
	timing := Timing{HeartbeatInterval: 100 * time.Millisecond, TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		age     time.Duration
		session *bool
		stopped bool
		timing  Timing
		want    NodeState
	}{
		{"on time", 250 * time.Millisecond, &alive, false, timing, NodeLive},
		{"past W", 301 * time.Millisecond, &alive, false, timing, NodeLate},
		{"past L", 501 * time.Millisecond, &alive, false, timing, NodeDown},
		{"session gone, seen just now", 10 * time.Millisecond, &gone, false, timing, NodeDown},
		{"lease mode past W", 400 * time.Millisecond, nil, false, timing, NodeLate},
		{"lease mode past L", 600 * time.Millisecond, nil, false, timing, NodeDown},
		{"stopped", time.Hour, nil, true, timing, NodeStopped},
		{"no timing: the collector's bound", 29 * time.Second, nil, false, Timing{}, NodeLive},
		{"no timing, past the bound", 31 * time.Second, nil, false, Timing{}, NodeDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Node{LastSeenAge: tc.age, SessionAlive: tc.session, Timing: tc.timing}
			if tc.stopped {
				n.StoppedAt = t0
			}
			if got := n.JudgeState(30 * time.Second); got != tc.want {
				t.Errorf("nodeState = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDownAtOnceAndNoFollower: a lock-mode candidate whose leadership session
// ends is down on the next read, seconds before its heartbeat would be missed,
// no longer a follower, and the scope it followed raises no_follower; when the
// candidate comes back, the alert clears.
func TestDownAtOnceAndNoFollower(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	c := newCollector(t, cfg)
	run(t, c)
	ctx := context.Background()
	admin := pgtest.Connect(t, dsn)
	holder := pgtest.Connect(t, dsn)
	forgeHolder(t, holder, "s", "leader-node")
	follower := pgtest.Connect(t, dsn)
	const beacon = int64(424242)
	exec(t, follower, "SELECT pg_advisory_lock($1)", beacon)
	// A follower whose session holds its beacon, with a minute of trust window:
	// only its session's end can make it down within this test.
	exec(t, admin, `INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, mode, backend_pid, beacon_key,
	                  heartbeat_interval_ms, trust_window_ms, session_lease_ms)
	                VALUES ('follower-node', 'h', 2, 'test', '{s}', 'lock', $1, $2, 100, 60000, 90000)`,
		follower.PgConn().PID(), beacon)
	// (A snapshot read between forgeHolder's registration and its claim shows
	// leader-node as the follower: wait for this one.)
	s := waitSnap(t, c, "a live follower", func(s *Snapshot) bool {
		sc, ok := s.Scope("s")
		return ok && sc.Leader == "leader-node" && slices.Equal(sc.Followers, []string{"follower-node"})
	})
	if n, _ := s.Node("follower-node"); n.State != NodeLive || n.SessionAlive == nil || !*n.SessionAlive {
		t.Fatalf("follower %+v, want live with its session alive", n)
	}
	if _, ok := alert(s, AlertNoFollower, "s"); ok {
		t.Fatal("no_follower raised while a follower is live")
	}

	if err := follower.Close(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s = waitSnap(t, c, "the follower down", func(s *Snapshot) bool {
		n, _ := s.Node("follower-node")
		return n.State == NodeDown
	})
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("down after %v", d)
	}
	sc, _ := s.Scope("s")
	if len(sc.Followers) != 0 {
		t.Errorf("followers %v after the follower's session ended", sc.Followers)
	}
	s = waitSnap(t, c, "no_follower", func(s *Snapshot) bool { _, ok := alert(s, AlertNoFollower, "s"); return ok })
	if a, _ := alert(s, AlertNoFollower, "s"); a.Node != "leader-node" || a.Severity != SeverityWarning {
		t.Errorf("alert %+v", a)
	}
	if sc, _ := s.Scope("s"); sc.Verdict != VerdictDegraded {
		t.Errorf("verdict %s with no live follower, want DEGRADED", sc.Verdict)
	}

	// It comes back (a new session takes the beacon): live, a follower, no alert.
	back := pgtest.Connect(t, dsn)
	exec(t, back, "SELECT pg_advisory_lock($1)", beacon)
	exec(t, admin, "UPDATE pgleader.nodes SET backend_pid = $1, last_seen = now() WHERE node_id = 'follower-node'", back.PgConn().PID())
	waitSnap(t, c, "the follower back", func(s *Snapshot) bool {
		_, raised := alert(s, AlertNoFollower, "s")
		sc, _ := s.Scope("s")
		return !raised && slices.Equal(sc.Followers, []string{"follower-node"})
	})
}
