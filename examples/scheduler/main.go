// Command scheduler is a small service that embeds pgleader the way a user would:
// several replicas run it, exactly one of them fires the nightly job, and every
// write the job makes is fenced, so a replica that was paused and replaced cannot
// write under its old term.
//
//	pgleader migrate --dsn "$DATABASE_URL"
//	DATABASE_URL=postgres://… go run ./examples/scheduler   # start it 2–3 times
//
// Stop a replica with Ctrl-C: it drains and hands over to another at once. With
// METRICS_ADDR=127.0.0.1:9100 it serves its own election metrics (pgleader_is_leader,
// pgleader_epoch, acquisitions, losses, heartbeat latency, gate refusals) on
// /metrics, registered on the service's registry through electionprom.Register.
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
	dsn := os.Getenv("DATABASE_URL")
	host, _ := os.Hostname()

	e, err := election.New(election.Config{
		DSN:    dsn,
		NodeID: fmt.Sprintf("scheduler-%s-%d", host, os.Getpid()),
		Scopes: []string{"nightly-report"},
	})
	if err != nil {
		return err
	}
	// The service's own registry; the election's metrics join it.
	reg := prometheus.NewRegistry()
	if _, err := electionprom.Register(reg, e); err != nil {
		return err
	}
	if addr := os.Getenv("METRICS_ADDR"); addr != "" {
		srv := &http.Server{Addr: addr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
		defer srv.Close()
	}
	if err := e.Check(ctx); err != nil {
		return err // e.g. "… has no pgleader schema: run `pgleader migrate`"
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS report_runs (
		id bigserial PRIMARY KEY, epoch bigint NOT NULL, ran_by text NOT NULL, at timestamptz DEFAULT now())`); err != nil {
		return err
	}

	transitions, unsubscribe := e.Subscribe()
	defer unsubscribe()
	go func() {
		for t := range transitions {
			slog.Info("leadership", "kind", t.Kind, "scope", t.Scope, "epoch", t.Epoch, "holder", t.Holder, "reason", t.Reason)
		}
	}()

	runErr := make(chan error, 1)
	go func() { runErr <- e.Run(ctx) }()

	report := e.Scope("nightly-report")
	tick := time.NewTicker(2 * time.Second) // "nightly", sped up for the example
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return <-runErr // Run drains and releases before returning
		case <-tick.C:
			err := report.Do(ctx, func(ctx context.Context, tok election.Token) error {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if err := election.Fence(ctx, tx, tok); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "INSERT INTO report_runs (epoch, ran_by) VALUES ($1, $2)", tok.Epoch, tok.Holder); err != nil {
					return err
				}
				return tx.Commit(ctx)
			})
			switch {
			case err == nil:
				slog.Info("report generated", "node", e.NodeID())
			case errors.Is(err, election.ErrNotLeader):
				// another replica's turn
			case errors.Is(err, election.ErrFenced):
				slog.Warn("write refused: a newer leader exists", "err", err)
			default:
				slog.Error("report failed", "err", err)
			}
		}
	}
}
