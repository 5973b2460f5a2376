package collector

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait is the deadline of every condition a test waits for.
const wait = 10 * time.Second

// testConfig is a Config with thresholds short enough for tests. Its source is
// LISTEN/NOTIFY, which most tests were written against;
// PGLEADER_TEST_SOURCE=auto|logical runs them on the logical source (tests that
// check LISTEN itself then fail on Health.Source).
func testConfig(t testing.TB, dsn string) Config {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	src := SourceModeNotify
	if s := os.Getenv("PGLEADER_TEST_SOURCE"); s != "" {
		src = SourceMode(s)
	}
	return Config{ConnConfig: cc, PollInterval: 50 * time.Millisecond, Logger: pgtest.Logger(), Source: src}
}

func newCollector(t testing.TB, cfg Config) *Collector {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs c until the test ends, and fails the test if Run errs or hangs.
func run(t testing.TB, c *Collector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(30 * time.Second):
			panic("collector Run did not return within 30s of cancel")
		}
	})
}

// recorder keeps every event of a subscription.
type recorder struct {
	mu     sync.Mutex
	events []Event
	done   chan struct{}
}

func record(t testing.TB, c *Collector) *recorder {
	t.Helper()
	ch, cancel := c.Subscribe(100000)
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range ch {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *recorder) find(match func(Event) bool) (Event, bool) {
	for _, ev := range r.all() {
		if match(ev) {
			return ev, true
		}
	}
	return Event{}, false
}

// waitEvent waits for an event that matches.
func (r *recorder) waitEvent(t testing.TB, what string, match func(Event) bool) Event {
	t.Helper()
	var got Event
	pgtest.WaitFor(t, what, wait, func() bool {
		var ok bool
		got, ok = r.find(match)
		return ok
	})
	return got
}

// waitSnap waits for a snapshot that satisfies cond and returns it.
func waitSnap(t testing.TB, c *Collector, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	var s *Snapshot
	pgtest.WaitFor(t, what, wait, func() bool {
		s = c.Snapshot()
		return s != nil && cond(s)
	})
	return s
}

// settle waits until the collector has made n more reads after the call.
func settle(t testing.TB, c *Collector, n int) *Snapshot {
	t.Helper()
	start := uint64(0)
	if s := c.Snapshot(); s != nil {
		start = s.Health.Polls
	}
	return waitSnap(t, c, fmt.Sprintf("%d more reads", n), func(s *Snapshot) bool { return s.Health.Polls >= start+uint64(n) })
}

// live reports whether s was read with the collector's source of changes up
// (LISTEN or the logical stream).
func live(s *Snapshot) bool {
	return s.Health.Source == SourceLive || s.Health.Source == SourceLogical
}

func alert(s *Snapshot, kind AlertKind, scope string) (Alert, bool) {
	for _, a := range s.Alerts {
		if a.Kind == kind && (scope == "" || a.Scope == scope) {
			return a, true
		}
	}
	return Alert{}, false
}

func scope(t testing.TB, s *Snapshot, name string) Scope {
	t.Helper()
	sc, ok := s.Scope(name)
	if !ok {
		t.Fatalf("snapshot %d has no scope %q", s.Seq, name)
	}
	return sc
}

func exec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(t testing.TB, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// forgeHolder makes conn the holder of scope through the schema's own claim (the
// connection keeps the lock like a leadership session), registering node first.
func forgeHolder(t testing.TB, conn *pgx.Conn, scope, node string) int64 {
	t.Helper()
	// Registered on this connection (a claim is made only by the session that
	// registered its node), with the scopes it registered before.
	exec(t, conn, `SELECT pgleader.register_node($1, 'forged-host', 1, 'test',
	               ARRAY(SELECT DISTINCT x FROM unnest(coalesce((SELECT n.scopes FROM pgleader.nodes n WHERE n.node_id = $1), '{}') || $2::text) x),
	               100, 300, 500, 0, 0)`, node, scope)
	var ok bool
	var epoch int64
	if err := conn.QueryRow(context.Background(),
		`SELECT acquired, epoch FROM pgleader.claim_scopes($2, 'forged-host', 0, 100, 100, 300, 500, ARRAY[$1::text], ARRAY[pgleader.lock_key($1)])`,
		scope, node).Scan(&ok, &epoch); err != nil || !ok {
		t.Fatalf("forged claim of %s by %s: acquired=%v err=%v", scope, node, ok, err)
	}
	return epoch
}
