package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

// crashSplit attributes a crash failover's milliseconds (Options.Split), each
// part timed from the kill:
//
//	process     the leader's process gone: the kernel has closed its sockets
//	            (a pidfd polls readable at the process's exit)
//	<role>      each backend of the leader (leadership, guard, watch; listen in
//	            builds that had one) gone: its process exit, through a pidfd on
//	            the server's backend process. An idle backend reads the closed
//	            socket at once; one busy in a statement (the watch) only when
//	            client_connection_check_interval next looks, up to a second
//	locks       the leader's locks freed: a bare waiter on its beacon granted
//	claim       the successor's claim statement started, by the server's clock
//	            (statement_timestamp(), recorded as claim_started in the elected
//	            audit row: builds before schema 17 record none)
//	decided     the claim decided, by the server's clock (acquired_at:
//	            clock_timestamp() before its writes and commit)
//	gate        the successor's gate open (its events file)
//
// The server's timestamps are wall-clock time on the same host: a kill is placed
// on that clock by reading it and the monotonic clock together just before it.
// log_disconnections has no part here: it logs at millisecond resolution, and
// after the exiting backend has released its locks (the server's exit callbacks
// run after its shared-memory ones).
type crashSplit struct {
	samples map[string][]float64
}

// splitParts names the parts in the order they are reported, with what each is.
var splitParts = [][2]string{
	{"process", "kill -9 of the leader → its process gone (the kernel closed its sockets)"},
	{"leadership", "kill -9 → the leader's leadership backend exited"},
	{"guard", "kill -9 → the leader's guard backend exited"},
	{"listen", "kill -9 → the leader's listen backend exited (builds with a listen session)"},
	{"watch", "kill -9 → the leader's watch backend exited (busy in its wait: it sees the close at client_connection_check_interval)"},
	{"claim", "kill -9 → the successor's claim statement started (server clock)"},
	{"decided", "kill -9 → the successor's claim decided (server clock, acquired_at)"},
}

func splitName(part string) string { return "crash split: " + part }

// killMark places a kill on both clocks: the wall clock the server's timestamps
// use, and the monotonic clock of the figures.
type killMark struct {
	wall time.Time
	mono int64
}

func markNow() killMark { return killMark{wall: time.Now(), mono: monotime.Now()} }

// since returns the milliseconds from the kill at t0 (monotonic) to ts (wall).
func (m killMark) since(ts time.Time, t0 int64) float64 {
	return float64(ts.Sub(m.wall).Nanoseconds()-(t0-m.mono)) / 1e6
}

func (s *crashSplit) add(part string, ms float64) {
	if s.samples == nil {
		s.samples = map[string][]float64{}
	}
	s.samples[part] = append(s.samples[part], ms)
}

// stats returns a Stat per part that has samples.
func (s *crashSplit) stats() []Stat {
	var out []Stat
	for _, p := range splitParts {
		if xs := s.samples[p[0]]; len(xs) > 0 {
			out = append(out, summarize(splitName(p[0]), p[1], xs))
		}
	}
	return out
}

// leaderBackends returns the server pids of node's sessions by role (the
// application_name the engine gives them: "pgleader <role> <node>").
func leaderBackends(ctx context.Context, conn *pgx.Conn, node string) (map[string]int, error) {
	rows, err := conn.Query(ctx, `SELECT application_name, pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'pgleader %'`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var app string
	var pid int
	_, err = pgx.ForEachRow(rows, []any{&app, &pid}, func() error {
		f := strings.Fields(app)
		if len(f) == 3 && f[2] == node {
			out[f[1]] = pid
		}
		return nil
	})
	return out, err
}

// claimTimes reads when the claim of scope's epoch started and decided, by the
// server's clock (started is zero when the build records none).
func claimTimes(ctx context.Context, conn *pgx.Conn, scope string, epoch int64) (started, decided time.Time, err error) {
	var s *time.Time
	err = conn.QueryRow(ctx, `SELECT (a.detail->>'claim_started')::timestamptz, t.acquired_at
		FROM pgleader.terms t LEFT JOIN pgleader.audit a ON a.scope = t.scope AND a.epoch = t.epoch AND a.kind = 'elected'
		WHERE t.scope = $1 AND t.epoch = $2`, scope, epoch).Scan(&s, &decided)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("the claim of %s epoch %d: %w", scope, epoch, err)
	}
	if s != nil {
		started = *s
	}
	return started, decided, nil
}
