package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// A node that leads 260 of 300 scopes dies; its successor closes the 260 dead
// terms and is elected 260 times in one claim transaction: 520 events in one
// read (or one streamed transaction). A subscriber with the dashboard's buffer
// (256) that reads only after the burst was published gets every one of them.
func TestMassFailoverReachesSubscribers(t *testing.T) {
	pgtest.Slow(t)
	for _, src := range []SourceMode{SourceModeNotify, SourceModeLogical} {
		t.Run(string(src), func(t *testing.T) { testMassFailoverReachesSubscribers(t, src) })
	}
}

func testMassFailoverReachesSubscribers(t *testing.T, src SourceMode) {
	const scopes, dying = 300, 260
	dsn := pgtest.MigratedDSN(t)
	names := make([]string, scopes)
	for i := range names {
		names[i] = fmt.Sprintf("scope-%04d", i+1)
	}
	dead, heir := pgtest.Connect(t, dsn), pgtest.Connect(t, dsn)
	register := `SELECT pgleader.register_node($1, 'h', 1, 'test', $2, 100, 300, 500, 0, 0)`
	exec(t, heir, register, "node-1", names)
	exec(t, dead, register, "node-2", names)
	claimSQL := `SELECT count(*) FILTER (WHERE acquired) FROM pgleader.claim_scopes($1, 'h', 0, 100, 100, 300, 500, $2::text[],
	               ARRAY(SELECT pgleader.lock_key(s) FROM unnest($2::text[]) s))`
	if n := queryInt(t, dead, claimSQL, "node-2", names[:dying]); n != dying {
		t.Fatalf("node-2 claimed %d scopes, want %d", n, dying)
	}
	if n := queryInt(t, heir, claimSQL, "node-1", names[dying:]); n != scopes-dying {
		t.Fatalf("node-1 claimed %d scopes, want %d", n, scopes-dying)
	}

	cfg := testConfig(t, dsn)
	cfg.Source = src
	c := newCollector(t, cfg)
	run(t, c)
	waitSnap(t, c, "300 scopes led", func(s *Snapshot) bool { return len(s.Scopes) == scopes && live(s) })
	evs, unsubscribe := c.Subscribe(256) // the dashboard's buffer
	defer unsubscribe()

	// kill -9: node-2's session ends without releasing; node-1 takes over in
	// one transaction, closing each dead term.
	exec(t, heir, "SELECT pg_terminate_backend($1)", dead.PgConn().PID())
	pgtest.WaitFor(t, "node-2's locks freed", wait, func() bool {
		return queryInt(t, heir, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()") == 0
	})
	if n := queryInt(t, heir, claimSQL, "node-1", names[:dying]); n != dying {
		t.Fatalf("node-1 took over %d scopes, want %d", n, dying)
	}
	// The subscriber reads only once the collector has published the burst.
	waitSnap(t, c, "node-1 leads every scope", func(s *Snapshot) bool {
		for _, sc := range s.Scopes {
			if sc.Leader != "node-1" {
				return false
			}
		}
		return len(s.Scopes) == scopes
	})

	closed, elected := map[string]bool{}, map[string]bool{}
	deadline := time.After(wait)
	for len(closed) < dying || len(elected) < dying {
		select {
		case ev := <-evs:
			switch {
			case ev.Kind == EventTermClosed && ev.Node == "node-2":
				closed[ev.Scope] = true
			case ev.Kind == EventElected && ev.Node == "node-1" && ev.Epoch == 2:
				elected[ev.Scope] = true
			}
		case <-deadline:
			t.Fatalf("%d terms of node-2 closed and %d elections of node-1 delivered, want %d each (dropped: %d)",
				len(closed), len(elected), dying, c.Snapshot().Health.DroppedEvents)
		}
	}
	if d := c.Snapshot().Health.DroppedEvents; d != 0 {
		t.Errorf("Health.DroppedEvents = %d, want 0", d)
	}
}
