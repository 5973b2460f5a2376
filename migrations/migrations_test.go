package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations"
	"github.com/pgleader/pgleader/migrations/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup returns a migrated database's config.
func setup(t *testing.T) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestUp(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	conn := pgtest.ConnectConfig(t, cfg)
	if v, err := migrations.Version(ctx, conn); err != nil || v != 0 {
		t.Fatalf("fresh database: version %d, %v; want 0, nil", v, err)
	}

	t.Run("ConcurrentAndIdempotent", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([]migrate.Result, 6)
		errs := make([]error, 6)
		for i := range results {
			wg.Go(func() { results[i], errs[i] = migrate.Up(ctx, cfg, nil) })
		}
		wg.Wait()
		applied := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Up %d: %v", i, err)
			}
			if results[i].To != migrations.Latest {
				t.Errorf("Up %d ended at version %d, want %d", i, results[i].To, migrations.Latest)
			}
			applied += len(results[i].Applied)
		}
		// A fresh install applies every numbered file (the baseline and those after
		// it), not one per version: versions 1 to Baseline are one file.
		numbered, err := fs.Glob(migrations.FS(), "*.sql")
		if err != nil || len(numbered) < 2 {
			t.Fatalf("numbered files %v (%v)", numbered, err)
		}
		if applied != len(numbered) {
			t.Errorf("%d files applied in total by concurrent runs, want %d (each exactly once)", applied, len(numbered))
		}
		if v, err := migrations.Version(ctx, conn); err != nil || v != migrations.Latest {
			t.Fatalf("version %d, %v; want %d", v, err, migrations.Latest)
		}
	})

	t.Run("LockKeyMatchesGo", func(t *testing.T) {
		// sha256("billing") starts with 0x… ; the SQL and the bit layout must agree
		// with the documented rule (first 8 bytes, big-endian, signed).
		var key int64
		var hex string
		if err := conn.QueryRow(ctx, "SELECT pgleader.lock_key('billing'), substr(encode(sha256('billing'),'hex'),1,16)").Scan(&key, &hex); err != nil {
			t.Fatal(err)
		}
		var fromHex uint64
		for _, c := range hex {
			fromHex <<= 4
			switch {
			case c >= '0' && c <= '9':
				fromHex |= uint64(c - '0')
			default:
				fromHex |= uint64(c-'a') + 10
			}
		}
		if key != int64(fromHex) {
			t.Fatalf("lock_key = %d, first 8 bytes of sha256 = %#x", key, fromHex)
		}
	})
}

// claimSQL claims scope $1 for node $2 the way the engine does (claims.go):
// pgleader.claim_scopes, which takes the scope's advisory lock itself, without
// waiting, on the calling backend. Guard key 42 is never held by anyone, so a
// successor sees the previous holder as crashed. One scope, so one row.
const claimSQL = `SELECT acquired, busy, epoch, holder
                    FROM pgleader.claim_scopes($2, 'host', 42, 500, 500, 1500, 2000,
                                               ARRAY[$1::text], ARRAY[pgleader.lock_key($1)])`

// claimRow is the one row of claimSQL: acquired; busy (won the lock, but the
// previous term's fenced writers hold the row: lock given back); epoch (the new
// one if acquired, the one on record if held elsewhere, 0 when NULL); holder (the
// new or live holder, "" when NULL).
type claimRow struct {
	acquired, busy bool
	epoch          int64
	holder         string
}

// registerSQL registers node on the calling backend (claims are made only by
// the leadership session a node registered: caller_node), adding scope to the
// scopes it registered before, with the timing of claimSQL.
const registerSQL = `SELECT pgleader.register_node($1, 'host', 1, 'v',
                       ARRAY(SELECT DISTINCT x FROM unnest(coalesce((SELECT n.scopes FROM pgleader.nodes n WHERE n.node_id = $1), '{}') || $2::text) x),
                       500, 1500, 2000, 43, 42)
                     WHERE NOT EXISTS (SELECT 1 FROM pgleader.nodes n WHERE n.node_id = $1
                                          AND n.backend_pid = pg_backend_pid() AND $2 = ANY (n.scopes))`

// register registers node on c's backend for scope (registerSQL).
func register(t *testing.T, c *pgx.Conn, node, scope string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), registerSQL, node, scope); err != nil {
		t.Fatalf("register %s for %s: %v", node, scope, err)
	}
}

func claimScope(t *testing.T, c *pgx.Conn, scope, node string) claimRow {
	t.Helper()
	register(t, c, node, scope)
	rows, err := c.Query(context.Background(), claimSQL, scope, node)
	if err != nil {
		t.Fatalf("claim_scopes by %s: %v", node, err)
	}
	var out []claimRow
	for rows.Next() {
		var r claimRow
		var epoch *int64
		var holder *string
		if err := rows.Scan(&r.acquired, &r.busy, &epoch, &holder); err != nil {
			t.Fatalf("claim_scopes by %s: %v", node, err)
		}
		if epoch != nil {
			r.epoch = *epoch
		}
		if holder != nil {
			r.holder = *holder
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("claim_scopes by %s: %v", node, err)
	}
	if len(out) != 1 {
		t.Fatalf("claim_scopes by %s of one scope answered %d rows, want 1", node, len(out))
	}
	return out[0]
}

// claim returns whether node won scope on c, and the epoch (see claimRow). A busy
// answer fails the test: only ClaimBusyWhileFencedWriterOpen expects one.
func claim(t *testing.T, c *pgx.Conn, scope, node string) (bool, int64) {
	t.Helper()
	r := claimScope(t, c, scope, node)
	if r.busy {
		t.Fatalf("claim_scopes by %s of %s answered busy (a fenced writer holds the row)", node, scope)
	}
	return r.acquired, r.epoch
}

// heartbeatSQL renews one led scope the way the engine does (heartbeat.go):
// pgleader.node_heartbeat, following nothing. Its 'led' row says whether the
// term ($2 at epoch $3, of node $1) was renewed.
const heartbeatSQL = `SELECT ok FROM pgleader.node_heartbeat($1, ARRAY[$2::text], ARRAY[$3::bigint], '{}', '{}')
                       WHERE kind = 'led' AND scope = $2`

func heartbeat(ctx context.Context, c *pgx.Conn, node, scope string, epoch int64) (bool, error) {
	var ok bool
	err := c.QueryRow(ctx, heartbeatSQL, node, scope, epoch).Scan(&ok)
	return ok, err
}

// releaseSQL releases one term the way the engine does (releases.go).
const releaseSQL = `SELECT ok, busy FROM pgleader.release_batch($1, ARRAY[$2::text], ARRAY[$3::bigint], ARRAY[$4::text])`

func release(t *testing.T, c *pgx.Conn, node, scope string, epoch int64, reason string) (ok, busy bool, err error) {
	t.Helper()
	err = c.QueryRow(context.Background(), releaseSQL, node, scope, epoch, reason).Scan(&ok, &busy)
	return
}

// lockHeld: whether c's own backend holds scope's advisory lock exclusively.
func lockHeld(t *testing.T, c *pgx.Conn, scope string) bool {
	t.Helper()
	var held bool
	if err := c.QueryRow(context.Background(),
		"SELECT pgleader.lock_held(pgleader.lock_key($1), pg_backend_pid())", scope).Scan(&held); err != nil {
		t.Fatal(err)
	}
	return held
}

// scopeState is scope's row in leader_state: epoch, holder ("" when NULL), and
// whether its term is released.
func scopeState(t *testing.T, c *pgx.Conn, scope string) (epoch int64, holder string, released bool) {
	t.Helper()
	var h *string
	if err := c.QueryRow(context.Background(),
		"SELECT epoch, holder, released_at IS NOT NULL FROM pgleader.leader_state WHERE scope = $1", scope).Scan(&epoch, &h, &released); err != nil {
		t.Fatal(err)
	}
	if h != nil {
		holder = *h
	}
	return
}

// closeAndWait closes c and waits, watching from other, until its backend has
// exited (and so released its locks): closing a connection only asks for that.
func closeAndWait(t *testing.T, c, other *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	pid := c.PgConn().PID()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive bool
		if err := other.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still there 10s after its connection was closed", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSafetyInSQL(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	a, b := pgtest.ConnectConfig(t, cfg), pgtest.ConnectConfig(t, cfg)

	// S1: the first grant of a scope is epoch 1, and the claim leaves the lock on
	// the claiming backend.
	if r := claimScope(t, a, "s", "A"); !r.acquired || r.busy || r.epoch != 1 || r.holder != "A" {
		t.Fatalf("first claim: %+v, want acquired, epoch 1, holder A", r)
	}
	if !lockHeld(t, a, "s") {
		t.Fatal("won claim: the claiming backend does not hold the scope's advisory lock")
	}

	t.Run("NonHolderCannotClaim", func(t *testing.T) {
		// S2. The version-1 test also called pgleader.claim directly, without the
		// lock, and expected PLF02. claim_scopes has no such entry point: it takes
		// the lock itself (pg_try_advisory_lock on the calling backend), so a claim
		// is only ever made under the lock, by construction. The property left to
		// check is that a second session's claim, while the first holds the lock,
		// is refused without waiting, names the live holder and the epoch on
		// record, takes no lock, and changes nothing.
		r := claimScope(t, b, "s", "B")
		if r.acquired || r.busy || r.epoch != 1 || r.holder != "A" {
			t.Fatalf("claim by non-holder: %+v, want not acquired, not busy, observing epoch 1 held by A", r)
		}
		if lockHeld(t, b, "s") {
			t.Fatal("refused claim left the scope's advisory lock on the refused backend")
		}
		if e, h, rel := scopeState(t, a, "s"); e != 1 || h != "A" || rel {
			t.Fatalf("after a refused claim: epoch %d holder %q released %v, want 1 A false", e, h, rel)
		}
		var terms int
		if err := a.QueryRow(ctx, "SELECT count(*) FROM pgleader.terms WHERE scope = 's'").Scan(&terms); err != nil || terms != 1 {
			t.Fatalf("%d terms of s after a refused claim (%v), want 1", terms, err)
		}
	})

	t.Run("SharedLockIsNotHolding", func(t *testing.T) {
		// S2 with a *shared* lock. The version-1 test claimed with only a shared
		// lock on the key and expected PLF02; claim_scopes cannot be called that
		// way (see above). The current functions' equivalent: a backend that holds
		// the scope's key only shared — here B won "other", then traded its
		// exclusive lock for a shared one — is not its holder: node_heartbeat does
		// not renew the term (it looks for an exclusive lock of this backend), and
		// release_batch refuses with PLF02, closing nothing.
		if ok, e := claim(t, b, "other", "B"); !ok || e != 1 {
			t.Fatalf("claim other: acquired=%v epoch=%d, want true 1", ok, e)
		}
		if _, err := b.Exec(ctx, "SELECT pg_advisory_lock_shared(pgleader.lock_key('other')), pg_advisory_unlock(pgleader.lock_key('other'))"); err != nil {
			t.Fatal(err)
		}
		if lockHeld(t, b, "other") {
			t.Fatal("setup: B still holds other's lock exclusively")
		}
		ok, err := heartbeat(ctx, b, "B", "other", 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatal("heartbeat from a backend holding the key only shared was accepted")
		}
		if _, _, err := release(t, b, "B", "other", 1, "resigned"); sqlstate(err) != "PLF02" {
			t.Fatalf("release with only a shared lock: %v, want PLF02", err)
		}
		if e, h, rel := scopeState(t, a, "other"); e != 1 || h != "B" || rel {
			t.Fatalf("after the refused release: epoch %d holder %q released %v, want 1 B false (rolled back)", e, h, rel)
		}
		if _, err := b.Exec(ctx, "SELECT pg_advisory_unlock_shared(pgleader.lock_key('other'))"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NonHolderCannotHeartbeat", func(t *testing.T) {
		// S2: node_heartbeat renews a term only for the backend holding its lock,
		// whatever node name it passes.
		var before time.Time
		if err := a.QueryRow(ctx, "SELECT last_heartbeat FROM pgleader.leader_state WHERE scope='s'").Scan(&before); err != nil {
			t.Fatal(err)
		}
		ok, err := heartbeat(ctx, b, "A", "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatal("heartbeat from a session without the lock was accepted")
		}
		var after time.Time
		if err := a.QueryRow(ctx, "SELECT last_heartbeat FROM pgleader.leader_state WHERE scope='s'").Scan(&after); err != nil {
			t.Fatal(err)
		}
		if !after.Equal(before) {
			t.Fatalf("refused heartbeat still wrote last_heartbeat: %v → %v", before, after)
		}
		if ok, err := heartbeat(ctx, a, "A", "s", 1); err != nil || !ok {
			t.Fatalf("holder's heartbeat: ok=%v err=%v, want true", ok, err)
		}
		if err := a.QueryRow(ctx, "SELECT last_heartbeat FROM pgleader.leader_state WHERE scope='s'").Scan(&after); err != nil {
			t.Fatal(err)
		}
		if !after.After(before) {
			t.Fatalf("holder's heartbeat did not advance last_heartbeat: %v → %v", before, after)
		}
		if ok, err := heartbeat(ctx, a, "A", "s", 7); err != nil || ok {
			t.Fatalf("holder's heartbeat with a wrong epoch: ok=%v err=%v, want false", ok, err)
		}
	})

	t.Run("StaleEpochCannotWrite", func(t *testing.T) {
		write := func(c *pgx.Conn, epoch int64, holder string) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT pgleader.fence('s', $1, $2)", epoch, holder); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO pgleader.demo_actions (scope, epoch, node_id) VALUES ('s', $1, $2)", epoch, holder); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		if err := write(a, 1, "A"); err != nil {
			t.Fatalf("current holder's write: %v", err)
		}
		if err := write(b, 1, "B"); sqlstate(err) != "PLF01" {
			t.Fatalf("write with the right epoch but another holder: %v, want PLF01", err)
		}
		// Hand over: A's session ends, B claims epoch 2 (S1: one more).
		a2 := pgtest.ConnectConfig(t, cfg)
		closeAndWait(t, a, a2)
		if ok, e := claim(t, b, "s", "B"); !ok || e != 2 {
			t.Fatalf("B's claim after A left: acquired=%v epoch=%d, want true 2", ok, e)
		}
		if err := write(a2, 1, "A"); sqlstate(err) != "PLF01" {
			t.Fatalf("write with stale epoch 1: %v, want PLF01", err)
		}
		if err := write(b, 2, "B"); err != nil {
			t.Fatalf("new holder's write at epoch 2: %v", err)
		}
		var reason string
		if err := b.QueryRow(ctx, "SELECT release_reason FROM pgleader.terms WHERE scope='s' AND epoch=1").Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if reason != "crashed" {
			t.Errorf("term 1 closed by successor with reason %q, want crashed (guard 42 is not held)", reason)
		}
	})

	t.Run("ClaimBusyWhileFencedWriterOpen", func(t *testing.T) {
		// S3. B holds epoch 2. An open fenced transaction of B's term must finish
		// before a successor's bump; heartbeats must not wait for it. (Version 1's
		// claim waited for the row, and the test saw its lock_timeout, 55P03.
		// claim_scopes never waits: it answers busy = true and gives the lock
		// back, for the caller to retry; the bump is still impossible meanwhile.)
		w := pgtest.ConnectConfig(t, cfg)
		tx, err := w.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SELECT pgleader.fence('s', 2, 'B')"); err != nil {
			t.Fatal(err)
		}
		hbCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := heartbeat(hbCtx, b, "B", "s", 2)
		cancel()
		if err != nil || !ok {
			t.Fatalf("heartbeat during an open fenced transaction: ok=%v err=%v (it must not block)", ok, err)
		}
		// Nor can the holder end its own term under its open fenced writer:
		// release_batch answers busy and keeps the term and the lock.
		if ok, busy, err := release(t, b, "B", "s", 2, "resigned"); err != nil || ok || !busy {
			t.Fatalf("release during an open fenced transaction: ok=%v busy=%v err=%v, want false true nil", ok, busy, err)
		}
		if !lockHeld(t, b, "s") {
			t.Fatal("busy release gave the lock back while its term stays open")
		}
		// A successor (C) gets the lock once B's session ends, but its claim must
		// not bump past the fenced transaction: it answers busy, lock given back.
		c := pgtest.ConnectConfig(t, cfg)
		closeAndWait(t, b, c)
		if r := claimScope(t, c, "s", "C"); r.acquired || !r.busy {
			t.Fatalf("claim while a fenced writer holds the row: %+v, want not acquired, busy", r)
		}
		if lockHeld(t, c, "s") {
			t.Fatal("busy claim kept the advisory lock")
		}
		if e, h, rel := scopeState(t, c, "s"); e != 2 || h != "B" || rel {
			t.Fatalf("after the busy claim: epoch %d holder %q released %v, want 2 B false", e, h, rel)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO pgleader.demo_actions (scope, epoch, node_id) VALUES ('s', 2, 'B')"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("fenced write that started before any bump: %v", err)
		}
		if ok, e := claim(t, c, "s", "C"); !ok || e != 3 {
			t.Fatalf("claim after the writer committed: acquired=%v epoch=%d, want true 3", ok, e)
		}
	})

	t.Run("Release", func(t *testing.T) {
		c, d := pgtest.ConnectConfig(t, cfg), pgtest.ConnectConfig(t, cfg)
		if ok, e := claim(t, c, "r", "C"); !ok || e != 1 {
			t.Fatalf("claim r: %v %d", ok, e)
		}
		// S2: a session without the lock cannot release the term, even naming its
		// holder and epoch: release_batch proves its caller is the backend that
		// registered the node (PLF12), and checks the holder's backend.
		if ok, busy, err := release(t, d, "C", "r", 1, "resigned"); sqlstate(err) != "PLF12" || ok || busy {
			t.Fatalf("release from a session that did not register C: ok=%v busy=%v err=%v, want PLF12", ok, busy, err)
		}
		register(t, d, "D", "r")
		if ok, busy, err := release(t, d, "D", "r", 1, "resigned"); err != nil || ok || busy {
			t.Fatalf("release by another node, of C's term: ok=%v busy=%v err=%v, want false false nil", ok, busy, err)
		}
		if e, h, rel := scopeState(t, c, "r"); e != 1 || h != "C" || rel || !lockHeld(t, c, "r") {
			t.Fatalf("after a refused release: epoch %d holder %q released %v; want 1 C false, lock still C's", e, h, rel)
		}
		if ok, busy, err := release(t, c, "C", "r", 1, "resigned"); err != nil || !ok || busy {
			t.Fatalf("release: ok=%v busy=%v err=%v, want true false nil", ok, busy, err)
		}
		var held bool
		if err := c.QueryRow(ctx, "SELECT pgleader.lock_held(pgleader.lock_key('r'), NULL)").Scan(&held); err != nil || held {
			t.Fatalf("lock still held after release: %v %v", held, err)
		}
		var reason string
		if err := c.QueryRow(ctx, "SELECT release_reason FROM pgleader.terms WHERE scope='r' AND epoch=1").Scan(&reason); err != nil || reason != "resigned" {
			t.Fatalf("term reason %q (%v), want resigned", reason, err)
		}
		if _, err := c.Exec(ctx, "SELECT pgleader.fence('r', 1, 'C')"); sqlstate(err) != "PLF01" {
			t.Fatalf("fence after release: %v, want PLF01", err)
		}
		// S1 across a release: the next grant is epoch 2.
		if ok, e := claim(t, d, "r", "D"); !ok || e != 2 {
			t.Fatalf("claim after release: acquired=%v epoch=%d, want true 2", ok, e)
		}
		if _, err := c.Exec(ctx, "UPDATE pgleader.audit SET kind = 'x'"); err == nil {
			t.Fatal("audit accepted an UPDATE; it must be append-only")
		}
	})
}

// A fenced transaction left open by a frozen client must not block the next claim
// forever: fence bounds it with idle_in_transaction_session_timeout = the lease.
// (claim_scopes answers busy, not an error, while the transaction lasts.)
func TestFencedTransactionBoundedByLease(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	a := pgtest.ConnectConfig(t, cfg)
	const claimF = `SELECT acquired, busy, epoch FROM pgleader.claim_scopes($1, 'h', $2, 50, 100, 300, 400, '{f}', ARRAY[pgleader.lock_key('f')])`
	var ok, busy bool
	var epoch *int64
	register(t, a, "A", "f")
	if err := a.QueryRow(ctx, claimF, "A", 1).Scan(&ok, &busy, &epoch); err != nil || !ok || epoch == nil || *epoch != 1 {
		t.Fatalf("A's claim: acquired=%v epoch=%v err=%v, want true 1", ok, epoch, err)
	}
	w := pgtest.ConnectConfig(t, cfg)
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pgleader.fence('f', $1, 'A')", *epoch); err != nil {
		t.Fatal(err)
	}
	// The writer goes idle in its transaction (a frozen client). The successor's
	// claim is refused only until the server ends that transaction (lease 400ms).
	b := pgtest.ConnectConfig(t, cfg)
	register(t, b, "B", "f")
	a.Close(ctx)
	began := time.Now()
	for {
		if err := b.QueryRow(ctx, claimF, "B", 2).Scan(&ok, &busy, &epoch); err != nil {
			t.Fatalf("claim: %v", err)
		}
		if ok {
			break
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("claim still refused (busy=%v) by an idle fenced transaction after 10s", busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if epoch == nil || *epoch != 2 {
		t.Fatalf("B's claim won epoch %v, want 2", epoch)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the idle fenced transaction committed after the server should have ended it")
	}
}
