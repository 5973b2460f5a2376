// Command service is the README's embedding snippet as a whole program: replicas
// of it elect one leader for the scope "invoices", and only the leader runs the
// job, once a second, every write fenced with its epoch. It serves /readyz (the
// node's role per scope) and /metrics (its election metrics) on ADDR.
//
//	pgleader migrate --dsn "$DATABASE_URL"
//	DATABASE_URL=postgres://… ADDR=127.0.0.1:8081 go run ./examples/service   # start it 2–3 times
//
// kill -9 the leader: another replica leads within milliseconds. Ctrl-C or SIGTERM:
// the leader finishes its current run, hands over, and exits 0.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionprom"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	// Replicas start together: one transaction-scoped lock keeps their CREATE
	// TABLE IF NOT EXISTS from racing (it is not atomic in PostgreSQL).
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('invoice_runs'));
			CREATE TABLE IF NOT EXISTS invoice_runs (
				epoch bigint NOT NULL, node text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
		return err
	}); err != nil {
		return err
	}

	e, err := election.New(election.Config{ConnConfig: pool.Config().ConnConfig, Scopes: []string{"invoices"}})
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if _, err := electionprom.Register(reg, e); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/readyz", e.HealthHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: os.Getenv("ADDR"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()

	err = e.Scope("invoices").Lead(ctx, func(ctx context.Context, tok election.Token) error {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err() // leadership lost
			case <-tok.Draining():
				return nil // shutting down: the next leader takes over
			case <-tick.C:
			}
			err := election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO invoice_runs (epoch, node, pid) VALUES ($1, $2, $3)",
					tok.Epoch, tok.Holder, os.Getpid())
				return err
			})
			if err != nil {
				return err
			}
		}
	})
	return errors.Join(err, e.Wait())
}
