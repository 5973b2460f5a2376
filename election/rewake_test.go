package election

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestWakeUpDuringClaimInFlight: a release announced while this node's claim of the
// scope is in flight — a claim that saw the old leader still holding the lock — is
// not lost: the node claims again as soon as that claim's outcome arrives, instead
// of at its next heartbeat. (Lost, it cost one heartbeat interval: about one
// targeted handover in two hundred in pgleader bench failover.) The heartbeat
// interval here is 2 s and the old leader sits out 10 s after resigning, so only
// the wake-up explains a takeover within 400 ms.
func TestWakeUpDuringClaimInFlight(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
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
	// the release's notification reaches wt while that claim counts as in flight.
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
