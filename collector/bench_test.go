package collector

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// forgeCluster writes scopes held scopes with 10 terms each and nodes nodes (each a
// candidate for three scopes: 8 followers per scope); a connection held until the test ends holds the scopes' locks and
// one more advisory lock per node, as the nodes' guards would.
func forgeCluster(b testing.TB, dsn string, scopes, nodes int) {
	b.Helper()
	conn := pgtest.Connect(b, dsn)
	exec(b, conn, `
INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, leads, heartbeat_interval_ms, trust_window_ms, session_lease_ms)
SELECT 'node-' || i, 'host-' || i % 10, 1000 + i, 'bench',
       ARRAY['scope-' || i % $1, 'scope-' || (i + 1) % $1, 'scope-' || (i + 2) % $1],
       CASE WHEN i < $1 THEN ARRAY['scope-' || i] ELSE '{}' END, 500, 1500, 2000
  FROM generate_series(0, $2 - 1) i`, scopes, nodes)
	exec(b, conn, `
INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid, acquired_at, last_heartbeat,
                                   heartbeat_interval_ms, heartbeat_timeout_ms, trust_window_ms, session_lease_ms)
SELECT 'scope-' || i, pgleader.lock_key('scope-' || i), 10, 'node-' || i, pg_backend_pid(),
       now() - interval '1 min', now(), 500, 500, 1500, 2000
  FROM generate_series(0, $1 - 1) i`, scopes)
	exec(b, conn, `
INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, released_at, release_reason, handover_gap)
SELECT 'scope-' || i, e, 'node-' || (i + e) % $2, 'host', 1, now() - make_interval(mins => 11 - e),
       CASE WHEN e < 10 THEN now() - make_interval(mins => 10 - e) END,
       CASE WHEN e < 10 THEN 'resigned' END, interval '2 ms'
  FROM generate_series(0, $1 - 1) i, generate_series(1, 10) e`, scopes, nodes)
	exec(b, conn, "SELECT count(pg_advisory_lock(pgleader.lock_key('scope-' || i))) FROM generate_series(0, $1 - 1) i", scopes)
	exec(b, conn, "SELECT count(pg_advisory_lock(7000000000 + i)) FROM generate_series(0, $1 - 1) i", nodes)
}

// BenchmarkPoll is one full read over 100 held scopes, 300 nodes and 1000 terms:
// Full is the batched transaction, the checks and the publication; QueryOnly the
// round trip and the scanning alone.
func BenchmarkPoll(b *testing.B) {
	dsn := pgtest.MigratedDSN(b)
	forgeCluster(b, dsn, 100, 300)
	c := newCollector(b, testConfig(b, dsn))
	ctx := context.Background()
	conn, _, err := c.connectReader(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConn(conn)
	s, _, _, err := c.readAndApply(ctx, conn, time.Now(), SourcePolling, false)
	if err != nil {
		b.Fatal(err)
	}
	if len(s.Scopes) != 100 || len(s.Nodes) != 300 || !s.Scopes[0].HasLeader() || len(s.Scopes[0].Followers) != 8 {
		b.Fatalf("forged cluster read as %d scopes, %d nodes, first %+v", len(s.Scopes), len(s.Nodes), s.Scopes[0])
	}
	b.Run("Full", func(b *testing.B) {
		for b.Loop() {
			if _, _, _, err := c.readAndApply(ctx, conn, time.Now(), SourcePolling, false); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
	})
	b.Run("QueryOnly", func(b *testing.B) {
		c.stateMu.Lock()
		cur := c.st.cursor(planPoll, false)
		c.stateMu.Unlock()
		for b.Loop() {
			if _, err := read(ctx, conn, &c.cfg, cur, readShape{loginRole: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
	})
}

// BenchmarkApply turns one forged read into a snapshot, without a database:
// the collector's own work per read. 1,000 scopes with every one of 10 nodes a
// candidate for each (so each node lists 1,000 scopes), all led.
func BenchmarkApply(b *testing.B) {
	const scopes, nodes = 1000, 10
	now := t0.Add(time.Second)
	forge := func() *dbRead {
		r := &dbRead{Now: now, Capacity: 12800, Advisory: scopes + nodes}
		names := make([]string, scopes)
		for i := range names {
			names[i] = fmt.Sprintf("scope-%04d", i)
		}
		for k := range nodes {
			n := Node{ID: fmt.Sprintf("node-%02d", k), Hostname: "host", StartedAt: t0, LastSeen: now,
				Scopes: slices.Clone(names), Leads: []string{}}
			for i := k; i < scopes; i += nodes {
				n.Leads = append(n.Leads, names[i])
			}
			r.Nodes = append(r.Nodes, n)
		}
		for i, name := range names {
			holder := fmt.Sprintf("node-%02d", i%nodes)
			r.Scopes = append(r.Scopes, scopeRow{Name: name, Recorded: true, LockKey: int64(i), Epoch: 1,
				Holder: holder, HolderPID: 1000 + i, AcquiredAt: t0, LastHeartbeat: now, LockPIDs: []int{1000 + i},
				Timing: Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second},
				Latest: &Term{ID: int64(i + 1), Scope: name, Epoch: 1, Holder: holder, AcquiredAt: t0}, Changes: 1, MaxTermEpoch: 1})
		}
		return r
	}
	cfg, st := unitConfig(), newState()
	s, _, _ := st.apply(cfg, forge(), now, Health{Source: SourceLive})
	if len(s.Scopes) != scopes || len(s.Scopes[0].Followers) != nodes-1 || s.Scopes[0].Verdict != VerdictOK {
		b.Fatalf("forged read gave %d scopes, first %+v", len(s.Scopes), s.Scopes[0])
	}
	for b.Loop() {
		b.StopTimer()
		r := forge() // apply takes the read's slices over
		b.StartTimer()
		st.apply(cfg, r, now, Health{Source: SourceLive})
	}
}
