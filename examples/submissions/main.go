// Command submissions is a submission manager: every replica accepts work over
// HTTP into a table, and only the leader executes it, exactly once, whichever
// replica took it in and whichever replica leads when it is due.
//
//	pgleader migrate --dsn "$DATABASE_URL"
//	DATABASE_URL=postgres://… ADDR=127.0.0.1:8081 go run ./examples/submissions   # 2–3 times, other ADDRs
//	curl -d 'send the report' 'http://127.0.0.1:8081/submit?delay=2s'
//
// The leader keeps an in-memory schedule of pending submissions. It builds it
// afresh at the start of every term (a new leader trusts nothing it did not read
// itself), then refreshes it from a last_modified cursor every PollInterval.
// Rows whose insert committed later than their last_modified suggests would slip
// behind a plain cursor, so each refresh re-reads an overlap window behind it, and
// the schedule deduplicates by id. Executing a submission is one fenced
// transaction: it marks the row done (only if it is not done yet) and records the
// execution, so a leader that was replaced while it ran cannot execute anything
// (ErrFenced), and no submission runs twice.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
)

// PollInterval is how often the leader refreshes its schedule; Overlap how far
// behind its cursor each refresh reads again.
const (
	PollInterval = 100 * time.Millisecond
	Overlap      = 5 * time.Second
)

const schema = `
CREATE TABLE IF NOT EXISTS submissions (
	id            bigserial PRIMARY KEY,
	payload       text NOT NULL,
	run_at        timestamptz NOT NULL DEFAULT now(),
	last_modified timestamptz NOT NULL DEFAULT clock_timestamp(),
	done_at       timestamptz,
	done_epoch    bigint,
	done_by       text
);
CREATE INDEX IF NOT EXISTS submissions_last_modified ON submissions (last_modified);
CREATE TABLE IF NOT EXISTS executions (
	submission_id bigint NOT NULL,
	epoch         bigint NOT NULL,
	node          text NOT NULL,
	at            timestamptz NOT NULL DEFAULT now()
)`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "submissions:", err)
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
	// ... IF NOT EXISTS from racing (it is not atomic in PostgreSQL).
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('submissions'));"+schema)
		return err
	}); err != nil {
		return err
	}
	e, err := election.New(election.Config{ConnConfig: pool.Config().ConnConfig, Scopes: []string{"submissions"}})
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /readyz", e.HealthHandler())
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) { submit(w, r, pool) })
	srv := &http.Server{Addr: os.Getenv("ADDR"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()

	err = e.Scope("submissions").Lead(ctx, func(ctx context.Context, tok election.Token) error {
		return execute(ctx, pool, tok)
	})
	return errors.Join(err, e.Wait())
}

// submit stores one submission (any replica): the body is the payload, ?delay=
// when it is due.
func submit(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool) {
	payload, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var delay time.Duration
	if d := r.URL.Query().Get("delay"); d != "" {
		if delay, err = time.ParseDuration(d); err != nil || delay < 0 {
			http.Error(w, "delay: want a duration such as 2s or 500ms", http.StatusBadRequest)
			return
		}
	}
	var id int64
	if err := pool.QueryRow(r.Context(), "INSERT INTO submissions (payload, run_at) VALUES ($1, now() + $2::interval) RETURNING id",
		string(payload), delay.String()).Scan(&id); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, id)
}

// pending is a submission in the leader's schedule.
type pending struct {
	runAt time.Time
}

// execute is the leader's work for one term: build the schedule, then refresh it
// and run what is due until leadership ends or the node stops.
func execute(ctx context.Context, pool *pgxpool.Pool, tok election.Token) error {
	schedule := map[int64]pending{}
	var cursor time.Time // zero: the first refresh reads everything not done
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		var err error
		if cursor, err = refresh(ctx, pool, schedule, cursor); err != nil {
			return err
		}
		for id, p := range schedule {
			if time.Now().Before(p.runAt) {
				continue
			}
			if err := runOne(ctx, pool, tok, id); err != nil {
				return err // ErrFenced, or leadership lost: Lead waits for the next term
			}
			delete(schedule, id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tok.Draining():
			return nil
		case <-tick.C:
		}
	}
}

// refresh reads the submissions modified since cursor (less the overlap) into the
// schedule and returns the new cursor.
func refresh(ctx context.Context, pool *pgxpool.Pool, schedule map[int64]pending, cursor time.Time) (time.Time, error) {
	since := cursor.Add(-Overlap)
	if cursor.IsZero() {
		since = time.Time{}
	}
	rows, err := pool.Query(ctx, `SELECT id, run_at, last_modified, done_at IS NOT NULL FROM submissions
	                               WHERE last_modified > $1 AND (done_at IS NULL OR $2) ORDER BY last_modified`,
		since, !cursor.IsZero())
	if err != nil {
		return cursor, err
	}
	var id int64
	var runAt, modified time.Time
	var done bool
	_, err = pgx.ForEachRow(rows, []any{&id, &runAt, &modified, &done}, func() error {
		if done {
			delete(schedule, id)
		} else {
			schedule[id] = pending{runAt: runAt}
		}
		if modified.After(cursor) {
			cursor = modified
		}
		return nil
	})
	return cursor, err
}

// runOne executes a submission in one fenced transaction: marked done (if it is
// not done yet) and its execution recorded, under the token's epoch.
func runOne(ctx context.Context, pool *pgxpool.Pool, tok election.Token, id int64) error {
	return election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE submissions SET done_at = now(), done_epoch = $2, done_by = $3,
		                               last_modified = clock_timestamp()
		                           WHERE id = $1 AND done_at IS NULL`, id, tok.Epoch, tok.Holder)
		if err != nil || tag.RowsAffected() == 0 {
			return err // done already (an earlier term ran it)
		}
		// The work itself would go here; this example records that it ran.
		_, err = tx.Exec(ctx, "INSERT INTO executions (submission_id, epoch, node) VALUES ($1, $2, $3)", id, tok.Epoch, tok.Holder)
		return err
	})
}
