package collector

import (
	"context"
	"errors"
	"fmt"
	osexec "os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// Each check fires on a condition injected into a real database, and stays
// silent on its look-alikes of a healthy cluster.

func firing(rec *recorder, kind AlertKind) []Event {
	var out []Event
	for _, e := range rec.all() {
		if e.Kind == EventAlertFiring && e.Alert.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestNoLeader(t *testing.T) {
	pgtest.Slow(t)
	t.Run("DeadHolderNoCandidate", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		cfg.NoLeaderAfter, cfg.SplitBrainGrace = 500*time.Millisecond, 100*time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		// A holder claims and is killed: its lock is freed with its backend, its
		// term stays open, its node row still lists the scope as led.
		ghost := pgtest.Connect(t, dsn)
		forgeHolder(t, ghost, "c", "ghost")
		waitSnap(t, c, "ghost leading c", func(s *Snapshot) bool { sc, ok := s.Scope("c"); return ok && sc.HasLeader() })
		admin := pgtest.Connect(t, dsn)
		if queryInt(t, admin, "SELECT count(*) FILTER (WHERE pg_terminate_backend(holder_pid, 5000)) FROM pgleader.leader_state WHERE scope = 'c'") != 1 {
			t.Fatal("could not kill the holder's backend")
		}
		s := waitSnap(t, c, "no_leader on c", func(s *Snapshot) bool { _, ok := alert(s, AlertNoLeader, "c"); return ok })
		sc := scope(t, s, "c")
		a, _ := alert(s, AlertNoLeader, "c")
		if sc.Verdict != VerdictNoLeader || sc.Leader != "ghost" || sc.HasLeader() || sc.OpenTerm == nil || len(sc.LockPIDs) != 0 ||
			sc.LeaderlessFor < cfg.NoLeaderAfter || a.Severity != SeverityCritical || !strings.Contains(a.Summary, "still open") {
			t.Fatalf("scope %+v alert %+v", sc, a)
		}
		settle(t, c, 5)
		if sb := firing(rec, AlertSplitBrain); len(sb) > 0 {
			t.Fatalf("a crashed holder was reported as split brain: %+v", sb[0].Alert)
		}
		// The holder heartbeats again (it lives on) and still claims the scope
		// while nobody holds the lock: split brain (d).
		stop := make(chan struct{})
		beat := make(chan struct{})
		go func() {
			defer close(beat)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					_, _ = admin.Exec(context.Background(), "UPDATE pgleader.nodes SET last_seen = now() WHERE node_id = 'ghost'")
				}
			}
		}()
		s = waitSnap(t, c, "split brain (d)", func(s *Snapshot) bool { _, ok := alert(s, AlertSplitBrain, "c"); return ok })
		close(stop)
		<-beat
		if a, _ := alert(s, AlertSplitBrain, "c"); a.Node != "ghost" || scope(t, s, "c").Verdict != VerdictSplitBrain {
			t.Fatalf("alert %+v", a)
		}
	})

	t.Run("SquattedLockNoTerm", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		squatter := pgtest.Connect(t, dsn)
		exec(t, squatter, "SELECT pg_advisory_lock(pgleader.lock_key('q'))")
		pid := int(queryInt(t, squatter, "SELECT pg_backend_pid()"))
		testnode.Start(t, testnode.FastConfig(dsn, "n1", "q")) // a candidate that can never claim
		cfg := testConfig(t, dsn)
		cfg.NoLeaderAfter, cfg.SplitBrainGrace = 500*time.Millisecond, 100*time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		s := waitSnap(t, c, "no_leader on q", func(s *Snapshot) bool { _, ok := alert(s, AlertNoLeader, "q"); return ok })
		sc := scope(t, s, "q")
		a, _ := alert(s, AlertNoLeader, "q")
		if sc.Leader != "" || !slices.Equal(sc.LockPIDs, []int{pid}) || sc.Epoch != 0 || !slices.Equal(sc.Followers, []string{"n1"}) ||
			!strings.Contains(a.Summary, fmt.Sprint(pid)) || !strings.Contains(a.Hint, fmt.Sprint(pid)) {
			t.Fatalf("scope %+v alert %+v", sc, a)
		}
		settle(t, c, 5)
		if sb := firing(rec, AlertSplitBrain); len(sb) > 0 {
			t.Fatalf("a squatter without a term was reported as split brain: %+v", sb[0].Alert)
		}
		exec(t, squatter, "SELECT pg_advisory_unlock(pgleader.lock_key('q'))")
		rec.waitEvent(t, "no_leader resolved", func(e Event) bool {
			return e.Kind == EventAlertResolved && e.Alert.Kind == AlertNoLeader && e.Scope == "q"
		})
		if sc := scope(t, c.Snapshot(), "q"); !sc.HasLeader() || sc.Leader != "n1" {
			t.Fatalf("after the squatter left: %+v", sc)
		}
	})
}

func TestSplitBrain(t *testing.T) {
	pgtest.Slow(t)
	t.Run("EpochRegression", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		cfg := testConfig(t, dsn)
		cfg.SplitBrainGrace = time.Hour // regression must not wait for it
		c := newCollector(t, cfg)
		run(t, c)
		pgtest.WaitFor(t, "n1 leading", wait, func() bool { return n1.Leads("s") })
		waitSnap(t, c, "epoch 1", func(s *Snapshot) bool { sc, ok := s.Scope("s"); return ok && sc.Epoch == 1 })
		admin := pgtest.Connect(t, dsn)
		exec(t, admin, "UPDATE pgleader.leader_state SET epoch = epoch - 1 WHERE scope = 's'")
		s := waitSnap(t, c, "split brain", func(s *Snapshot) bool { _, ok := alert(s, AlertSplitBrain, "s"); return ok })
		a, _ := alert(s, AlertSplitBrain, "s")
		if sc := scope(t, s, "s"); sc.Verdict != VerdictSplitBrain || !strings.Contains(a.Summary, "went back to 0") || s.Alerts[0].Kind != AlertSplitBrain {
			t.Fatalf("scope %+v alerts %+v", sc, s.Alerts)
		}
		exec(t, admin, "UPDATE pgleader.leader_state SET epoch = (SELECT max(epoch) FROM pgleader.terms WHERE scope = 's') WHERE scope = 's'")
		waitSnap(t, c, "resolved once the epoch is back", func(s *Snapshot) bool { _, ok := alert(s, AlertSplitBrain, "s"); return !ok })
	})

	t.Run("Squatter", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		cfg.SplitBrainGrace = 200 * time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		holder := pgtest.Connect(t, dsn)
		forgeHolder(t, holder, "q", "ghost")
		hpid := int(queryInt(t, holder, "SELECT pg_backend_pid()"))
		// The holder's backend lives but lets go of the lock; another session takes it.
		exec(t, holder, "SELECT pg_advisory_unlock(pgleader.lock_key('q'))")
		squatter := pgtest.Connect(t, dsn)
		exec(t, squatter, "SELECT pg_advisory_lock(pgleader.lock_key('q'))")
		spid := int(queryInt(t, squatter, "SELECT pg_backend_pid()"))
		// The squatter is no node's session: that is interference (named on the
		// first read that sees it), not split brain (a), which is left to a node's
		// backend outside the term.
		// A read's two looks at pg_locks (the scopes, then the interference) are not
		// one snapshot (pg_locks is not transactional): the read that first names
		// the squatter may have seen the lock free a moment before it was taken.
		// Nor are they the read's snapshot of the tables: a read whose transaction
		// began before the forged claim committed sees no term (epoch 0) beside
		// locks taken after it.
		s := waitSnap(t, c, "interference", func(s *Snapshot) bool {
			_, ok := alert(s, AlertInterference, "q")
			sc, _ := s.Scope("q")
			return ok && len(sc.LockPIDs) > 0 && sc.Epoch > 0
		})
		a, _ := alert(s, AlertInterference, "q")
		sc := scope(t, s, "q")
		if sc.HolderPID != hpid || !slices.Equal(sc.LockPIDs, []int{spid}) || !strings.Contains(a.Summary, fmt.Sprint(spid)) ||
			len(sc.Interference) != 1 || sc.Interference[0].PID != spid || !sc.Interference[0].Granted {
			t.Fatalf("scope %+v alert %+v (snapshot at %v)", sc, a, s.At)
		}
		if _, split := alert(s, AlertSplitBrain, "q"); split {
			t.Errorf("a squatter raised split brain too: %+v", s.Alerts)
		}
		// The event reaches the recorder's goroutine a moment after the snapshot.
		if ev := rec.waitEvent(t, "interference firing", func(e Event) bool { return e.Kind == EventAlertFiring && e.Alert.Kind == AlertInterference }); ev.Scope != "q" {
			t.Fatalf("firing event %+v", ev)
		}
	})

	t.Run("TwoNodesLead", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		cfg := testConfig(t, dsn)
		cfg.SplitBrainGrace = 200 * time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		pgtest.WaitFor(t, "n1 leading", wait, func() bool { return n1.Leads("s") })
		admin := pgtest.Connect(t, dsn)
		// A live node whose leads entry predates the term (it led before, then
		// froze): not counted.
		exec(t, admin, `INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, leads, last_seen)
		                SELECT 'ghost', 'h', 1, 'test', '{s}', '{s}', acquired_at - interval '1 ms'
		                  FROM pgleader.leader_state WHERE scope = 's'`)
		time.Sleep(4 * cfg.SplitBrainGrace)
		settle(t, c, 3)
		if sb := firing(rec, AlertSplitBrain); len(sb) > 0 {
			t.Fatalf("a leads entry older than the term counted: %+v", sb[0].Alert)
		}
		if g, _ := c.Snapshot().Node("ghost"); !g.Live || !slices.Contains(g.Reported, "s") || g.Role("s") == RoleLeader {
			t.Fatalf("ghost node %+v: the control is vacuous", g)
		}
		exec(t, admin, "UPDATE pgleader.nodes SET last_seen = now() WHERE node_id = 'ghost'")
		s := waitSnap(t, c, "split brain (c)", func(s *Snapshot) bool { _, ok := alert(s, AlertSplitBrain, "s"); return ok })
		if a, _ := alert(s, AlertSplitBrain, "s"); a.Node != "ghost" || !strings.Contains(a.Summary, "n1 and ghost") {
			t.Fatalf("alert %+v", a)
		}
	})
}

func TestStaleLeader(t *testing.T) {
	pgtest.Slow(t)
	// stale forges a zombie: a session that holds the lock and an open term whose
	// heartbeat is 10 s old (trust window 300 ms).
	stale := func(t *testing.T, dsn, scope string) (*pgx.Conn, int) {
		zombie := pgtest.Connect(t, dsn)
		forgeHolder(t, zombie, scope, "zombie")
		exec(t, zombie, "UPDATE pgleader.leader_state SET last_heartbeat = now() - interval '10 s' WHERE scope = $1", scope)
		return zombie, int(queryInt(t, zombie, "SELECT pg_backend_pid()"))
	}

	t.Run("Alert", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		c := newCollector(t, testConfig(t, dsn))
		rec := record(t, c)
		run(t, c)
		_, pid := stale(t, dsn, "z")
		s := waitSnap(t, c, "stale_leader", func(s *Snapshot) bool { _, ok := alert(s, AlertStaleLeader, "z"); return ok })
		a, _ := alert(s, AlertStaleLeader, "z")
		sc := scope(t, s, "z")
		if a.Node != "zombie" || a.Severity != SeverityCritical || !strings.Contains(a.Hint, fmt.Sprint(pid)) ||
			sc.Verdict != VerdictDegraded || !sc.HasLeader() || sc.HeartbeatAge < 10*time.Second {
			t.Fatalf("alert %+v scope %+v", a, sc)
		}
		if ev := rec.waitEvent(t, "heartbeat_late", func(e Event) bool { return e.Kind == EventHeartbeatLate }); ev.Scope != "z" || ev.Node != "zombie" {
			t.Fatalf("heartbeat_late event %+v", ev)
		}
		settle(t, c, 3)
		if n := len(slices.DeleteFunc(rec.all(), func(e Event) bool { return e.Kind != EventHeartbeatLate })); n != 1 {
			t.Fatalf("%d heartbeat_late events for one late term, want 1", n)
		}
		if sc := scope(t, c.Snapshot(), "z"); sc.HolderPID != pid {
			t.Fatalf("holder pid %d, want %d", sc.HolderPID, pid)
		}
	})

	// The collector decides, once per term, and asks its Evictor (the operator
	// package has the real one, tested there); a failure is an event.
	t.Run("EvictStaleAsks", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		ev := &fakeEvictor{err: errors.New("not today")}
		cfg := testConfig(t, dsn)
		cfg.EvictStale, cfg.EvictAfter = ev, 200*time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		_, pid := stale(t, dsn, "z")
		failed := rec.waitEvent(t, "evict_failed", func(e Event) bool { return e.Kind == EventEvictFailed })
		if failed.Scope != "z" || failed.Node != "zombie" || failed.Reason != "not today" {
			t.Fatalf("evict_failed event %+v", failed)
		}
		settle(t, c, 3)
		want := evictCall{Holder{Scope: "z", Node: "zombie", Epoch: failed.Epoch, PID: pid}, "stale leader"}
		if got := ev.all(); len(got) != 1 || got[0] != want {
			t.Fatalf("evictor asked %+v, want once %+v", got, want)
		}
	})
}

// fakeEvictor records what it is asked to evict and fails with err.
type fakeEvictor struct {
	mu    sync.Mutex
	calls []evictCall
	err   error
}

type evictCall struct {
	h      Holder
	reason string
}

func (f *fakeEvictor) EvictHolder(_ context.Context, h Holder, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, evictCall{h, reason})
	return f.err
}

func (f *fakeEvictor) all() []evictCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func TestNodes(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.StaleNodeAfter = 2 * time.Second
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	waitSnap(t, c, "a first read", func(*Snapshot) bool { return true })
	admin := pgtest.Connect(t, dsn)
	exec(t, admin, "INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes) VALUES ('old', 'h', 1, 'v', '{x}')")
	rec.waitEvent(t, "old joined", func(e Event) bool {
		return e.Kind == EventNodeJoined && e.Node == "old" && e.Reason == "registered"
	})
	// It stops heartbeating: stale, left.
	exec(t, admin, "UPDATE pgleader.nodes SET last_seen = now() - interval '10 min' WHERE node_id = 'old'")
	s := waitSnap(t, c, "stale_node", func(s *Snapshot) bool { _, ok := alert(s, AlertStaleNode, ""); return ok })
	if a, _ := alert(s, AlertStaleNode, ""); a.Node != "old" || a.Severity != SeverityWarning ||
		!strings.HasSuffix(a.Hint, "pgleader node forget 'old'") {
		t.Fatalf("alert %+v", a)
	}
	if n, _ := s.Node("old"); n.Live || n.State != NodeDown || n.LastSeenAge < 10*time.Minute {
		t.Fatalf("node %+v", n)
	}
	rec.waitEvent(t, "old left (down)", func(e Event) bool {
		return e.Kind == EventNodeLeft && e.Node == "old" && e.Reason == "down"
	})
	// It comes back, then stops cleanly: no alert for a clean stop.
	exec(t, admin, "UPDATE pgleader.nodes SET last_seen = now() WHERE node_id = 'old'")
	rec.waitEvent(t, "old came back", func(e Event) bool {
		return e.Kind == EventNodeJoined && e.Node == "old" && e.Reason == "came back"
	})
	exec(t, admin, "UPDATE pgleader.nodes SET stopped_at = now() WHERE node_id = 'old'")
	rec.waitEvent(t, "old left (stopped)", func(e Event) bool {
		return e.Kind == EventNodeLeft && e.Node == "old" && e.Reason == "stopped"
	})
	exec(t, admin, "UPDATE pgleader.nodes SET last_seen = now() - interval '10 min' WHERE node_id = 'old'")
	settle(t, c, 3)
	if _, ok := alert(c.Snapshot(), AlertStaleNode, ""); ok {
		t.Fatal("stale_node for a node that stopped cleanly")
	}
	if _, ok := c.Snapshot().Node("old"); !ok {
		t.Fatal("a node stopped 10 minutes ago left the views before the retention (1h)")
	}
	// Past NodeRetention it leaves the snapshot (the views and the metrics).
	exec(t, admin, "UPDATE pgleader.nodes SET last_seen = now() - interval '2 h', stopped_at = now() - interval '2 h' WHERE node_id = 'old'")
	waitSnap(t, c, "old gone past the retention", func(s *Snapshot) bool { _, ok := s.Node("old"); return !ok })
}

func TestFlapping(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.FlapMax = 3
	c := newCollector(t, cfg)
	run(t, c)
	testnode.Start(t, testnode.FastConfig(dsn, "n1", "f"))
	testnode.Start(t, testnode.FastConfig(dsn, "n2", "f"))
	nodes := []*testnode.Node{testnode.Start(t, testnode.FastConfig(dsn, "n3", "g")), testnode.Start(t, testnode.FastConfig(dsn, "n4", "g"))}
	admin := pgtest.Connect(t, dsn)
	// Leaders lost: f's leadership sessions terminated, one term after another.
	// A snapshot's flapping alert and its Changes come from the same read: at
	// most FlapMax terms, no alert.
	for terms := 1; terms <= cfg.FlapMax+1; terms++ {
		s := waitSnap(t, c, fmt.Sprintf("%d terms of f", terms), func(s *Snapshot) bool {
			sc, ok := s.Scope("f")
			return ok && sc.HasLeader() && sc.Changes >= terms
		})
		sc := scope(t, s, "f")
		if _, ok := alert(s, AlertFlapping, "f"); ok != (sc.Changes > cfg.FlapMax) {
			t.Fatalf("flapping alert %v with %d changes (FlapMax %d)", ok, sc.Changes, cfg.FlapMax)
		}
		exec(t, admin, "SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope = 'f' AND epoch = $1", sc.Epoch)
	}
	s := waitSnap(t, c, "flapping", func(s *Snapshot) bool { _, ok := alert(s, AlertFlapping, "f"); return ok })
	if a, _ := alert(s, AlertFlapping, "f"); a.Severity != SeverityWarning || scope(t, s, "f").Changes <= cfg.FlapMax {
		t.Fatalf("alert %+v scope %+v", a, scope(t, s, "f"))
	}

	// Planned changes (resignations) are no leaders lost: g changes as often,
	// and does not flap.
	for terms := 1; terms <= cfg.FlapMax+2; terms++ {
		s := waitSnap(t, c, fmt.Sprintf("%d terms of g", terms), func(s *Snapshot) bool {
			sc, ok := s.Scope("g")
			return ok && sc.HasLeader() && sc.Changes >= terms
		})
		sc := scope(t, s, "g")
		if a, ok := alert(s, AlertFlapping, "g"); ok {
			t.Fatalf("flapping for %d resignations: %s", sc.Changes-1, a.Summary)
		}
		for _, n := range nodes {
			if n.NodeID() != sc.Leader {
				continue
			}
			// The snapshot can show a claim committed before the winner's own
			// term is set up, and Resign then answers ErrNotLeader and changes
			// nothing: ask again until it is taken.
			pgtest.WaitFor(t, "the leader to take the resignation", 10*time.Second, func() bool {
				err := n.Scope("g").Resign(context.Background())
				if !errors.Is(err, election.ErrNotLeader) {
					return true
				}
				now, ok := c.Snapshot().Scope("g")
				return ok && now.Changes > sc.Changes
			})
		}
	}
}

func TestFenceRejected(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.FenceAlertFor = 3 * time.Second
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	waitSnap(t, c, "a first read", func(*Snapshot) bool { return true })
	admin := pgtest.Connect(t, dsn)
	exec(t, admin, "INSERT INTO pgleader.leader_state (scope, lock_key) VALUES ('s', pgleader.lock_key('s'))") // fence_rejected audits known scopes
	exec(t, admin, "SELECT pgleader.fence_rejected('s', 1, 'zombie', 'test')")
	ev := rec.waitEvent(t, "fence_rejected event", func(e Event) bool { return e.Kind == EventFenceRejected })
	if ev.Scope != "s" || ev.Node != "zombie" || ev.Epoch != 1 || !strings.Contains(ev.Detail, "test") || ev.AuditID == 0 {
		t.Fatalf("event %+v", ev)
	}
	s := waitSnap(t, c, "fence_rejected alert", func(s *Snapshot) bool { _, ok := alert(s, AlertFenceRejected, "s"); return ok })
	if a, _ := alert(s, AlertFenceRejected, "s"); a.Node != "zombie" || a.Severity != SeverityWarning || s.FenceRejected["s"] != 1 {
		t.Fatalf("alert %+v counts %v", a, s.FenceRejected)
	}
	// A collector started now replays the window: same alert and count at once.
	other := newCollector(t, cfg)
	os, err := other.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := alert(os, AlertFenceRejected, "s"); !ok || os.FenceRejected["s"] != 1 {
		t.Fatalf("first read of a new collector: alerts %+v counts %v", os.Alerts, os.FenceRejected)
	}
	// The alert ends with the window; the counter stays.
	s = waitSnap(t, c, "fence_rejected resolved", func(s *Snapshot) bool { _, ok := alert(s, AlertFenceRejected, "s"); return !ok })
	if s.FenceRejected["s"] != 1 {
		t.Fatalf("counter %v after the window", s.FenceRejected)
	}
}

// The lock table is the server's: locks another database holds count, and the
// alert says how many of them are this database's advisory locks.
func TestLockPressure(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	for _, db := range []string{"app", "other"} {
		if err := srv.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	dsn := srv.DSN("app")
	pgtest.Migrate(t, dsn)
	admin := pgtest.Connect(t, dsn)
	capacity := queryInt(t, admin, `SELECT current_setting('max_locks_per_transaction')::int
		* (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int)`)
	cfg := testConfig(t, dsn)
	cfg.LockPressure = 200 / float64(capacity) // 200 locks of the server
	c := newCollector(t, cfg)
	run(t, c)
	s := waitSnap(t, c, "a first read", func(*Snapshot) bool { return true })
	if _, ok := alert(s, AlertLockPressure, ""); ok || s.Locks.Advisory != 0 || s.Locks.Used >= 200 {
		t.Fatalf("pressure on an idle server: %+v", s.Locks)
	}
	// 300 advisory locks in another database of the server.
	holder := pgtest.Connect(t, srv.DSN("other"))
	exec(t, holder, "SELECT pg_advisory_lock(k) FROM generate_series(1, 300) k")
	s = waitSnap(t, c, "lock_pressure", func(s *Snapshot) bool { _, ok := alert(s, AlertLockPressure, ""); return ok })
	a, _ := alert(s, AlertLockPressure, "")
	if s.Locks.Used < 300 || s.Locks.Advisory != 0 || !strings.Contains(a.Summary, "0 advisory in this database") {
		t.Fatalf("locks %+v, alert %q: want at least 300 locks of the server, none of them this database's", s.Locks, a.Summary)
	}
	exec(t, holder, "SELECT pg_advisory_unlock_all()")
	waitSnap(t, c, "lock_pressure resolved", func(s *Snapshot) bool { _, ok := alert(s, AlertLockPressure, ""); return !ok })
}

// The notification queue's fill is read; above NotifyQueuePressure it alerts.
func TestNotifyQueuePressure(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("app")
	pgtest.Migrate(t, dsn)
	cfg := testConfig(t, dsn)
	cfg.NotifyQueuePressure = 1e-6
	c := newCollector(t, cfg)
	run(t, c)
	if s := waitSnap(t, c, "a first read", func(*Snapshot) bool { return true }); s.Locks.NotifyQueue != 0 {
		t.Fatalf("notify queue %g on an idle server, want 0", s.Locks.NotifyQueue)
	}
	// A listener that does not read holds the queue's tail; notifications pile up.
	deaf := pgtest.Connect(t, dsn)
	exec(t, deaf, "LISTEN pile")
	sender := pgtest.Connect(t, dsn)
	exec(t, sender, "SELECT pg_notify('pile', repeat('x', 7000) || k) FROM generate_series(1, 2000) k") // distinct payloads: one transaction collapses duplicates
	s := waitSnap(t, c, "notify_queue", func(s *Snapshot) bool { _, ok := alert(s, AlertNotifyQueue, ""); return ok })
	if s.Locks.NotifyQueue <= 0 {
		t.Fatalf("alert without a queue reading: %+v", s.Locks)
	}
}

func TestCollectorDown(t *testing.T) {
	pgtest.Slow(t)
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("app")
	pgtest.Migrate(t, dsn)
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(holder)
	forgeHolder(t, holder, "s", "n1")
	cfg := testConfig(t, dsn)
	cfg.CollectorDownAfter = 300 * time.Millisecond
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	good := waitSnap(t, c, "live", func(s *Snapshot) bool {
		sc, ok := s.Scope("s")
		return ok && sc.HasLeader() && live(s)
	})

	if err := srv.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	s := waitSnap(t, c, "collector_down", func(s *Snapshot) bool {
		_, ok := alert(s, AlertCollectorDown, "")
		return ok && s.Health.Source == SourceDisconnected
	})
	a, _ := alert(s, AlertCollectorDown, "")
	if sc := scope(t, s, "s"); sc.Leader != "n1" || s.DBTime != good.DBTime && s.DBTime.Before(good.DBTime) || s.Seq <= good.Seq {
		t.Fatalf("the last good snapshot was not kept: scope %+v", sc)
	}
	if s.Health.LastError == "" || s.Health.PollErrors == 0 || a.Severity != SeverityCritical || s.Alerts[0].Kind != AlertCollectorDown {
		t.Fatalf("health %+v alerts %+v", s.Health, s.Alerts)
	}
	if _, err := c.Poll(ctx); err == nil {
		t.Fatal("Poll succeeded with the server down")
	}

	if err := srv.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	s = waitSnap(t, c, "live again", func(s *Snapshot) bool {
		_, down := alert(s, AlertCollectorDown, "")
		return !down && live(s)
	})
	if s.DBTime.Before(good.DBTime) || s.Health.Reconnects == 0 {
		t.Fatalf("after recovery: db time %v (before %v), health %+v", s.DBTime, good.DBTime, s.Health)
	}
	rec.waitEvent(t, "collector_down resolved", func(e Event) bool {
		return e.Kind == EventAlertResolved && e.Alert.Kind == AlertCollectorDown
	})
	if _, ok := rec.find(func(e Event) bool {
		return e.Kind == EventSourceChanged && strings.HasSuffix(e.Detail, "→ disconnected")
	}); !ok {
		t.Fatal("no source_changed event to disconnected")
	}
}

// A hint never carries runnable text built from data: a node id is quoted for
// a POSIX shell (as one argument, nothing expanded), a gid as an SQL literal.
func TestHintsQuoteData(t *testing.T) {
	for id, want := range map[string]string{
		"plain":               "'plain'",
		"x'; rm -rf / #":      `'x'\''; rm -rf / #'`,
		"$(id) `id` \"q\" \\": `'$(id) ` + "`id`" + ` "q" \'`,
	} {
		if got := shellQuote(id); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", id, got, want)
		}
		out, err := osexec.Command("sh", "-c", "printf %s "+shellQuote(id)).Output()
		if err != nil || string(out) != id {
			t.Errorf("sh read %s as %q (%v), want %q", shellQuote(id), out, err, id)
		}
	}
	if got := pqLiteral(`o'k\`); got != `E'o''k\\'` {
		t.Errorf("pqLiteral = %s", got)
	}
}
