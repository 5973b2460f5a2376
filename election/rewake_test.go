package election

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestWakeUpDuringClaimInFlight: a release announced while this node's claim of the
// scope is in flight — a claim that saw the old leader still holding the lock — is
// not lost: the node claims again as soon as that claim's outcome arrives, instead
// of at its next heartbeat. (Lost, it cost one heartbeat interval: about one
// targeted handover in two hundred in pgleader bench failover.) The heartbeat
// interval here is 2 s and the old leader sits out 10 s after resigning, so only
// the wake-up explains a takeover within 400 ms. The nodes log in as a node role
// (nodeLogin): the doorbell does not ring a superuser's session.
func TestWakeUpDuringClaimInFlight(t *testing.T) {
	pgtest.Slow(t)
	dsn := nodeLogin(t, pgtest.MigratedDSN(t))
	cfg := func(id string) Config {
		return Config{DSN: dsn, NodeID: id, Scopes: []string{"s"},
			HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 500 * time.Millisecond,
			TrustWindow: 3 * time.Second, SessionLease: 4 * time.Second, ResignCooldown: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(id string, hooks testHooks) (*Elector, chan error) {
		e, err := New(cfg(id))
		if err != nil {
			t.Fatal(err)
		}
		e.test = hooks
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return e, done
	}
	leads := func(e *Elector) bool { _, err := e.Scope("s").Require(context.Background()); return err == nil }
	waitFor := func(what string, d time.Duration, ok func() bool) time.Duration {
		t.Helper()
		t0 := time.Now()
		for !ok() {
			if time.Since(t0) > d {
				t.Fatalf("%s: not within %v", what, d)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(t0)
	}

	leader, _ := start("wl", testHooks{})
	waitFor("wl leads", 10*time.Second, func() bool { return leads(leader) })

	inFlight, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	claimReturned := func(sc *Scope, r claimResult) {
		if r.acquired || r.holder == nil {
			return
		}
		once.Do(func() {
			close(inFlight)
			<-released
		})
	}
	follower, _ := start("wt", testHooks{claimReturned: claimReturned})
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("wt's first claim never returned")
	}
	// wt's claim saw wl holding the scope; its outcome is held back. wl resigns:
	// the release's doorbell reaches wt while that claim counts as in flight.
	if err := leader.Scope("s").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	sc := follower.Scope("s")
	waitFor("the release's wake-up reaches wt", 5*time.Second, func() bool {
		sc.cmu.Lock()
		defer sc.cmu.Unlock()
		return sc.rewoken
	})
	close(released)
	if took := waitFor("wt leads", 5*time.Second, func() bool { return leads(follower) }); took > 400*time.Millisecond {
		t.Fatalf("wt led %v after its in-flight claim returned: the release's wake-up was lost (heartbeat interval 2s)", took)
	}
}

// nodeLogin creates a login role in the node role for the test (dropped after
// it) and returns dsn logging in as it. The owner may signal its sessions, so
// its nodes' doorbells ring: only a superuser may signal a superuser's session,
// and the test database's own login is one.
func nodeLogin(t *testing.T, dsn string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "t" + hex.EncodeToString(b) + "_bell"
	ctx := context.Background()
	run := func(sql string) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := run("CREATE ROLE " + role + " LOGIN IN ROLE pgleader_node"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + role + "'")
		_ = run("DROP OWNED BY " + role + " CASCADE")
		_ = run("DROP ROLE IF EXISTS " + role)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}
