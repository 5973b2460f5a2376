package collector

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestEvents(t *testing.T) {
	pgtest.Slow(t)
	t.Run("ElectedThroughListen", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		cfg.Source = SourceModeNotify
		cfg.PollInterval = MaxPollInterval // only notifications (and the read after LISTEN) read
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		s := waitSnap(t, c, "the first read", func(s *Snapshot) bool { return s.Health.Source == SourceLive })
		polls := s.Health.Polls

		n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		ev := rec.waitEvent(t, "elected n1", func(e Event) bool { return e.Kind == EventElected && e.Scope == "s" })
		if ev.Node != "n1" || ev.Epoch != 1 || ev.PrevHolder != "" || ev.AuditID == 0 || ev.At.IsZero() {
			t.Fatalf("elected event %+v", ev)
		}
		if _, ok := rec.find(func(e Event) bool { return e.Kind == EventNodeJoined && e.Node == "n1" }); !ok {
			t.Fatal("no node_joined for n1")
		}
		testnode.Start(t, testnode.FastConfig(dsn, "n2", "s"))
		// n2 registering notifies nothing; its follower role shows at the next read.
		admin := pgtest.Connect(t, dsn)
		pgtest.WaitFor(t, "n2 campaigning (its leadership session holds its beacon)", wait, func() bool {
			return queryInt(t, admin, `SELECT count(*) FROM pgleader.nodes n
			                           WHERE n.node_id = 'n2' AND pgleader.lock_held(n.beacon_key, n.backend_pid)`) == 1
		})
		if err := n1.Scope("s").Resign(context.Background()); err != nil {
			// Possible under load (n1's session lost): the term ends anyway.
			t.Logf("Resign: %v", err)
		}
		end := rec.waitEvent(t, "n1's term ended", func(e Event) bool {
			return (e.Kind == EventReleased || e.Kind == EventTermClosed) && e.Epoch == 1
		})
		el := rec.waitEvent(t, "elected n2", func(e Event) bool { return e.Kind == EventElected && e.Epoch == 2 })
		if end.Node != "n1" || (end.Kind == EventReleased && end.Reason != "resigned") || end.Reason == "" ||
			el.Node != "n2" || el.PrevHolder != "n1" || el.Seq <= end.Seq || !strings.Contains(el.Detail, "n1") {
			t.Fatalf("end of term 1 %+v, elected %+v", end, el)
		}
		if got := c.Snapshot().Health; got.Notifications == 0 || got.Polls <= polls {
			t.Fatalf("health %+v: the notifications did not drive reads", got)
		}
	})

	t.Run("OrderedNoDuplicatesAcrossReconnect", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		c := newCollector(t, testConfig(t, dsn))
		rec := record(t, c)
		run(t, c)
		nodes := []*testnode.Node{testnode.Start(t, testnode.FastConfig(dsn, "n1", "s")), testnode.Start(t, testnode.FastConfig(dsn, "n2", "s"))}
		admin := pgtest.Connect(t, dsn)
		resigns := func(k int) {
			for range k {
				var l *testnode.Node
				pgtest.WaitFor(t, "a leader", wait, func() bool {
					for _, n := range nodes {
						if n.Leads("s") {
							l = n
							return true
						}
					}
					return false
				})
				_ = l.Scope("s").Resign(context.Background()) // an error (session lost) ends the term too
				pgtest.WaitFor(t, "the next term", wait, func() bool { return !l.Leads("s") })
			}
		}
		resigns(3)
		// Cut both of the collector's connections to this database.
		killed := queryInt(t, admin, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		                              WHERE application_name LIKE 'pgleader-collector%' AND datname = current_database()`)
		if killed != 2 {
			t.Fatalf("terminated %d collector backends, want 2 (listener and reader)", killed)
		}
		resigns(3)
		pgtest.WaitFor(t, "the seventh term", wait, func() bool {
			return queryInt(t, admin, "SELECT count(*) FROM pgleader.terms WHERE scope = 's' AND epoch >= 7") > 0
		})
		var want, elected int64
		pgtest.WaitFor(t, "an event per audit row", wait, func() bool {
			want = queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind IN ('elected', 'released', 'term_closed_by_successor')`)
			elected = queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind = 'elected'`)
			n := 0
			for _, e := range rec.all() {
				if e.AuditID != 0 {
					n++
				}
			}
			return int64(n) == want
		})
		evs := rec.all()
		seen := map[int64]bool{}
		var last int64
		for i, e := range evs {
			if i > 0 && e.Seq != evs[i-1].Seq+1 {
				t.Fatalf("seq %d follows %d (nothing may be dropped or reordered for a fast subscriber)", e.Seq, evs[i-1].Seq)
			}
			if e.AuditID == 0 {
				continue
			}
			if seen[e.AuditID] || e.AuditID < last {
				t.Fatalf("audit id %d repeated or out of order (after %d)", e.AuditID, last)
			}
			seen[e.AuditID], last = true, e.AuditID
		}
		if int64(len(seen)) != want {
			t.Fatalf("%d audit events, %d audit rows", len(seen), want)
		}
		if n := len(slices.DeleteFunc(evs, func(e Event) bool { return e.Kind != EventElected })); int64(n) != elected || n < 7 {
			t.Fatalf("%d elected events, %d elected audit rows (at least 7: one claim and six after resigns)", n, elected)
		}
		s := waitSnap(t, c, "live again", live)
		if s.Health.Reconnects == 0 {
			t.Fatalf("health %+v: no reconnect counted", s.Health)
		}
	})

	t.Run("SlowSubscriberNeverBlocks", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		c := newCollector(t, testConfig(t, dsn))
		slow, unsub := c.Subscribe(1) // never read
		defer unsub()
		updates, stop := c.Updates() // read only at the end
		defer stop()
		rec := record(t, c)
		run(t, c)
		waitSnap(t, c, "a first read", func(*Snapshot) bool { return true })
		admin := pgtest.Connect(t, dsn)
		exec(t, admin, "INSERT INTO pgleader.leader_state (scope, lock_key) VALUES ('s', pgleader.lock_key('s'))") // fence_rejected audits known scopes
		for i := range 20 {
			exec(t, admin, "SELECT pgleader.fence_rejected('s', $1, 'zombie', 'test')", int64(i+1))
		}
		rec.waitEvent(t, "the 20th fence event", func(e Event) bool { return e.Kind == EventFenceRejected && e.Epoch == 20 })
		s := c.Snapshot()
		if len(slow) != 1 {
			t.Fatalf("slow subscriber holds %d events in its channel, want its buffer of 1", len(slow))
		}
		// What did not fit waited for it: read late, it gets every event, in order.
		for seq := uint64(1); ; seq++ {
			ev := recv(t, slow)
			if ev.Seq != seq {
				t.Fatalf("slow subscriber's event %+v, want seq %d", ev, seq)
			}
			if ev.Kind == EventFenceRejected && ev.Epoch == 20 {
				break
			}
		}
		if d := c.Snapshot().Health.DroppedEvents; d != 0 {
			t.Fatalf("%d events dropped for a subscriber that read late", d)
		}
		before := s.Seq
		got := <-updates
		if got.Seq < before {
			t.Fatalf("Updates gave snapshot %d, older than %d published before it was read: not latest-wins", got.Seq, before)
		}
	})

	t.Run("ListenerCutMeansPolling", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		cfg.Source = SourceModeNotify
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		waitSnap(t, c, "live", func(s *Snapshot) bool { return s.Health.Source == SourceLive })
		admin := pgtest.Connect(t, dsn)
		if n := queryInt(t, admin, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		                            WHERE application_name = $1 AND datname = current_database()`, appListener); n != 1 {
			t.Fatalf("terminated %d listeners", n)
		}
		down := rec.waitEvent(t, "live → polling", func(e Event) bool { return e.Kind == EventSourceChanged && e.Detail == "live → polling" })
		up := rec.waitEvent(t, "polling → live", func(e Event) bool { return e.Kind == EventSourceChanged && e.Detail == "polling → live" })
		if up.Seq <= down.Seq {
			t.Fatalf("source events out of order: %+v %+v", down, up)
		}
		if _, ok := rec.find(func(e Event) bool { return e.Kind == EventSourceChanged && e.Detail == "live → disconnected" }); ok {
			t.Fatal("reads were reported down while only the listener was cut")
		}
		s := c.Snapshot()
		if s.Health.LastError == "" || s.Health.Reconnects == 0 {
			t.Fatalf("health %+v after a listener cut", s.Health)
		}
	})
}
