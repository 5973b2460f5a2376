package election_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// A primary with a streaming standby; three nodes reach them through a multi-host
// DSN with target_session_attrs=read-write. The primary crashes and the standby is
// promoted. With asynchronous replication the standby stopped receiving first, so
// the last epoch bumps (acknowledged to the nodes) are lost with the old primary;
// with synchronous replication nothing acknowledged is lost. Either way: every
// epoch granted after the promotion is above every epoch granted before it, no
// epoch is granted twice, a token from before the promotion is fenced on the new
// primary, leadership resumes by itself, and no two gates overlap.
func TestPrimaryFailover(t *testing.T) {
	pgtest.Slow(t)
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) { testPrimaryFailover(t, mode == "sync", election.ModeLock) })
	}
	// Lease mode, as behind a pooler that reconnects to the new primary (here the
	// nodes' own multi-host DSN does that): the same guarantees.
	t.Run("lease-async", func(t *testing.T) { testPrimaryFailover(t, false, election.ModeLease) })
}

func testPrimaryFailover(t *testing.T, sync bool, mode election.Mode) {
	ctx := context.Background()
	primary, standby, dsn := haPair(t, sync)

	const scope = "failover"
	rec := &recorder{}
	var nodes []*testnode.Node
	for _, id := range []string{"fo-a", "fo-b", "fo-c"} {
		c := testnode.FastConfig(dsn, id, scope)
		c.Mode = mode
		nodes = append(nodes, testnode.Start(t, c, rec.Observe))
	}
	leader := func() *testnode.Node {
		if ls := leaders(nodes, scope); len(ls) == 1 {
			return ls[0]
		}
		return nil
	}
	pgtest.WaitFor(t, "a leader", 10*time.Second, func() bool { return leader() != nil })

	// Epochs acknowledged to the nodes before the failover: the standby has them
	// all (sync), or stops receiving and misses the last ones (async).
	if !sync {
		if err := standby.StopReceiving(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// current waits for a leader with an open gate (one may blink under load) and
	// returns it with its token.
	current := func() (*testnode.Node, election.Token) {
		var l *testnode.Node
		var tok election.Token
		pgtest.WaitFor(t, "a leader with an open gate", 10*time.Second, func() bool {
			if l = leader(); l == nil {
				return false
			}
			var err error
			tok, err = l.Scope(scope).Require(ctx)
			return err == nil
		})
		return l, tok
	}
	for range 3 {
		l, tok := current()
		if mode == election.ModeLease {
			// A lease outlives its session: the leader resigns, and another claims.
			if err := l.Scope(scope).Resign(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			exec(t, primary.DSN("fo"), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pgleader leadership ' || $1`, l.NodeID())
		}
		pgtest.WaitFor(t, "a new term", 10*time.Second, func() bool {
			n := leader()
			if n == nil {
				return false
			}
			t2, err := n.Scope(scope).Require(ctx)
			return err == nil && t2.Epoch > tok.Epoch
		})
	}
	before := maxAcquired(rec, scope)
	_, stale := current()
	if err := primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	// What the standby has of the history, read before it accepts writes.
	var replicated int64
	if err := withStandby(ctx, standby, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT coalesce(max(epoch), 0) FROM pgleader.leader_state WHERE scope = $1", scope).Scan(&replicated)
	}); err != nil {
		t.Fatal(err)
	}
	switch {
	case !sync && replicated >= before:
		t.Fatalf("the standby has epoch %d, the nodes were granted up to %d: no bump was lost, the test proves nothing", replicated, before)
	case sync && replicated != before:
		t.Fatalf("synchronous standby has epoch %d, the nodes were granted %d: an acknowledged bump was lost", replicated, before)
	}
	t.Logf("granted up to epoch %d before the failover; the standby had %d", before, replicated)
	promoted := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if sync {
		// No synchronous standby is left: commits would wait for one forever.
		// Patroni's synchronous_mode (not _strict) does the same.
		if err := standby.SetPrimarySetting(ctx, "synchronous_standby_names", ""); err != nil {
			t.Fatal(err)
		}
	}

	pgtest.WaitFor(t, "a leader on the new primary", 15*time.Second, func() bool {
		n := leader()
		if n == nil {
			return false
		}
		tok, err := n.Scope(scope).Require(ctx)
		return err == nil && tok.Epoch > before
	})
	t.Logf("leadership resumed %v after pg_promote was called", time.Since(promoted).Round(time.Millisecond))

	sdsn := standby.DSN("fo")
	t.Run("EpochsAboveEveryEarlierGrant", func(t *testing.T) {
		seen := map[int64]string{}
		var last int64
		for _, e := range rec.snapshot() {
			if e.Scope != scope || e.Kind != election.EventAcquired {
				continue
			}
			if other, dup := seen[e.Epoch]; dup {
				t.Errorf("epoch %d granted twice: to %s and %s", e.Epoch, other, e.Node)
			}
			seen[e.Epoch] = e.Node
			if e.Epoch <= last {
				t.Errorf("epoch %d acquired after %d", e.Epoch, last)
			}
			last = e.Epoch
		}
		floor := queryInt(t, sdsn, "SELECT pgleader.epoch_floor()")
		if floor <= before {
			t.Errorf("floor %d of the new timeline is not above the last epoch granted before (%d)", floor, before)
		}
	})
	t.Run("FailoverRecorded", func(t *testing.T) {
		if n := queryInt(t, sdsn, "SELECT count(*) FROM pgleader.timelines WHERE timeline = pgleader.wal_timeline()"); n != 1 {
			t.Errorf("%d rows for the new timeline in pgleader.timelines, want 1", n)
		}
		if n := queryInt(t, sdsn, "SELECT count(*) FROM pgleader.audit WHERE kind = 'epoch_floor_raised'"); n != 1 {
			t.Errorf("%d epoch_floor_raised audit rows, want 1", n)
		}
	})
	t.Run("PredecessorEndedWithTheDatabase", func(t *testing.T) {
		// The term the standby had open ended with the old primary: recorded as
		// database_failover, under its own epoch (not the new timeline's floor),
		// and the successor's elected row names that epoch.
		var reason string
		var prev int64
		withConn(t, sdsn, func(ctx context.Context, c *pgx.Conn) error {
			if err := c.QueryRow(ctx, "SELECT coalesce(release_reason, '') FROM pgleader.terms WHERE scope = $1 AND epoch = $2",
				scope, replicated).Scan(&reason); err != nil {
				return err
			}
			return c.QueryRow(ctx, `SELECT (detail->>'prev_epoch')::bigint FROM pgleader.audit
			                         WHERE scope = $1 AND kind = 'elected' AND epoch > $2 ORDER BY id LIMIT 1`,
				scope, before).Scan(&prev)
		})
		if reason != "database_failover" {
			t.Errorf("term %d, open on the standby at the promotion, ended as %q, want database_failover", replicated, reason)
		}
		if prev != replicated {
			t.Errorf("the first election on the new primary names prev_epoch %d, want the predecessor's own epoch %d", prev, replicated)
		}
	})
	t.Run("TokenFromBeforeThePromotionIsFenced", func(t *testing.T) {
		withConn(t, sdsn, func(ctx context.Context, c *pgx.Conn) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if err := election.Fence(ctx, tx, stale); !errors.Is(err, election.ErrFenced) {
				t.Errorf("Fence with epoch %d from before the promotion: %v, want ErrFenced", stale.Epoch, err)
			}
			return nil
		})
	})
	t.Run("EpochBelowTheFloorRefused", func(t *testing.T) {
		withConn(t, sdsn, func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "UPDATE pgleader.leader_state SET epoch = $2 WHERE scope = $1", scope, before+1)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "PLF04" {
				t.Errorf("writing epoch %d on the new timeline: %v, want SQLSTATE PLF04", before+1, err)
			}
			return nil
		})
	})
	assertNoOverlap(t, rec, scope)
}

// haPair starts a primary with a streaming standby (synchronous when sync), a
// migrated database "fo" on both, and returns them with a multi-host DSN that
// reaches whichever accepts writes.
func haPair(t *testing.T, sync bool) (primary, standby *pgserver.Server, dsn string) {
	t.Helper()
	ctx := context.Background()
	primary = pgtest.NewServer(t)
	if sync {
		// Set with ALTER SYSTEM, as an HA manager does: the base backup carries it
		// to the standby, and it can be changed there after the promotion.
		if err := primary.SetPrimarySetting(ctx, "synchronous_standby_names", "*"); err != nil {
			t.Fatal(err)
		}
	}
	standby = pgtest.NewStandby(t, primary)
	if err := primary.CreateDatabase(ctx, "fo"); err != nil {
		t.Fatal(err)
	}
	cfg, _ := pgx.ParseConfig(primary.DSN("fo"))
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	// The new database reaches the standby by streaming.
	if err := standby.WaitReplayed(ctx, primary); err != nil {
		t.Fatal(err)
	}
	dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/fo?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())
	return primary, standby, dsn
}

func maxAcquired(r *recorder, scope string) int64 {
	var m int64
	for _, e := range r.snapshot() {
		if e.Scope == scope && e.Kind == election.EventAcquired && e.Epoch > m {
			m = e.Epoch
		}
	}
	return m
}

// withStandby runs fn on a connection to the standby, waiting until its replay has
// caught up with what it received.
func withStandby(ctx context.Context, s *pgserver.Server, fn func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, s.DSN("fo"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for range 500 {
		var caught bool
		if err := c.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= coalesce(pg_last_wal_receive_lsn(), '0/0')").Scan(&caught); err != nil {
			return err
		}
		if caught {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fn(c)
}

// A node whose DSN reaches only a standby never leads there, and says why in its log.
func TestSessionOnAStandbyRefused(t *testing.T) {
	pgtest.Slow(t)
	_, standby, _ := haPair(t, false)
	var logs syncBuffer
	c := testnode.FastConfig(standby.DSN("fo"), "on-standby", "s")
	c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	n := testnode.Start(t, c)
	pgtest.WaitFor(t, "the refusal in the log", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "is a standby (in recovery)")
	})
	if n.Leads("s") {
		t.Fatal("a node leads on a standby")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A node alone (its peers gone) leads again after every crash-restart of the
// database, each time under a higher epoch.
func TestLoneNodeSurvivesCrashRestarts(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	if err := srv.CreateDatabase(ctx, "lone"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("lone")
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	n := testnode.Start(t, testnode.FastConfig(dsn, "lone", "a", "b"))
	var last int64
	for i := range 8 {
		for _, s := range []string{"a", "b"} {
			pgtest.WaitFor(t, fmt.Sprintf("restart %d: %s led above epoch %d", i, s, last), 15*time.Second, func() bool {
				tok, err := n.Scope(s).Require(ctx)
				return err == nil && tok.Epoch > last
			})
		}
		tok, _ := n.Scope("a").Require(ctx)
		last = tok.Epoch
		if err := srv.Restart(ctx, "immediate"); err != nil {
			t.Fatal(err)
		}
	}
	// Every term but the open one ended with a restart of the database.
	for _, s := range []string{"a", "b"} {
		pgtest.WaitFor(t, s+" led after the last restart", 15*time.Second, func() bool {
			tok, err := n.Scope(s).Require(ctx)
			return err == nil && tok.Epoch > last
		})
		rows := queryStrings(t, dsn, "SELECT coalesce(release_reason, 'open') FROM pgleader.terms WHERE scope = $1 ORDER BY epoch", s)
		if len(rows) < 9 || rows[len(rows)-1] != "open" {
			t.Fatalf("scope %s: terms ended as %q, want at least 8 ended by the restarts and the open one", s, rows)
		}
		for i, r := range rows[:len(rows)-1] {
			if r != "database_failover" {
				t.Errorf("scope %s: term %d of %d ended as %q, want database_failover (the database restarted under it)", s, i+1, len(rows), r)
			}
		}
	}
}

// A fast shutdown ends the backends one by one: a node whose backends it has not
// reached yet sees its peer's lock freed, claims the scope and commits, then
// loses its own sessions with the server. The peer's term was closed as crashed
// (guard free, heartbeat recent); the claimant's ended with the database before
// its first heartbeat. The claim after the restart closes the claimant's term as
// database_failover and relabels the peer's (reproduced with kill -9 of a
// leader, its successor leading, then pg_ctl restart -m fast beside a loaded
// machine: once in 30 runs). The rows are written as that race leaves them; a
// term that did heartbeat keeps its predecessor's label.
func TestShutdownVictimRelabelled(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	if err := srv.CreateDatabase(ctx, "relabel"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("relabel")
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	// Scope "race": b's term 1 closed as crashed by a's claim of term 2 at the
	// moment it began; term 2 never heartbeated. Scope "real": the same, but
	// term 2 heartbeated once (a crash, then a restart a moment later).
	exec(t, dsn, `
		WITH s(scope, hb) AS (VALUES ('race', interval '0'), ('real', interval '200 ms')),
		     x AS (SELECT scope, hb, clock_timestamp() - interval '1 s' AS t2 FROM s),
		     st AS (INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid, acquired_at, last_heartbeat,
		                                               heartbeat_interval_ms, heartbeat_timeout_ms, trust_window_ms, session_lease_ms)
		            SELECT scope, pgleader.lock_key(scope), 2, 'a', 1, t2, t2 + hb, 100, 100, 300, 500 FROM x RETURNING 1)
		INSERT INTO pgleader.terms (scope, epoch, holder, acquired_at, released_at, release_reason, last_sign)
		SELECT scope, 1, 'b', t2 - interval '5 s', t2, 'crashed', t2 - interval '50 ms' FROM x
		UNION ALL
		SELECT scope, 2, 'a', t2, NULL, NULL, NULL FROM x`)
	if err := srv.Restart(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	n := testnode.Start(t, testnode.FastConfig(dsn, "c", "race", "real"))
	pgtest.WaitFor(t, "c leads both", 15*time.Second, func() bool { return n.Leads("race") && n.Leads("real") })
	for scope, want := range map[string][]string{
		"race": {"database_failover", "database_failover"},
		"real": {"crashed", "database_failover"},
	} {
		got := queryStrings(t, dsn, "SELECT coalesce(release_reason, 'open') FROM pgleader.terms WHERE scope = $1 AND epoch <= 2 ORDER BY epoch", scope)
		if !slices.Equal(got, want) {
			t.Errorf("scope %s: terms 1 and 2 ended as %q, want %q", scope, got, want)
		}
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'term_relabelled' AND scope = 'race' AND epoch = 1
	                           AND detail->>'from' = 'crashed' AND detail->>'by' = 'c'`); n != 1 {
		t.Errorf("%d term_relabelled rows for race's term 1, want 1", n)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'term_relabelled' AND scope = 'real'`); n != 0 {
		t.Errorf("real's term relabelled (%d rows): its successor heartbeated", n)
	}
}

// Synchronous replication, and a claim whose client gave up while its commit waited
// for the standby: PostgreSQL commits it locally anyway (it only warns), so the
// old primary holds a grant the standby never received and no node was told of.
// The standby stops receiving; the leader's session is terminated; its successor's
// claim hangs in its commit until the engine's deadline drops the session (and
// every later write of the node hangs likewise). Then the primary crashes and the
// standby is promoted: nobody ever acquired one of those locally committed epochs,
// and every epoch granted after the promotion is above all of them. (The old
// leader re-registers meanwhile. Registration commits without waiting for the
// standby since schema 10: a committing transaction that notified holds the
// database's notification lock until its commit returns, and a registration
// stuck on the standby stalled the successor's claim before its commit, about one
// run in three.)
func TestCancelledSynchronousCommit(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	primary, standby, dsn := haPair(t, true)
	const scope = "sync-cancel"
	rec := &recorder{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range rec.snapshot() {
			if e.Kind != election.EventHeartbeatOK {
				t.Logf("%d %s %s epoch=%d reason=%s err=%v", e.MonoNS, e.Node, e.Kind, e.Epoch, e.Reason, e.Err)
			}
		}
	})
	var nodes []*testnode.Node
	for _, id := range []string{"sc-a", "sc-b"} {
		c := testnode.FastConfig(dsn, id, scope)
		nodes = append(nodes, testnode.Start(t, c, rec.Observe))
	}
	var first *testnode.Node
	pgtest.WaitFor(t, "a leader", 10*time.Second, func() bool {
		ls := leaders(nodes, scope)
		if len(ls) != 1 {
			return false
		}
		first = ls[0]
		return true
	})
	acknowledged := maxAcquired(rec, scope)
	if err := standby.StopReceiving(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, primary.DSN("fo"), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pgleader leadership ' || $1`,
		first.NodeID())
	// Claims now commit locally and wait for the standby, until their client gives up.
	pgtest.WaitFor(t, "grants committed on the primary alone", 15*time.Second, func() bool {
		return queryInt(t, primary.DSN("fo"), "SELECT epoch FROM pgleader.leader_state WHERE scope = $1", scope) > acknowledged
	})
	local := queryInt(t, primary.DSN("fo"), "SELECT epoch FROM pgleader.leader_state WHERE scope = $1", scope)
	if got := maxAcquired(rec, scope); got != acknowledged {
		t.Fatalf("epoch %d acquired while no claim could be acknowledged (last acknowledged %d)", got, acknowledged)
	}
	if err := primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.SetPrimarySetting(ctx, "synchronous_standby_names", ""); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "a leader on the new primary", 15*time.Second, func() bool {
		for _, n := range leaders(nodes, scope) {
			if tok, err := n.Scope(scope).Require(ctx); err == nil && tok.Epoch > local {
				return true
			}
		}
		return false
	})
	t.Logf("acknowledged up to epoch %d; the old primary committed up to %d unacknowledged; the new primary grants above %d",
		acknowledged, local, queryInt(t, standby.DSN("fo"), "SELECT pgleader.epoch_floor()"))
	for _, e := range rec.snapshot() {
		if e.Kind == election.EventAcquired && e.Epoch > acknowledged && e.Epoch <= local {
			t.Errorf("epoch %d, committed on the old primary without acknowledgement, was acquired by %s", e.Epoch, e.Node)
		}
	}
	assertNoOverlap(t, rec, scope)
}
