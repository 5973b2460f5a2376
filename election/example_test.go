package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
)

// The shape of a service (the README's snippet, compiled here): start the
// Elector with the service's signal context, run the singleton work with Lead,
// fence every write with FencedTx, and wait for the drain on the way out.
func Example_service() {
	if err := service(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func service() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()

	e, err := election.New(election.Config{
		DSN:    os.Getenv("DATABASE_URL"), // or ConnConfig: pool.Config().ConnConfig
		Scopes: []string{"billing"},       // NodeID defaults to <hostname>-<pid>-<random>
	})
	if err != nil {
		return err // the field and the rule it breaks
	}
	if err := e.Start(ctx); err != nil {
		return err // unreachable, no schema, no grants: now, not never
	}
	http.Handle("/readyz", e.HealthHandler()) // 200 while it reaches the database

	err = e.Scope("billing").Lead(ctx, func(ctx context.Context, tok election.Token) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err() // leadership lost: stop at once
			case <-tok.Draining():
				return nil // SIGTERM or a handover: finish, the next leader takes over
			case <-time.After(time.Second):
			}
			err := election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE due < now()")
				return err
			})
			if err != nil {
				return err // ErrFenced: a successor took over; nothing was written
			}
		}
	})
	return errors.Join(err, e.Wait()) // Lead returns at SIGTERM; Wait, once handed over
}

// A service embeds an Elector, starts it for its lifetime, and does its singleton
// work under Lead. Standalone mode (no database) keeps this example runnable; a
// real service sets DSN instead.
func Example() {
	e, err := election.New(election.Config{
		Mode:   election.ModeStandalone, // DSN: os.Getenv("DATABASE_URL") in a real service
		NodeID: "worker-1",
		Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	err = e.Scope("billing").Lead(ctx, func(ctx context.Context, tok election.Token) error {
		fmt.Printf("sending invoices as %s, epoch %d\n", tok.Holder, tok.Epoch)
		cancel() // stop: Lead returns once this function has
		return nil
	})
	fmt.Println("lead:", err, "wait:", e.Wait())
	// Output:
	// sending invoices as worker-1, epoch 0
	// lead: <nil> wait: <nil>
}

// Start reports at once what keeps a node from campaigning, with the cause
// intact: here, nothing listens on the port.
func ExampleElector_Start() {
	e, err := election.New(election.Config{
		DSN:    "postgres://app@127.0.0.1:1/app?connect_timeout=2",
		Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = e.Start(context.Background())
	fmt.Println(errors.Is(err, election.ErrUnreachable), errors.Is(err, syscall.ECONNREFUSED))
	// Output: true true
}

// Await waits for leadership, bounded by its context.
func ExampleScope_Await() {
	e, _ := election.New(election.Config{Mode: election.ModeStandalone, NodeID: "worker-1", Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = e.Start(ctx)
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	tok, err := e.Scope("billing").Await(wait)
	fmt.Println(tok.Holder, tok.Epoch, err)
	// Output: worker-1 0 <nil>
}

// Config.Validate names the field and the rule a configuration breaks.
func ExampleConfig_Validate() {
	cfg := election.Config{
		DSN:               "postgres://app@db/app",
		Scopes:            []string{"billing"},
		HeartbeatInterval: time.Second,
		HeartbeatTimeout:  time.Second,
		TrustWindow:       1500 * time.Millisecond,
	}
	fmt.Println(cfg.Validate())
	// Output:
	// TrustWindow: heartbeat interval (1s) + heartbeat timeout (1s) must be shorter than trust window (1.5s), or a healthy leader's gate closes between heartbeats
}

// Behind a connection pooler: either give the leadership a session of its own and
// let the application's pool (and its fenced writes) go through the pooler, or, when
// a transaction pooler is all there is, run in lease mode. A lock-mode Elector
// whose DSN goes through a transaction pooler refuses to start (ErrPooler).
func ExampleConfig_pooler() {
	ctx := context.Background()
	// Split: leadership on a session of its own, the application's pool (and its
	// fenced writes) through PgBouncer in transaction mode.
	split, err := election.New(election.Config{
		DSN:    os.Getenv("DATABASE_DIRECT_URL"), // PostgreSQL itself, or a session pooler
		Scopes: []string{"billing"},
	})
	if err != nil {
		return
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // PgBouncer < 1.21: add default_query_exec_mode=exec
	if err != nil {
		return
	}
	// Only a transaction pooler: lease mode, one connection per node through it.
	leased, err := election.New(election.Config{
		DSN:    os.Getenv("DATABASE_URL"), // PgBouncer, Supavisor, pgcat: transaction pooling
		Scopes: []string{"billing"},
		Mode:   election.ModeLease,
	})
	if err != nil {
		return
	}
	_, _, _ = split, pool, leased
}

// FencedTx is the whole pattern of a write under leadership: begin, fence, write,
// commit. A leader that was paused and replaced gets ErrFenced and writes nothing.
func ExampleFencedTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return
	}
	defer pool.Close()
	var e *election.Elector // started elsewhere in the service
	_ = e.Scope("billing").Do(ctx, func(ctx context.Context, tok election.Token) error {
		return election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE due < now()")
			return err
		})
	})
}

// Fence alone, in a transaction the caller manages.
func ExampleFence() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return
	}
	defer pool.Close()
	var tok election.Token // from Require, Await, Do or Lead
	tx, err := pool.Begin(ctx)
	if err != nil {
		return
	}
	defer tx.Rollback(ctx)
	if err := election.Fence(ctx, tx, tok); errors.Is(err, election.ErrFenced) {
		return // a successor leads now; do not write
	}
	_, _ = tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE due < now()")
	_ = tx.Commit(ctx)
}

// Observe delivers every engine event, in order per scope, without ever
// blocking the engine: here a service's view of its terms, elected (with the
// term's token) and revoked.
func ExampleElector_Observe() {
	e, _ := election.New(election.Config{Mode: election.ModeStandalone, NodeID: "worker-1", Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler)})
	events := make(chan election.Event, 16)
	remove := e.Observe(func(ev election.Event) {
		if ev.Kind == election.EventElected || ev.Kind == election.EventRevoked {
			events <- ev
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	_ = e.Start(ctx)
	ev := <-events
	fmt.Println(ev.Kind, ev.Scope, ev.Holder, ev.Token.Valid())
	cancel()
	_ = e.Wait()
	remove()
	ev = <-events
	fmt.Println(ev.Kind, ev.Scope, ev.Reason)
	// Output:
	// elected billing worker-1 true
	// revoked billing shutdown
}
