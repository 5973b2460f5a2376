package election

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestClaimRetriesEndedHolder: a claim that finds a scope still locked by a node
// whose leadership session this node has just seen end (its beacon free, its
// backend still releasing its locks) is retried until the lock is free, and the
// claim's outcome is the won term — not "held by that node", which would leave
// the scope to the next heartbeat. A node not seen to end is not retried, nor
// one that rejoined since (a restart under the same id: its live session holds
// the lock). The dying backend is played by a test connection that holds the
// scope's lock, with the scope's record naming "ghost" as the holder on that
// connection's backend.
func TestClaimRetriesEndedHolder(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := New(Config{DSN: dsn, NodeID: "retrier", Scopes: []string{"r"},
		HeartbeatInterval: 5 * time.Second, HeartbeatTimeout: time.Second,
		TrustWindow: 6500 * time.Millisecond, SessionLease: 7 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sc := e.Scope("r")
	ghost, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ghost.Close(context.Background())
	if _, err := ghost.Exec(ctx, "SELECT pg_advisory_lock($1)", sc.key); err != nil {
		t.Fatal(err)
	}
	if _, err := ghost.Exec(ctx, `INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid, acquired_at, last_heartbeat)
		VALUES ('r', $1, 1, 'ghost', pg_backend_pid(), now(), now())`, sc.key); err != nil {
		t.Fatal(err)
	}

	outcomes := make(chan claimResult, 8)
	e.test.claimReturned = func(s *Scope, r claimResult) {
		if s == sc {
			outcomes <- r
		}
	}
	next := func(what string) claimResult {
		t.Helper()
		select {
		case r := <-outcomes:
			return r
		case <-ctx.Done():
			t.Fatalf("%s: no claim outcome", what)
			return claimResult{}
		}
	}
	heldByGhost := func(r claimResult) bool { return !r.acquired && r.holder != nil && *r.holder == "ghost" }

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if r := next("first claim"); !heldByGhost(r) {
		t.Fatalf("first claim %+v, want held by ghost", r)
	}
	sess := e.currentSession()

	// Not seen to end: one claim, and the scope stays with ghost.
	sess.requestClaims([]*Scope{sc}, "")
	if r := next("claim, ghost alive"); !heldByGhost(r) {
		t.Fatalf("claim with ghost alive %+v, want held by ghost (no retry)", r)
	}

	// Seen to end, then a session of the same node id joined (a restart that
	// kept its id): the lock is that live session's, so no wait for it.
	waits := make(chan []string, 8)
	// Set while e runs: retryEnded reads it only for a node noted as ended
	// (below, after this write; batchQueue.mu orders the two).
	e.test.retryWait = func(names []string) { waits <- names }
	sess.ended.noteEnded("ghost")
	sess.ended.rejoined("ghost") // what a re-read naming ghost's new session as the peer does (ring.act)
	sess.requestClaims([]*Scope{sc}, "")
	if r := next("claim, ghost rejoined"); !heldByGhost(r) {
		t.Fatalf("claim with ghost rejoined %+v, want held by ghost", r)
	}
	select {
	case names := <-waits:
		t.Fatalf("waited for %v, held by a node that rejoined", names)
	default:
	}

	// Seen to end: the claim finds the lock held and waits for it; the lock is
	// freed once that wait has begun (whatever the machine's speed), and the
	// claim wins it.
	sess.ended.noteEnded("ghost")
	var unlock sync.WaitGroup
	var unlockErr error
	var waited []string
	unlock.Go(func() {
		select {
		case waited = <-waits:
		case <-time.After(5 * time.Second):
			return // no wait began: checked below
		}
		time.Sleep(5 * time.Millisecond)
		_, unlockErr = ghost.Exec(ctx, "SELECT pg_advisory_unlock($1)", sc.key)
	})
	defer unlock.Wait() // before ghost is closed
	sess.requestClaims([]*Scope{sc}, "")
	r := next("claim, ghost ended")
	unlock.Wait()
	if unlockErr != nil {
		t.Fatalf("ghost's unlock: %v", unlockErr)
	}
	if len(waited) != 1 || waited[0] != "r" {
		t.Fatalf("waited for %v, want [r]", waited)
	}
	if !r.acquired || r.epoch == nil || *r.epoch != 2 || r.prevHolder == nil || *r.prevHolder != "ghost" {
		t.Fatalf("claim after ghost ended %+v, want epoch 2 won from ghost", r)
	}
}
