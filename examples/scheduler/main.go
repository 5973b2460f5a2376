// Command scheduler is a small service that embeds pgleader the way a user would:
// several replicas run it, exactly one of them fires the nightly job, and every
// write the job makes is fenced, so a replica that was paused and replaced cannot
// write under its old term.
//
//	pgleader migrate --dsn "$DATABASE_URL"
//	DATABASE_URL=postgres://… go run ./examples/scheduler   # start it 2–3 times
//
// Stop a replica with Ctrl-C: it drains and hands over to another at once. With
// METRICS_ADDR=127.0.0.1:9100 it serves its election metrics on /metrics
// (electionprom) and its role per scope on /readyz.
package main

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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionprom"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
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
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { // replicas start together: one creates the table
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('report_runs'));
			CREATE TABLE IF NOT EXISTS report_runs (
				id bigserial PRIMARY KEY, epoch bigint NOT NULL, ran_by text NOT NULL, at timestamptz DEFAULT now())`)
		return err
	}); err != nil {
		return err
	}
	e, err := election.New(election.Config{ConnConfig: pool.Config().ConnConfig, Scopes: []string{"nightly-report"}})
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err // e.g. "… has no pgleader schema: run `pgleader migrate`"
	}
	if addr := os.Getenv("METRICS_ADDR"); addr != "" {
		reg := prometheus.NewRegistry()
		if _, err := electionprom.Register(reg, e); err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("/readyz", e.HealthHandler())
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
		defer srv.Close()
	}

	err = e.Scope("nightly-report").Lead(ctx, func(ctx context.Context, tok election.Token) error {
		slog.Info("leading", "epoch", tok.Epoch, "node", tok.Holder)
		tick := time.NewTicker(2 * time.Second) // "nightly", sped up for the example
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				slog.Warn("leadership lost", "cause", context.Cause(ctx))
				return ctx.Err()
			case <-tok.Draining():
				return nil
			case <-tick.C:
			}
			err := election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO report_runs (epoch, ran_by) VALUES ($1, $2)", tok.Epoch, tok.Holder)
				return err
			})
			if err != nil {
				return err // ErrFenced: a newer leader exists; Lead waits for the next term
			}
			slog.Info("report generated", "epoch", tok.Epoch)
		}
	})
	return errors.Join(err, e.Wait()) // Wait: drained and handed over
}
