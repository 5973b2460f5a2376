package election_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/internal/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fast timing for tests: I + T < W < L with L − W ≥ 100ms.
func fastConfig(dsn, id string, scopes ...string) election.Config {
	return election.Config{
		DSN: dsn, NodeID: id, Scopes: scopes,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond,
		DrainTimeout: time.Second, ResignCooldown: 300 * time.Millisecond,
		Logger: testLogger(),
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("PGLEADER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// migratedDB returns the DSN of a fresh, migrated database.
func migratedDB(t testing.TB) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// recorder collects the engine events of several nodes.
type recorder struct {
	mu     sync.Mutex
	events []election.Event
}

func (r *recorder) Observe(e election.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []election.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]election.Event(nil), r.events...)
}

func (r *recorder) count(node string, kind election.EventKind) int {
	n := 0
	for _, e := range r.snapshot() {
		if (node == "" || e.Node == node) && e.Kind == kind {
			n++
		}
	}
	return n
}

// node is an Elector running in the test.
type node struct {
	*election.Elector
	cancel context.CancelFunc
	done   chan error
}

func startNode(t testing.TB, cfg election.Config) *node {
	t.Helper()
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Elector: e, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

// stop cancels Run and waits for it to return (drain included).
func (n *node) stop() {
	n.cancel()
	select {
	case err := <-n.done:
		if err != nil {
			panic(fmt.Sprintf("Run returned %v", err))
		}
		n.done <- nil // later stop calls return at once
	case <-time.After(30 * time.Second):
		panic("Run did not return within 30s of cancel")
	}
}

func (n *node) leads(scope string) bool {
	_, err := n.Scope(scope).Require(context.Background())
	return err == nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func leaders(nodes []*node, scope string) []*node {
	var out []*node
	for _, n := range nodes {
		if n.leads(scope) {
			out = append(out, n)
		}
	}
	return out
}

// interval is a stretch during which a node's gate for a scope may have been open:
// from gate_open to the earlier of gate_closed and the trust_until in force.
type interval struct {
	node       string
	epoch      int64
	start, end int64
}

// gateIntervals reconstructs gate-open intervals per scope from events.
func gateIntervals(events []election.Event, scope string) []interval {
	type key struct {
		node string
	}
	open := map[key]*interval{}
	var out []interval
	sort.SliceStable(events, func(i, j int) bool { return events[i].MonoNS < events[j].MonoNS })
	for _, e := range events {
		if e.Scope != scope {
			continue
		}
		k := key{e.Node}
		switch e.Kind {
		case election.EventGateOpen:
			open[k] = &interval{node: e.Node, epoch: e.Epoch, start: e.MonoNS, end: e.TrustUntilMonoNS}
		case election.EventHeartbeatOK:
			if iv := open[k]; iv != nil && e.TrustUntilMonoNS > iv.end {
				iv.end = e.TrustUntilMonoNS
			}
		case election.EventGateClosed:
			if iv := open[k]; iv != nil {
				iv.end = min(iv.end, e.MonoNS)
				out = append(out, *iv)
				delete(open, k)
			}
		}
	}
	now := monotime.Now()
	for _, iv := range open {
		iv.end = min(iv.end, now)
		out = append(out, *iv)
	}
	return out
}

// overlap returns the total time during which gates of different nodes were open
// at once.
func overlap(ivs []interval) (time.Duration, string) {
	var total time.Duration
	var worst string
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.node == b.node {
				continue
			}
			if o := min(a.end, b.end) - max(a.start, b.start); o > 0 {
				total += time.Duration(o)
				worst = fmt.Sprintf("%s(epoch %d) and %s(epoch %d) overlap %v", a.node, a.epoch, b.node, b.epoch, time.Duration(o))
			}
		}
	}
	return total, worst
}

func assertNoOverlap(t testing.TB, r *recorder, scope string) {
	t.Helper()
	ivs := gateIntervals(r.snapshot(), scope)
	if len(ivs) == 0 {
		t.Fatalf("no gate intervals recorded for %s: the overlap check would be vacuous", scope)
	}
	if o, worst := overlap(ivs); o > 0 {
		t.Errorf("gates overlapped for %v: %s", o, worst)
	}
}

func queryInt(t testing.TB, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int64
	if err := c.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func migrationsUp(cfg *pgx.ConnConfig) (migrations.Result, error) {
	return migrations.Up(context.Background(), cfg, nil)
}

// TestOverlapDetects keeps the overlap assertion honest: it must flag overlapping
// gates of two nodes and ignore a node's own consecutive periods.
func TestOverlapDetects(t *testing.T) {
	ms := int64(time.Millisecond)
	ev := func(kind election.EventKind, node string, at, until int64) election.Event {
		return election.Event{Kind: kind, Scope: "s", Node: node, MonoNS: at * ms, TrustUntilMonoNS: until * ms}
	}
	bad := []election.Event{
		ev(election.EventGateOpen, "a", 0, 100),
		ev(election.EventHeartbeatOK, "a", 50, 150),
		ev(election.EventGateOpen, "b", 120, 300),
		ev(election.EventGateClosed, "a", 200, 0), // a trusted until 150: 30ms overlap
		ev(election.EventGateClosed, "b", 250, 0),
	}
	if o, _ := overlap(gateIntervals(bad, "s")); o != 30*time.Millisecond {
		t.Fatalf("overlap = %v, want 30ms", o)
	}
	good := []election.Event{
		ev(election.EventGateOpen, "a", 0, 100),
		ev(election.EventGateClosed, "a", 60, 0),
		ev(election.EventGateOpen, "a", 70, 170),
		ev(election.EventGateClosed, "a", 80, 0),
		ev(election.EventGateOpen, "b", 80, 200),
		ev(election.EventGateClosed, "b", 90, 0),
	}
	if o, w := overlap(gateIntervals(good, "s")); o != 0 {
		t.Fatalf("overlap = %v (%s), want 0", o, w)
	}
}
