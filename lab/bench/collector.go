package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
)

// CollectorResult is what CollectorSourceLatency measured.
type CollectorResult struct {
	// Source is the collector's Health.Source while it measured: live
	// (LISTEN/NOTIFY) or logical.
	Source collector.Source
	// N leadership changes; CommitToEvent[i] is the time from the moment the
	// i-th claim's commit returned to the client until the collector's Subscribe
	// channel delivered its EventElected (same process, monotonic clock).
	// EventP50 and EventP99 are its median and nearest-rank 99th percentile.
	N             int
	CommitToEvent []time.Duration
	EventP50      time.Duration
	EventP99      time.Duration
	// PollFull is the median duration of a full read (Collector.Poll while Run
	// runs: hand-off, read, checks, publication) over a database with Scopes
	// scopes and Nodes nodes; PollP99 the nearest-rank 99th percentile.
	PollFull time.Duration
	PollP99  time.Duration
	Scopes   int
	Nodes    int
}

// Sizes of the forged cluster CollectorSourceLatency reads.
const (
	forgedScopes = 100
	forgedNodes  = 300
	forgedPolls  = 30
)

// A leadership change made by SQL, as a node's session makes it: claimSQL
// claims scope $1 for node $2 (the engine's claim, one scope, no guard), and
// releaseSQL releases scope $1 at epoch $2 for node $3, on the same session.
const (
	claimSQL = `SELECT acquired, epoch FROM pgleader.claim_scopes($2, 'bench', 0, 500, 500, 1500, 2000,
	                   ARRAY[$1::text], ARRAY[pgleader.lock_key($1)])`
	releaseSQL = `SELECT ok FROM pgleader.release_batch($3, ARRAY[$1::text], ARRAY[$2::bigint], '{resigned}')`
	// registerSQL registers node $1 on the calling session for the two scopes.
	registerSQL = `SELECT pgleader.register_node($1, 'bench', 1, 'bench', '{bench-collector-a,bench-collector-b}', 500, 1500, 2000, 0, 0)`
)

// CollectorSourceLatency measures the collector on dsn, a migrated database, with
// the given source (collector.Config.Source; the logical one needs wal_level =
// logical and a role with REPLICATION, and uses a temporary slot): first n
// leadership changes made by SQL (claimSQL, then releaseSQL,
// alternating two scopes and two node ids) timed from commit to event, then the
// duration of full reads over 100 forged scopes (each held, with 10 terms) and 300
// forged nodes, which it removes afterwards. logf receives progress lines (may be
// nil).
func CollectorSourceLatency(ctx context.Context, dsn string, source collector.SourceMode, n int, logf func(string, ...any)) (CollectorResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if n < 1 {
		return CollectorResult{}, fmt.Errorf("need at least one iteration (got %d)", n)
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return CollectorResult{}, err
	}
	c, err := collector.New(collector.Config{ConnConfig: cc, Logger: discard(), Source: source})
	if err != nil {
		return CollectorResult{}, err
	}
	events, unsubscribe := c.Subscribe(4096)
	defer unsubscribe()
	runCtx, stop := context.WithCancel(ctx)
	var runErr error
	finished := make(chan struct{})
	go func() { runErr = c.Run(runCtx); close(finished) }()
	defer func() { stop(); <-finished }()
	src, err := waitLive(ctx, c, finished, &runErr)
	if err != nil {
		return CollectorResult{}, err
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return CollectorResult{}, err
	}
	defer conn.Close(context.Background())
	// Both bench nodes registered on this one session (a claim is made only by
	// the session that registered its node), for both scopes.
	for _, node := range []string{"bench-collector-node-1", "bench-collector-node-2"} {
		if _, err := conn.Exec(ctx, registerSQL, node); err != nil {
			return CollectorResult{}, fmt.Errorf("register %s: %w", node, err)
		}
	}
	res := CollectorResult{Source: src, N: n}
	for i := range n {
		scope := fmt.Sprintf("bench-collector-%c", 'a'+i%2)
		node := fmt.Sprintf("bench-collector-node-%d", i%2+1)
		var acquired bool
		var epoch int64
		err := conn.QueryRow(ctx, claimSQL,
			scope, node).Scan(&acquired, &epoch)
		committed := time.Now()
		if err != nil {
			return res, fmt.Errorf("claim %d: %w", i+1, err)
		}
		if !acquired {
			return res, fmt.Errorf("claim %d: %s is held by someone else", i+1, scope)
		}
		if _, err := awaitEvent(ctx, events, func(e collector.Event) bool {
			return e.Kind == collector.EventElected && e.Scope == scope && e.Epoch == epoch
		}); err != nil {
			return res, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		res.CommitToEvent = append(res.CommitToEvent, time.Since(committed))
		if _, err := conn.Exec(ctx, releaseSQL, scope, epoch, node); err != nil {
			return res, fmt.Errorf("release %d: %w", i+1, err)
		}
		// Let the release's own read pass, so each claim meets an idle collector.
		if _, err := awaitEvent(ctx, events, func(e collector.Event) bool {
			return e.Kind == collector.EventReleased && e.Scope == scope && e.Epoch == epoch
		}); err != nil {
			return res, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		time.Sleep(10 * time.Millisecond)
		logf("collector (%s) %d/%d: %s epoch %d, commit → event %.2f ms", src, i+1, n, scope, epoch, ms(res.CommitToEvent[i].Nanoseconds()))
	}
	res.EventP50, res.EventP99 = percentiles(slices.Clone(res.CommitToEvent))
	logf("collector (%s): commit → event over %d changes: p50 %.2f ms, p99 %.2f ms",
		src, n, ms(res.EventP50.Nanoseconds()), ms(res.EventP99.Nanoseconds()))

	locks, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer locks.Close(context.Background())
	defer unforge(conn)
	if err := forge(ctx, locks); err != nil {
		return res, fmt.Errorf("forge %d scopes and %d nodes: %w", forgedScopes, forgedNodes, err)
	}
	var durs []time.Duration
	for range forgedPolls {
		start := time.Now()
		snap, err := c.Poll(ctx)
		if err != nil {
			return res, fmt.Errorf("poll: %w", err)
		}
		durs = append(durs, time.Since(start))
		res.Scopes, res.Nodes = len(snap.Scopes), len(snap.Nodes)
	}
	res.PollFull, res.PollP99 = percentiles(durs)
	logf("collector: full read over %d scopes and %d nodes: median %.2f ms, p99 %.2f ms",
		res.Scopes, res.Nodes, ms(res.PollFull.Nanoseconds()), ms(res.PollP99.Nanoseconds()))
	return res, nil
}

// percentiles returns the median and the nearest-rank 99th percentile of ds
// (which it sorts).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(ds)
	return ds[(len(ds)-1)/2], ds[max(0, min(len(ds)-1, (99*len(ds)+99)/100-1))]
}

// waitLive waits for the collector's first read with its source of changes up
// (LISTEN or the logical stream) and returns that source. finished is closed
// when Run returned, with runErr: a logical source the database cannot serve
// ends Run at once.
func waitLive(ctx context.Context, c *collector.Collector, finished <-chan struct{}, runErr *error) (collector.Source, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := c.Snapshot(); s != nil && (s.Health.Source == collector.SourceLive || s.Health.Source == collector.SourceLogical) {
			return s.Health.Source, nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("the collector did not read with its source of changes (LISTEN or the logical stream) up within 30s")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-finished:
			return "", fmt.Errorf("the collector stopped: %v", *runErr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func awaitEvent(ctx context.Context, events <-chan collector.Event, match func(collector.Event) bool) (collector.Event, error) {
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return collector.Event{}, errors.New("collector stopped")
			}
			if match(e) {
				return e, nil
			}
		case <-timeout.C:
			return collector.Event{}, errors.New("no matching collector event within 10s")
		case <-ctx.Done():
			return collector.Event{}, ctx.Err()
		}
	}
}

// forge writes 100 held scopes with 10 terms each and 300 nodes (each a candidate
// for three scopes); conn holds the scopes' locks and 300 more advisory locks, as
// the nodes' guards would.
func forge(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`
INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, leads,
                            heartbeat_interval_ms, trust_window_ms, session_lease_ms)
SELECT 'bench-forged-node-' || i, 'bench-host-' || i %% 10, 1000 + i, 'bench',
       ARRAY['bench-forged-' || i %% %[1]d, 'bench-forged-' || (i + 1) %% %[1]d, 'bench-forged-' || (i + 2) %% %[1]d],
       CASE WHEN i < %[1]d THEN ARRAY['bench-forged-' || i] ELSE '{}' END, 500, 1500, 2000
  FROM generate_series(0, %[2]d - 1) i;
INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid, acquired_at, last_heartbeat,
                                   heartbeat_interval_ms, heartbeat_timeout_ms, trust_window_ms, session_lease_ms)
SELECT 'bench-forged-' || i, pgleader.lock_key('bench-forged-' || i), 10, 'bench-forged-node-' || i,
       pg_backend_pid(), now() - interval '1 min', now(), 500, 500, 1500, 2000
  FROM generate_series(0, %[1]d - 1) i;
INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, released_at, release_reason, handover_gap)
SELECT 'bench-forged-' || i, e, 'bench-forged-node-' || (i + e) %% %[2]d, 'bench-host', 1,
       now() - make_interval(mins => 11 - e),
       CASE WHEN e < 10 THEN now() - make_interval(mins => 10 - e) END,
       CASE WHEN e < 10 THEN 'resigned' END, interval '2 ms'
  FROM generate_series(0, %[1]d - 1) i, generate_series(1, 10) e;
SELECT count(pg_advisory_lock(pgleader.lock_key('bench-forged-' || i))) FROM generate_series(0, %[1]d - 1) i;
SELECT count(pg_advisory_lock(7000000000 + i)) FROM generate_series(0, %[2]d - 1) i;`, forgedScopes, forgedNodes))
	return err
}

// unforge removes the forged rows (best effort: the benchmark's figures are
// already taken).
func unforge(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, `
DELETE FROM pgleader.terms WHERE scope LIKE 'bench-forged-%';
DELETE FROM pgleader.leader_state WHERE scope LIKE 'bench-forged-%';
DELETE FROM pgleader.nodes WHERE node_id LIKE 'bench-forged-node-%'`)
}
