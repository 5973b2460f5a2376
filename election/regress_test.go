package election_test

// Regression tests for defects found in review; each failed before its fix.

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/protocol"
)

// A's leadership backend is terminated while A's process lives on and keeps its
// guard (its gate may be open until its last confirmation + W). B claims, and dies
// while waiting A out. C claims next: it must wait for A too, although its own
// predecessor is B.
func TestChainedPredecessorsAreWaitedOut(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	const W = 1000 * time.Millisecond
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	key := protocol.LockKey("s")
	claim := func(lead *pgx.Conn, node string, guard int64) {
		var acquired bool
		if _, err := lead.Exec(ctx, `SELECT pgleader.register_node($1, 'h', 1, 'v', '{s}', 100, $2, 1500, 1, $3)`,
			node, W.Milliseconds(), guard); err != nil {
			t.Fatalf("register %s: %v", node, err)
		}
		if err := lead.QueryRow(ctx, `SELECT acquired FROM pgleader.claim_scopes($3, 'h', $4, 100, 200, $5, 1500, ARRAY[$1::text], ARRAY[$2::bigint])`,
			"s", key, node, guard, W.Milliseconds()).Scan(&acquired); err != nil || !acquired {
			t.Fatalf("claim by %s: acquired=%v err=%v", node, acquired, err)
		}
	}
	const gA, gB = int64(1111), int64(2222)
	aLead, aGuard := conn(), conn()
	if _, err := aGuard.Exec(ctx, "SELECT pg_advisory_lock($1)", gA); err != nil {
		t.Fatal(err)
	}
	aStart := time.Now() // A's trust lasts until at most aStart + W
	claim(aLead, "A", gA)
	admin := conn()
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1, 1000)", aLead.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	bLead, bGuard := conn(), conn()
	if _, err := bGuard.Exec(ctx, "SELECT pg_advisory_lock($1)", gB); err != nil {
		t.Fatal(err)
	}
	claim(bLead, "B", gB)
	bLead.PgConn().Conn().Close() // B dies while pending: both its sockets close
	bGuard.PgConn().Conn().Close()

	cfg := testnode.FastConfig(dsn, "C", "s")
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 100*time.Millisecond, 200*time.Millisecond
	cfg.TrustWindow, cfg.SessionLease = W, 1500*time.Millisecond
	c := testnode.Start(t, cfg)
	pgtest.WaitFor(t, "C leads", 10*time.Second, func() bool { return c.Leads("s") })
	if since := time.Since(aStart); since < W {
		t.Fatalf("C opened its gate %v after A's last confirmation, inside A's trust window (%v), with A's guard held", since, W)
	}
	// Once C's gate has opened, the chain is settled: a later claim owes A nothing.
	pgtest.WaitFor(t, "unresolved guards cleared", 5*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT cardinality(unresolved_guards) FROM pgleader.leader_state WHERE scope = 's'") == 0
	})
}

// blackhole is a TCP proxy whose existing connections can be silenced: bytes are
// dropped while both sockets stay open, as on a path that fails without a reset.
type blackhole struct {
	ln     net.Listener
	mu     sync.Mutex
	silent []*atomic.Bool
}

func newBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns = append(conns, c, s)
			silent := &atomic.Bool{}
			b.mu.Lock()
			b.silent = append(b.silent, silent)
			b.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil {
						if !silent.Load() {
							dst.Close()
						}
						return
					}
					if !silent.Load() {
						dst.Write(buf[:n])
					}
				}
			}
			wg.Go(func() { pipe(s, c) })
			wg.Go(func() { pipe(c, s) })
		}
	})
	return b
}

func (b *blackhole) silenceExisting() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.silent {
		s.Store(true)
	}
}

// A follower whose connections all go silent (its waiter among them) must still
// take over when the leader releases, once its session has been rebuilt.
func TestFollowerRecoversFromSilentWaiter(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("need a URL DSN with a host, got %q", dsn)
	}
	bh := newBlackhole(t, u.Host)
	via := *u
	via.Host = bh.ln.Addr().String()
	rec := &recorder{}
	lcfg := testnode.FastConfig(dsn, "leader", "s")
	l := testnode.Start(t, lcfg, rec.Observe)
	pgtest.WaitFor(t, "leader leads", 5*time.Second, func() bool { return l.Leads("s") })
	fcfg := testnode.FastConfig(via.String(), "follower", "s")
	f := testnode.Start(t, fcfg, rec.Observe)
	pgtest.WaitFor(t, "follower observes", 5*time.Second, func() bool { return rec.count("follower", election.EventObserved) > 0 })
	bh.silenceExisting()
	pgtest.WaitFor(t, "follower's heartbeat failing", 5*time.Second, func() bool {
		return rec.count("follower", election.EventHeartbeatFailed) > 0
	})
	l.Stop() // the leader releases: the follower must take over
	pgtest.WaitFor(t, "follower taking over", 20*time.Second, func() bool { return f.Leads("s") })
}

// Resign right after Require succeeded never answers ErrNotLeader.
func TestResignRightAfterElected(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg := testnode.FastConfig(dsn, "a", "s")
	cfg.ResignCooldown = 20 * time.Millisecond
	n := testnode.Start(t, cfg)
	for i := range 30 {
		pgtest.WaitFor(t, "leadership", 10*time.Second, func() bool { return n.Leads("s") })
		if err := n.Scope("s").Resign(context.Background()); err != nil {
			t.Fatalf("resign %d right after Require succeeded: %v", i, err)
		}
	}
}

// Resigning a scope whose fenced transaction is still running must not cost the
// node its other scopes.
func TestResignDoesNotStarveOtherScopes(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	rec := &recorder{}
	cfg := testnode.FastConfig(dsn, "a", "x", "y")
	n := testnode.Start(t, cfg, rec.Observe)
	pgtest.WaitFor(t, "leads both", 5*time.Second, func() bool { return n.Leads("x") && n.Leads("y") })
	ctx := context.Background()
	tok, err := n.Scope("x").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := election.Fence(ctx, tx, tok); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tx.Exec(ctx, "SELECT pg_sleep(0.6)") // a fenced write still running: longer than W
		done <- errors.Join(err, tx.Commit(ctx))
	}()
	if err := n.Scope("x").Resign(ctx); err != nil {
		t.Fatalf("Resign x: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the fenced transaction of the resigned term: %v", err)
	}
	for _, e := range rec.snapshot() {
		if e.Scope == "y" && (e.Kind == election.EventLost || e.Kind == election.EventGateClosed) || e.Kind == election.EventHeartbeatFailed {
			t.Errorf("scope y suffered from resigning x: %s %s %s", e.Scope, e.Kind, e.Reason)
		}
	}
	if !n.Leads("y") {
		t.Fatal("no longer leads y")
	}
}

// An observer added after Run returned receives nothing, and removing it
// returns at once.
func TestObserveAfterStop(t *testing.T) {
	n := testnode.Start(t, testnode.FastConfig(pgtest.MigratedDSN(t), "a", "s"))
	n.Stop()
	got := make(chan election.Event, 1)
	remove := n.Observe(func(ev election.Event) { got <- ev })
	done := make(chan struct{})
	go func() { remove(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("removing an observer added after Run returned does not return")
	}
	select {
	case ev := <-got:
		t.Fatalf("received %+v after Run returned", ev)
	default:
	}
}

// An operator asks the leader to resign through the database
// (pgleader.request_resign): its next heartbeat sees the mark, it drains and
// releases as "resigned", and the other node takes over. Only scope x moves; a
// request for an epoch that is not current is refused and changes nothing.
func TestResignRequestedThroughTheDatabase(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	rec := &recorder{}
	cfgA := testnode.FastConfig(dsn, "a", "x", "y")
	a := testnode.Start(t, cfgA, rec.Observe)
	pgtest.WaitFor(t, "a leads both", 5*time.Second, func() bool { return a.Leads("x") && a.Leads("y") })
	cfgB := testnode.FastConfig(dsn, "b", "x", "y")
	b := testnode.Start(t, cfgB, rec.Observe)
	// b campaigns before the request: else a, alone, takes x back after its
	// cooldown (seen on a loaded machine, where b registered late).
	pgtest.WaitFor(t, "b registered", 10*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'b' AND stopped_at IS NULL") == 1
	})
	epoch := queryInt(t, dsn, "SELECT epoch FROM pgleader.leader_state WHERE scope = 'x'")

	if ok := queryInt(t, dsn, "SELECT pgleader.request_resign('x', $1, 'test')::int", epoch+7); ok != 0 {
		t.Fatal("a request for an epoch that is not current was accepted")
	}
	if ok := queryInt(t, dsn, "SELECT pgleader.request_resign('x', $1, 'test')::int", epoch); ok != 1 {
		t.Fatal("the request for the current term was refused")
	}
	pgtest.WaitFor(t, "b leads x", 5*time.Second, func() bool { return b.Leads("x") })
	if reason := queryString(t, dsn, "SELECT release_reason FROM pgleader.terms WHERE scope = 'x' AND epoch = $1", epoch); reason != "resigned" {
		t.Fatalf("term %d of x ended %q, want resigned", epoch, reason)
	}
	if got := queryInt(t, dsn, "SELECT epoch FROM pgleader.leader_state WHERE scope = 'x'"); got != epoch+1 {
		t.Fatalf("x epoch %d, want %d", got, epoch+1)
	}
	if !a.Leads("y") {
		t.Fatal("a resigned y too: only x was asked")
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested' AND scope = 'x'"); n != 1 {
		t.Fatalf("%d resign_requested audit rows, want 1", n)
	}
	// The mark names the old epoch: b's term is not affected by it.
	time.Sleep(4 * cfgB.HeartbeatInterval)
	if !b.Leads("x") {
		t.Fatal("b lost x: the old request outlived its term")
	}
	assertNoOverlap(t, rec, "x")
}
