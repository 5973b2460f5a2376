package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
)

// A service embeds an Elector, runs it for its lifetime, and does its singleton work
// through Scope.Do. Standalone mode (no database) keeps this example runnable; a real
// service sets DSN instead.
func Example() {
	e, err := election.New(election.Config{
		Standalone: true, // DSN: os.Getenv("DATABASE_URL") in a real service
		NodeID:     "worker-1",
		Scopes:     []string{"billing"},
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	billing := e.Scope("billing")
	for billing.Do(ctx, func(ctx context.Context, tok election.Token) error {
		fmt.Printf("sending invoices as %s, epoch %d\n", tok.Holder, tok.Epoch)
		return nil
	}) != nil {
		time.Sleep(time.Millisecond) // not leader (yet): a real service would wait for its next tick
	}
	cancel() // drains: in-flight work finishes, the scope is released, followers take over
	fmt.Println("run:", <-done)
	// Output:
	// sending invoices as worker-1, epoch 0
	// run: <nil>
}

// Config.Validate names the field and the rule a configuration breaks.
func ExampleConfig_Validate() {
	cfg := election.Config{
		DSN:               "postgres://app@db/app",
		NodeID:            "worker-1",
		Scopes:            []string{"billing"},
		HeartbeatInterval: time.Second,
		HeartbeatTimeout:  time.Second,
		TrustWindow:       1500 * time.Millisecond,
	}
	fmt.Println(cfg.Validate())
	// Output:
	// TrustWindow: heartbeat interval (1s) + heartbeat timeout (1s) must be shorter than trust window (1.5s), or a healthy leader's gate closes between heartbeats
}

// Fence makes a write conditional on the token's epoch still being current when the
// transaction commits. A leader that was paused and replaced gets ErrFenced.
func ExampleFence() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return
	}
	defer pool.Close()
	var e *election.Elector // running elsewhere in the service
	_ = e.Scope("billing").Do(ctx, func(ctx context.Context, tok election.Token) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := election.Fence(ctx, tx, tok); errors.Is(err, election.ErrFenced) {
			return err // a successor leads now; do not write
		} else if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE due < now()"); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// Subscribe delivers leadership transitions in order without ever blocking the engine.
func ExampleElector_Subscribe() {
	e, _ := election.New(election.Config{Standalone: true, NodeID: "worker-1", Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler)})
	transitions, stop := e.Subscribe()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	tr := <-transitions
	fmt.Println(tr.Kind, tr.Scope, tr.Holder)
	cancel()
	<-done
	// Output: elected billing worker-1
}
