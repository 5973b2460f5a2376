package migrations_test

import (
	"context"
	"errors"
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

func connect(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
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
	conn := connect(t, cfg)
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
		if applied != migrations.Latest {
			t.Errorf("%d files applied in total by concurrent runs, want %d (each exactly once)", applied, migrations.Latest)
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

const claimSQL = `SELECT acquired, epoch FROM pgleader.try_claim($1, pgleader.lock_key($1), $2, 'host', 42, 500, 500, 1500, 2000)`

func claim(t *testing.T, c *pgx.Conn, scope, node string) (bool, int64) {
	t.Helper()
	var ok bool
	var epoch *int64
	if err := c.QueryRow(context.Background(), claimSQL, scope, node).Scan(&ok, &epoch); err != nil {
		t.Fatalf("try_claim by %s: %v", node, err)
	}
	if epoch == nil {
		return ok, 0
	}
	return ok, *epoch
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
	a, b := connect(t, cfg), connect(t, cfg)

	ok, epoch := claim(t, a, "s", "A")
	if !ok || epoch != 1 {
		t.Fatalf("first claim: acquired=%v epoch=%d, want true 1", ok, epoch)
	}

	t.Run("NonHolderCannotClaim", func(t *testing.T) {
		ok, epoch := claim(t, b, "s", "B")
		if ok || epoch != 1 {
			t.Fatalf("claim by non-holder: acquired=%v epoch=%d, want false (observing epoch 1)", ok, epoch)
		}
		// Calling claim directly, without the lock, is refused by the pg_locks check (S2).
		_, err := b.Exec(ctx, `SELECT * FROM pgleader.claim('s', pgleader.lock_key('s'), 'B', 'h', 1, 500, 500, 1500, 2000)`)
		if sqlstate(err) != "PLF02" {
			t.Fatalf("direct claim without the lock: %v, want SQLSTATE PLF02", err)
		}
		// Holding a *shared* lock on the key is not holding it either.
		if _, err := b.Exec(ctx, "SELECT pg_advisory_lock_shared(pgleader.lock_key('other'))"); err != nil {
			t.Fatal(err)
		}
		_, err = b.Exec(ctx, `SELECT * FROM pgleader.claim('other', pgleader.lock_key('other'), 'B', 'h', 1, 500, 500, 1500, 2000)`)
		if sqlstate(err) != "PLF02" {
			t.Fatalf("claim with a shared lock: %v, want PLF02", err)
		}
		var e int64
		if err := a.QueryRow(ctx, "SELECT epoch FROM pgleader.leader_state WHERE scope='s'").Scan(&e); err != nil || e != 1 {
			t.Fatalf("epoch after refused claims = %d (%v), want 1", e, err)
		}
	})

	t.Run("NonHolderCannotHeartbeat", func(t *testing.T) {
		var before time.Time
		if err := a.QueryRow(ctx, "SELECT last_heartbeat FROM pgleader.leader_state WHERE scope='s'").Scan(&before); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if err := b.QueryRow(ctx, "SELECT ok FROM pgleader.heartbeat('A', '{s}', '{1}')").Scan(&ok); err != nil {
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
		if err := a.QueryRow(ctx, "SELECT ok FROM pgleader.heartbeat('A', '{s}', '{1}')").Scan(&ok); err != nil || !ok {
			t.Fatalf("holder's heartbeat: ok=%v err=%v, want true", ok, err)
		}
		if err := a.QueryRow(ctx, "SELECT ok FROM pgleader.heartbeat('A', '{s}', '{7}')").Scan(&ok); err != nil || ok {
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
		// Hand over: A's session ends, B claims epoch 2.
		a2 := connect(t, cfg)
		closeAndWait(t, a, a2)
		if ok, e := claim(t, b, "s", "B"); !ok || e != 2 {
			t.Fatalf("B's claim after A left: acquired=%v epoch=%d, want true 2", ok, e)
		}
		if err := write(a2, 1, "A"); sqlstate(err) != "PLF01" {
			t.Fatalf("write with stale epoch 1: %v, want PLF01", err)
		}
		var reason string
		if err := b.QueryRow(ctx, "SELECT release_reason FROM pgleader.terms WHERE scope='s' AND epoch=1").Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if reason != "crashed" {
			t.Errorf("term 1 closed by successor with reason %q, want crashed (guard 42 is not held)", reason)
		}
	})

	t.Run("ClaimWaitsForFencedWriter", func(t *testing.T) {
		// B holds epoch 2. An open fenced transaction of B's term must finish before
		// a successor's bump; heartbeats must not wait for it.
		w := connect(t, cfg)
		tx, err := w.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT pgleader.fence('s', 2, 'B')"); err != nil {
			t.Fatal(err)
		}
		hbCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var ok bool
		err = b.QueryRow(hbCtx, "SELECT ok FROM pgleader.heartbeat('B', '{s}', '{2}')").Scan(&ok)
		cancel()
		if err != nil || !ok {
			t.Fatalf("heartbeat during an open fenced transaction: ok=%v err=%v (it must not block)", ok, err)
		}
		// A successor (C) gets the lock once B's session ends, but its claim must
		// wait for the fenced transaction: with lock_timeout it fails with 55P03.
		c := connect(t, cfg)
		closeAndWait(t, b, c)
		_, err = c.Exec(ctx, claimSQL, "s", "C")
		if sqlstate(err) != "55P03" {
			t.Fatalf("claim while a fenced writer holds the row: %v, want 55P03 (lock_timeout)", err)
		}
		var held bool
		if err := c.QueryRow(ctx, "SELECT pgleader.lock_held(pgleader.lock_key('s'), pg_backend_pid())").Scan(&held); err != nil || held {
			t.Fatalf("failed claim kept the advisory lock: held=%v err=%v", held, err)
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
		c := connect(t, cfg)
		if ok, e := claim(t, c, "r", "C"); !ok || e != 1 {
			t.Fatalf("claim r: %v %d", ok, e)
		}
		var ok bool
		if err := c.QueryRow(ctx, "SELECT pgleader.release('r', 1, 'C', 'resigned')").Scan(&ok); err != nil || !ok {
			t.Fatalf("release: ok=%v err=%v", ok, err)
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
		if _, err := c.Exec(ctx, "UPDATE pgleader.audit SET kind = 'x'"); err == nil {
			t.Fatal("audit accepted an UPDATE; it must be append-only")
		}
	})
}

// A fenced transaction left open by a frozen client must not block the next claim
// forever: fence bounds it with idle_in_transaction_session_timeout = the lease.
func TestFencedTransactionBoundedByLease(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	a := connect(t, cfg)
	var epoch int64
	if err := a.QueryRow(ctx, `SELECT epoch FROM pgleader.try_claim('f', pgleader.lock_key('f'), 'A', 'h', 1, 50, 100, 300, 400)`).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	w := connect(t, cfg)
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pgleader.fence('f', $1, 'A')", epoch); err != nil {
		t.Fatal(err)
	}
	// The writer goes idle in its transaction (a frozen client). The successor's
	// claim is refused only until the server ends that transaction (lease 400ms).
	b := connect(t, cfg)
	a.Close(ctx)
	began := time.Now()
	for {
		var ok bool
		err := b.QueryRow(ctx, `SELECT acquired FROM pgleader.try_claim('f', pgleader.lock_key('f'), 'B', 'h', 2, 50, 100, 300, 400)`).Scan(&ok)
		if err == nil && ok {
			break
		}
		if err != nil && sqlstate(err) != "55P03" {
			t.Fatalf("claim: %v", err)
		}
		if time.Since(began) > 10*time.Second {
			t.Fatal("claim still blocked by an idle fenced transaction after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the idle fenced transaction committed after the server should have ended it")
	}
}
