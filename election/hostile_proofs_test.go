package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/protocol"
)

// Probes of a hostile neighbour against the SECURITY DEFINER functions: each
// function proves who calls it before it acts (docs/security.md, "Privileges,
// function by function"). Every probe below worked against schema 15.

// registerSQL registers node on the calling backend for scopes with the timing of
// testnode.FastConfig (I 50 ms, W 300 ms, L 500 ms); guard and beacon keys are not held.
const registerSQL = `SELECT pgleader.register_node($1, 'h', 1, 'v', $2, 50, 300, 500, 1, 2)`

// claimOneSQL claims one scope for node $1 on the calling backend, guard 1.
const claimOneSQL = `SELECT acquired, busy FROM pgleader.claim_scopes($1, 'h', 1, 50, 100, 300, 500, ARRAY[$2::text], ARRAY[pgleader.lock_key($2)])`

// alive reports whether backend pid is still connected.
func alive(t *testing.T, dsn string, pid uint32) bool {
	t.Helper()
	return queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 1
}

// fencedTx opens a transaction on a new connection as dsn's role, fences it for
// scope at epoch, and returns the connection (its transaction left open, idle,
// without a time limit).
func fencedTx(t *testing.T, dsn, scope string, epoch int64) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c := pgtest.Connect(t, dsn)
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, fenceSQL, scope, epoch, nil); err != nil {
		t.Fatalf("fence %s at %d: %v", scope, epoch, err)
	}
	// A client may lift the fence's idle limit (protocol.md §9): this one stays
	// open, idle, for as long as the test needs it.
	if _, err := c.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	return c
}

// The first finding: a node login planted a release-11 warm-up row under
// a key of its choice and had end_fenced terminate every holder of the derived
// fence key — another service's live fenced transaction and an unrelated
// application's session — unaudited after a rollback. Now the planted row is
// refused, and end_fenced acts only for the registered candidate of the scope.
func TestHostileEndFencedProves(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('prefix', 'svc-a/', ARRAY[$1])`, prefix+"_node")

	// Service A leads svc-a/live; its application holds a fenced transaction of
	// the live term.
	a := testnode.Start(t, testnode.FastConfig(as("node"), "svc-a-1", "svc-a/live"))
	pgtest.WaitFor(t, "svc-a leading", 10*time.Second, func() bool { return a.Leads("svc-a/live") })
	tok, err := a.Scope("svc-a/live").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := fencedTx(t, as("app"), "svc-a/live", tok.Epoch)
	// An unrelated application's session holds a two-int advisory key.
	other, err := pgx.Connect(ctx, as("squat"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock_shared(12345, 678)`); err != nil {
		t.Fatal(err)
	}

	attacker := as("node2")
	withConn(t, attacker, func(ctx context.Context, c *pgx.Conn) error {
		// A warm-up row named after the key whose fence key is (12345, 678).
		key := int64(12345)<<32 | 678
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, `SELECT * FROM pgleader.claim_batch('any', 'h', 1, 50, 100, 300, 500, $1, $2)`,
			[]string{fmt.Sprintf("pgleader-warmup-%016x", key)}, []int64{key})
		if code := sqlstate(err); code != "PLF12" && code != "PLF03" {
			t.Errorf("a warm-up row under a chosen key: got %v, want PLF12 or PLF03", err)
		}
		_ = tx.Rollback(ctx)
		// end_fenced naming a node it is not, and a scope of another service.
		for _, q := range []string{`SELECT * FROM pgleader.end_fenced('svc-a-1', $1)`, `SELECT * FROM pgleader.end_fenced('svc-a-1', NULL, $1)`} {
			if _, err := c.Exec(ctx, q, "svc-a/live"); sqlstate(err) != "PLF12" {
				t.Errorf("%s as another login: got %v, want SQLSTATE PLF12", q, err)
			}
		}
		// Registered as itself, for a scope of its own: still not a candidate of
		// svc-a/live (and it may not register for it: the binding).
		if _, err := c.Exec(ctx, registerSQL, "att", []string{"att"}); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.end_fenced('att', NULL, $1)`, "svc-a/live"); sqlstate(err) != "PLF12" {
			t.Errorf("end_fenced of another service's scope by a registered node: got %v, want SQLSTATE PLF12", err)
		}
		if _, err := c.Exec(ctx, registerSQL, "att", []string{"svc-a/live"}); sqlstate(err) != "PLF10" {
			t.Errorf("registering for another service's bound scope: got %v, want SQLSTATE PLF10", err)
		}
		return nil
	})
	if !alive(t, dsn, live.PgConn().PID()) || !alive(t, dsn, other.PgConn().PID()) {
		t.Fatal("a session the attacker aimed at was terminated")
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind LIKE 'fenced_tx_%'`); n != 0 {
		t.Errorf("%d fenced_tx audit rows after refused calls, want 0", n)
	}
	if _, err := live.Exec(ctx, "COMMIT"); err != nil {
		t.Errorf("the live term's fenced transaction could not commit: %v", err)
	}
}

// end_fenced ends only fenced transactions of an ended term (row lock and fence
// key), never a session that merely holds the fence key; a termination follows
// an audit row that committed before it (a rollback takes back neither); a
// fenced transaction cannot be hidden behind an exclusive fence key.
func TestHostileEndFencedOnlyFencers(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	const scope = "ended"

	lead, err := pgx.Connect(ctx, as("node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Exec(ctx, registerSQL, "old", []string{scope}); err != nil {
		t.Fatal(err)
	}
	var won, busy bool
	if err := lead.QueryRow(ctx, claimOneSQL, "old", scope).Scan(&won, &busy); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	victim := fencedTx(t, as("app"), scope, 1)
	// A session that holds only the fence key (any role may, without the
	// hardening): it blocks nothing and is nobody's fenced transaction.
	key := protocol.LockKey(scope)
	keyOnly, err := pgx.Connect(ctx, as("squat"))
	if err != nil {
		t.Fatal(err)
	}
	defer keyOnly.Close(ctx)
	if _, err := keyOnly.Exec(ctx, `SELECT pg_advisory_lock_shared($1::int, $2::int)`, (key>>32)&0x7fffffff, key&0x7fffffff); err != nil {
		t.Fatal(err)
	}
	lead.Close(ctx) // the term ends with its session; its fenced transaction stays

	succ, err := pgx.Connect(ctx, as("node2"))
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Close(ctx)
	if _, err := succ.Exec(ctx, registerSQL, "new", []string{scope}); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "the claim finding the row busy", 5*time.Second, func() bool {
		if err := succ.QueryRow(ctx, claimOneSQL, "new", scope).Scan(&won, &busy); err != nil {
			t.Fatal(err)
		}
		return busy
	})
	// Before a trust window of busy claims: refused.
	if _, err := succ.Exec(ctx, `SELECT * FROM pgleader.end_fenced('new', NULL, $1)`, scope); sqlstate(err) != "PLF07" {
		t.Errorf("end_fenced before the claim was busy for the trust window: got %v, want PLF07", err)
	}
	time.Sleep(400 * time.Millisecond) // the trust window (300 ms) of busy claims

	states := func(q pgx.Tx) []string {
		var rows pgx.Rows
		var err error
		if q != nil {
			rows, err = q.Query(ctx, `SELECT pid, state FROM pgleader.end_fenced('new', NULL, $1)`, scope)
		} else {
			rows, err = succ.Query(ctx, `SELECT pid, state FROM pgleader.end_fenced('new', NULL, $1)`, scope)
		}
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var pid *int32
			var st string
			if err := rows.Scan(&pid, &st); err != nil {
				t.Fatal(err)
			}
			if pid == nil || uint32(*pid) != victim.PgConn().PID() {
				t.Errorf("end_fenced named pid %v, not the fenced transaction's %d", pid, victim.PgConn().PID())
			}
			out = append(out, st)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	// Inside a transaction that rolls back: found, nothing ended, nothing left.
	tx, err := succ.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := states(tx); strings.Join(got, ",") != "found" {
		t.Errorf("end_fenced in a transaction: %v, want [found]", got)
	}
	if got := states(tx); strings.Join(got, ",") != "found" {
		t.Errorf("end_fenced again in the same transaction: %v, want [found] (its own audit row is no proof)", got)
	}
	_ = tx.Rollback(ctx)
	if !alive(t, dsn, victim.PgConn().PID()) {
		t.Fatal("a termination happened inside a transaction that rolled back")
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind LIKE 'fenced_tx_%'`); n != 0 {
		t.Errorf("%d fenced_tx rows after a rollback, want 0", n)
	}
	// Autocommit: found (committed), then ended.
	if got := states(nil); strings.Join(got, ",") != "found" {
		t.Errorf("first end_fenced: %v, want [found]", got)
	}
	if got := states(nil); strings.Join(got, ",") != "ended" {
		t.Errorf("second end_fenced: %v, want [ended]", got)
	}
	pgtest.WaitFor(t, "the fenced transaction's backend gone", 5*time.Second, func() bool { return !alive(t, dsn, victim.PgConn().PID()) })
	if !alive(t, dsn, keyOnly.PgConn().PID()) {
		t.Error("a session holding only the fence key was terminated")
	}
	if err := succ.QueryRow(ctx, claimOneSQL, "new", scope).Scan(&won, &busy); err != nil || !won {
		t.Errorf("the successor's claim after the fenced transaction ended: acquired %v, %v", won, err)
	}

	// The fence key held exclusively: fence refuses (PLF13) and names the
	// session, rather than fence a transaction end_fenced could not find.
	if _, err := keyOnly.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	if _, err := keyOnly.Exec(ctx, `SELECT pg_advisory_lock($1::int, $2::int)`, (key>>32)&0x7fffffff, key&0x7fffffff); err != nil {
		t.Fatal(err)
	}
	withConn(t, as("app"), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, fenceSQL, scope, 2, nil)
		if sqlstate(err) != "PLF13" || !strings.Contains(err.Error(), fmt.Sprint(keyOnly.PgConn().PID())) {
			t.Errorf("fence behind an exclusive fence key: got %v, want SQLSTATE PLF13 naming pid %d", err, keyOnly.PgConn().PID())
		}
		return nil
	})
}

// A fenced transaction cannot be prepared where the server allows prepared
// transactions: a prepared one has no backend to end, and held up a failover
// without bound.
func TestHostileFencedTxNotPrepared(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t, pgserver.Options{Settings: map[string]string{"max_prepared_transactions": "5"}})
	dsn := srv.DSN("postgres")
	pgtest.Migrate(t, dsn)
	_, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "p-1", "prep"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("prep") })
	tok, err := a.Scope("prep").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := fencedTx(t, as("app"), "prep", tok.Epoch)
	_, err = c.Exec(ctx, `PREPARE TRANSACTION 'fenced'`)
	if err == nil || !strings.Contains(err.Error(), "temporary") {
		t.Errorf("PREPARE TRANSACTION of a fenced transaction: got %v, want a refusal (temporary objects)", err)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pg_prepared_xacts`); n != 0 {
		t.Errorf("%d prepared transactions, want 0", n)
	}
	// An unfenced transaction still prepares (the server's feature is untouched).
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `BEGIN; SELECT 1; PREPARE TRANSACTION 'plain'`); err != nil {
			return err
		}
		_, err := c.Exec(ctx, `ROLLBACK PREPARED 'plain'`)
		return err
	})
}

// A node login of another service cannot probe a bound scope's epochs through
// fence (PLF10); the scope's own nodes and plain application roles fence as
// before.
func TestHostileFenceBoundScope(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('scope', 'billing', ARRAY[$1])`, prefix+"_node")
	a := testnode.Start(t, testnode.FastConfig(as("node"), "b-1", "billing"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("billing") })
	tok, err := a.Scope("billing").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= tok.Epoch+1; i++ {
		refused(t, as("node2"), "PLF10", fenceSQL, "billing", i, nil)
	}
	fencedTx(t, as("app"), "billing", tok.Epoch).Close(ctx)
	fencedTx(t, as("node"), "billing", tok.Epoch).Close(ctx)
}

// The run ledger is written only by the login of the term's holder: another node
// login, knowing the epoch, can neither pre-complete a period, rewrite a run,
// nor hold a run row.
func TestHostileRunLedger(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "job-a", "nightly"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("nightly") })
	tok, err := a.Scope("nightly").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const begin = `SELECT run_key FROM pgleader.run_begin($1, $2, interval '24 hours', $3)`
	const end = `SELECT pgleader.run_end($1, $2, $3, $4)`
	// Another login, with the current epoch, in a transaction it keeps open.
	intruder, err := pgx.Connect(ctx, as("node2"))
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close(ctx)
	itx, err := intruder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	if err := itx.QueryRow(ctx, begin, "nightly", tok.Epoch, "k1").Scan(&key); sqlstate(err) != "PLF12" {
		t.Errorf("run_begin by another login: got %v, want SQLSTATE PLF12", err)
	}
	_ = itx.Rollback(ctx)
	refused(t, as("node2"), "PLF12", end, "nightly", tok.Epoch, "k1", 1)
	refused(t, as("app"), "42501", end, "nightly", tok.Epoch, "k1", 1)
	// The holder's login records its run, and is not held up.
	withConn(t, as("node"), func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "SET statement_timeout = '5s'"); err != nil {
			return err
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fenceSQL, "nightly", tok.Epoch, nil); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, begin, "nightly", tok.Epoch, "k1").Scan(&key); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, end, "nightly", tok.Epoch, "k1", 0); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.runs WHERE scope = 'nightly' AND exit_code = 0 AND holder = 'job-a'`); n != 1 {
		t.Errorf("%d completed runs by job-a, want 1", n)
	}
	refused(t, as("node2"), "PLF12", end, "nightly", tok.Epoch, "k1", 1)
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.runs WHERE scope = 'nightly' AND exit_code = 0`); n != 1 {
		t.Errorf("a completed run was rewritten: %d runs with exit 0, want 1", n)
	}
}

// term_child_exit: only the login of the term's holder records how its child
// ended, only while the term is current, and only a code 0–255 with cause exit
// or signal; the audit keeps the first 100 of a term.
func TestHostileTermChildExit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "job-a", "nightly"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("nightly") })
	tok, err := a.Scope("nightly").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const rec = `SELECT pgleader.term_child_exit($1, $2, $3, $4)`
	refused(t, as("node2"), "PLF12", rec, "nightly", tok.Epoch, 3, "exit")
	refused(t, as("app"), "42501", rec, "nightly", tok.Epoch, 3, "exit")
	refused(t, as("node"), "PLF12", rec, "nightly", tok.Epoch+1, 3, "exit") // not the current term
	for _, bad := range []struct {
		code  any
		cause any
	}{{-1, "exit"}, {256, "exit"}, {3, "oops"}, {nil, "exit"}, {3, nil}} {
		refused(t, as("node"), "PLF11", rec, "nightly", tok.Epoch, bad.code, bad.cause)
	}
	if n := queryInt(t, dsn, `SELECT child_exits FROM pgleader.terms WHERE scope = 'nightly' AND epoch = $1`, tok.Epoch); n != 0 {
		t.Fatalf("refused calls recorded %d exits", n)
	}
	withConn(t, as("node"), func(ctx context.Context, c *pgx.Conn) error {
		for i := range 102 {
			if _, err := c.Exec(ctx, rec, "nightly", tok.Epoch, i%2, "exit"); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, rec, "nightly", tok.Epoch, 139, "signal")
		return err
	})
	if got := queryInt(t, dsn, `SELECT child_exits * 1000 + child_exit_code FROM pgleader.terms
	                             WHERE scope = 'nightly' AND epoch = $1 AND child_exit_cause = 'signal'`, tok.Epoch); got != 103139 {
		t.Errorf("terms row: exits*1000+code = %d, want 103139", got)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'child_exited' AND scope = 'nightly'`); n != 100 {
		t.Errorf("%d child_exited audit rows, want the first 100", n)
	}
}

// session_lock takes a guard or a beacon, two a session at most, and never the
// key of a scope anyone knows: under the hardening a node login cannot fill the
// server's lock table or squat a scope through it.
func TestHostileSessionLockBounded(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	revokeAdvisoryLocks(t, dsn)
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('scope', 'bound-never-claimed', ARRAY[$1])`, prefix+"_node")
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, registerSQL, "reg", []string{"registered-never-claimed"}); err != nil {
			return err
		}
		return nil
	})
	c, err := pgx.Connect(ctx, as("node"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, scope := range []string{"bound-never-claimed", "registered-never-claimed"} {
		if _, err := c.Exec(ctx, `SELECT pgleader.session_lock(pgleader.lock_key($1))`, scope); sqlstate(err) != "PLF05" {
			t.Errorf("session_lock on the key of %s: got %v, want SQLSTATE PLF05", scope, err)
		}
	}
	taken := 0
	var last error
	for k := int64(1); k <= 20000; k++ {
		if _, last = c.Exec(ctx, `SELECT pgleader.session_lock($1)`, 7_000_000+k); last != nil {
			break
		}
		taken++
	}
	if taken != 2 || sqlstate(last) != "PLF14" {
		t.Errorf("session_lock took %d keys on one session, then %v; want 2, then SQLSTATE PLF14", taken, last)
	}
	// The server still takes connections and locks.
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pgleader.session_lock(4711)`)
		return err
	})
}

// Every timing argument is bounded in SQL (PLF11): no value a node registers
// makes a successor wait longer than the maximum session lease; a wait for a
// predecessor ends at SIGTERM.
func TestHostileTimingBounds(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	node := as("node")
	for _, q := range []string{
		`SELECT pgleader.register_node('t', 'h', 1, 'v', '{s}', 50, 2147483647, 2147483647, 1, 2)`,
		`SELECT pgleader.register_node('t', 'h', 1, 'v', '{s}', 50, 300, 700000, 1, 2)`,
		`SELECT pgleader.register_node('t', 'h', 1, 'v', '{s}', 500, 300, 500, 1, 2)`,
		`SELECT pgleader.register_node('t', 'h', 1, 'v', '{s}', 50, 300, 500, 1, 2, 1, 2147483647)`,
		`SELECT pgleader.lease_register('t', 'h', 1, 'v', '{s}', 50, 2147483647, 2147483647, 7, 1, 0)`,
		`SELECT pgleader.await_release(1, 0)`,
		`SELECT pgleader.await_release(1, 70000)`,
	} {
		refused(t, node, "PLF11", q)
	}
	withConn(t, node, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, registerSQL, "t", []string{"s"}); err != nil {
			return err
		}
		_, err := c.Exec(ctx, `SELECT * FROM pgleader.claim_scopes('t', 'h', 1, 50, 100, 2147483647, 2147483647, '{s}', ARRAY[pgleader.lock_key('s')])`)
		if sqlstate(err) != "PLF11" {
			t.Errorf("a claim with a trust window of 2^31-1 ms: got %v, want SQLSTATE PLF11", err)
		}
		return nil
	})
	cfg := testnode.FastConfig(node, "long", "s")
	cfg.TrustWindow, cfg.SessionLease = 10*time.Minute, 11*time.Minute
	var ce *election.ConfigError
	if _, err := election.New(cfg); !errors.As(err, &ce) || ce.Field != "SessionLease" {
		t.Errorf("a session lease of 11m: New returned %v, want a ConfigError on SessionLease", err)
	}

	// The longest a predecessor may make a successor wait (its trust window,
	// just under the maximum lease) — and the wait ends at SIGTERM.
	guard, err := pgx.Connect(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close(ctx)
	if _, err := guard.Exec(ctx, `SELECT pgleader.session_lock(99)`); err != nil {
		t.Fatal(err)
	}
	lead, err := pgx.Connect(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Exec(ctx, `SELECT pgleader.register_node('slow', 'h', 1, 'v', '{w}', 50, 590000, 600000, 98, 99)`); err != nil {
		t.Fatal(err)
	}
	var won bool
	if err := lead.QueryRow(ctx, `SELECT acquired FROM pgleader.claim_scopes('slow', 'h', 99, 50, 100, 590000, 600000, '{w}', ARRAY[pgleader.lock_key('w')])`).Scan(&won); err != nil || !won {
		t.Fatalf("the slow predecessor's claim: %v %v", won, err)
	}
	lead.Close(ctx) // its leadership session ends; its guard lives on
	succ := testnode.Start(t, testnode.FastConfig(node, "succ", "w"))
	pgtest.WaitFor(t, "the successor's claim waiting for the predecessor's guard", 10*time.Second, func() bool {
		return queryInt(t, dsn, `SELECT count(*) FROM pgleader.leader_state WHERE scope = 'w' AND holder = 'succ'`) == 1
	})
	if succ.Leads("w") {
		t.Fatal("the successor opened its gate while the predecessor's guard is held")
	}
	stopped := make(chan struct{})
	go func() { succ.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of SIGTERM while waiting for a predecessor")
	}
}

// Node ids that would carry runnable text into a hint are refused, in SQL and by
// the engine.
func TestHostileNodeIDs(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	for _, id := range []string{"x'; ALTER ROLE app2 SUPERUSER; --", "x\"y", "x`id`", `x\y`, "x\ny", "x\u202ey"} {
		refused(t, as("node"), "PLF11", registerSQL, id, []string{"s"})
		var ce *election.ConfigError
		if _, err := election.New(testnode.FastConfig(as("node"), id, "s")); !errors.As(err, &ce) || ce.Field != "NodeID" {
			t.Errorf("node id %q: New returned %v, want a ConfigError on NodeID", id, err)
		}
	}
}

// scope key: refused while nodes campaign for the scope, and for a bound scope
// unless the caller is the owner or one of its roles.
func TestHostileScopeKey(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('scope', 'keyed', ARRAY[$1])`, prefix+"_node")
	refused(t, as("operator"), "PLF10", `SELECT pgleader.set_lock_key('keyed', 4242)`)
	exec(t, dsn, `SELECT pgleader.set_lock_key('keyed', 4242)`) // the owner
	exec(t, dsn, `SELECT pgleader.set_lock_key('keyed', NULL)`)

	a := testnode.Start(t, testnode.FastConfig(as("node"), "k-1", "unheld"))
	pgtest.WaitFor(t, "a campaigning", 10*time.Second, func() bool { return a.Leads("unheld") })
	a.Stop()
	b := testnode.Start(t, testnode.FastConfig(as("node"), "k-2", "campaigned"))
	pgtest.WaitFor(t, "b leading", 10*time.Second, func() bool { return b.Leads("campaigned") })
	refused(t, as("operator"), "PLF07", `SELECT pgleader.set_lock_key('campaigned', 4343)`)
	exec(t, as("operator"), `SELECT pgleader.set_lock_key('unheld', 4343)`)
}

// fence_rejected writes at most 20 rows a second for one scope and login (100
// for one login), only for scopes that exist, each detail cut to 500 bytes.
func TestHostileFenceRejectedBounded(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "fr-1", "fr"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("fr") })
	start := time.Now()
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		for i := range 200 {
			if _, err := c.Exec(ctx, `SELECT pgleader.fence_rejected('fr', 1, $1, repeat('x', 50000))`, fmt.Sprint("n", i)); err != nil {
				return err
			}
			if _, err := c.Exec(ctx, `SELECT pgleader.fence_rejected($1, 1, 'n', 'x')`, fmt.Sprint("no-such-scope-", i)); err != nil {
				return err
			}
		}
		return nil
	})
	secs := int64(time.Since(start)/time.Second) + 1
	n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'fence_rejected' AND scope = 'fr'`)
	if n < 1 || n > 20*secs {
		t.Errorf("%d fence_rejected rows from 200 calls in %ds, want 1 to %d", n, secs, 20*secs)
	}
	if m := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'fence_rejected' AND scope LIKE 'no-such-scope-%'`); m != 0 {
		t.Errorf("%d fence_rejected rows for scopes that do not exist, want 0", m)
	}
	if l := queryInt(t, dsn, `SELECT max(length(detail->>'detail')) FROM pgleader.audit WHERE kind = 'fence_rejected' AND scope = 'fr'`); l > 500 {
		t.Errorf("a fence_rejected detail of %d characters, want at most 500", l)
	}
}

// forget_node removes a node that is not running, audited; a running one is
// refused.
func TestForgetNode(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "f-1", "fg"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads("fg") })
	refused(t, as("operator"), "PLF07", `SELECT pgleader.forget_node('f-1')`)
	refused(t, as("node"), "42501", `SELECT pgleader.forget_node('f-1')`)
	a.Stop()
	if got := queryString(t, as("operator"), `SELECT pgleader.forget_node('f-1')::text`); got != "true" {
		t.Errorf("forget_node of a stopped node: %s, want true", got)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.nodes WHERE node_id = 'f-1'`); n != 0 {
		t.Errorf("the forgotten node is still in pgleader.nodes")
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'node_forgotten' AND node_id = 'f-1'
		AND session_role LIKE '%\_operator' AND NOT detail ? 'lease_token'`); n != 1 {
		t.Errorf("%d node_forgotten audit rows by the operator without the lease token, want 1", n)
	}
	if got := queryString(t, as("operator"), `SELECT pgleader.forget_node('f-1')::text`); got != "false" {
		t.Errorf("forget_node of an unknown node: %s, want false", got)
	}
}

// The node functions that act for a node id act only for the session that
// registered it: another login's session, naming the node, changes nothing.
func TestHostileNodeFunctions(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	victim := testnode.Start(t, testnode.FastConfig(as("node"), "victim", "nf"))
	pgtest.WaitFor(t, "the victim leading", 10*time.Second, func() bool { return victim.Leads("nf") })
	tok, err := victim.Scope("nf").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := protocol.LockKey("nf")
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		var got *bool
		if err := c.QueryRow(ctx, `SELECT pgleader.node_stopped('victim')`).Scan(&got); err != nil || got != nil {
			t.Errorf("node_stopped of another session's node: %v %v, want NULL (nothing matched)", got, err)
		}
		var n int
		if err := c.QueryRow(ctx, `SELECT pgleader.unlock_held_many($1)`, []int64{key}).Scan(&n); err != nil || n != 0 {
			t.Errorf("unlock_held_many of the victim's scope key from another session: %d %v, want 0", n, err)
		}
		var ok bool
		if err := c.QueryRow(ctx, `SELECT pgleader.node_supervisor('victim', '{"command":"x"}')`).Scan(&ok); err != nil || ok {
			t.Errorf("node_supervisor of another login's node: %v %v, want false", ok, err)
		}
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.release_batch('victim', '{nf}', $1, '{resigned}')`, []int64{tok.Epoch}); sqlstate(err) != "PLF12" {
			t.Errorf("release_batch naming the victim: %v, want SQLSTATE PLF12", err)
		}
		// A lease token proves a lease-mode node; a guessed one proves nothing.
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.lease_release_batch('victim', 1, '{nf}', $1, '{resigned}')`, []int64{tok.Epoch}); err != nil {
			t.Errorf("lease_release_batch with a wrong token: %v", err)
		}
		many := make([]string, 10001)
		for i := range many {
			many[i] = "nf"
		}
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.lease_release_batch('victim', 1, $1, '{}', '{}')`, many); sqlstate(err) != "PLF11" {
			t.Errorf("lease_release_batch of 10001 scopes: %v, want SQLSTATE PLF11", err)
		}
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.lease_claim_scopes('victim', 1, 'h', 50, 100, 300, 500, '{nf}', '{0}')`); sqlstate(err) != "PLF02" {
			t.Errorf("lease_claim_scopes with a wrong token: %v, want SQLSTATE PLF02", err)
		}
		return nil
	})
	if cur, err := victim.Scope("nf").Require(ctx); err != nil || cur.Epoch != tok.Epoch {
		t.Fatalf("the victim lost its term: %+v %v", cur, err)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.nodes WHERE node_id = 'victim' AND stopped_at IS NULL AND supervisor IS NULL`); n != 1 {
		t.Errorf("the victim's row was changed by another session")
	}
}

// The operator's functions: refused to every other role, bounded, audited with
// the caller's login.
func TestHostileOperatorFunctions(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	a := testnode.Start(t, testnode.FastConfig(as("node"), "op-a", "op"))
	b := testnode.Start(t, testnode.FastConfig(as("node"), "op-b", "op"))
	pgtest.WaitFor(t, "one leading", 10*time.Second, func() bool { return a.Leads("op") || b.Leads("op") })
	for _, role := range []string{"node", "reader", "app", "squat"} {
		for _, q := range []string{
			`SELECT pgleader.request_resign('op', NULL, 'x')`,
			`SELECT * FROM pgleader.request_handover('op', NULL, 1000, 'x')`,
			`SELECT pgleader.cancel_handover('op', 'op-a', 'x')`,
			`SELECT pgleader.retire_scope('op', 'x')`,
			`SELECT pgleader.record_eviction('op', 1, 'op-a', 1, 'x', 'x')`,
			`SELECT pgleader.set_lock_key('op', 1)`,
			`SELECT pgleader.forget_node('op-a')`,
		} {
			refused(t, as(role), "42501", q)
		}
	}
	refused(t, as("operator"), "PLF11", `SELECT * FROM pgleader.request_handover('op', NULL, 999999999, 'x')`)
	exec(t, as("operator"), `SELECT pgleader.request_resign('op', NULL, repeat('v', 5000))`)
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested' AND scope = 'op'
		AND session_role = $1 AND detail->>'by' = $1 AND length(detail->>'via') <= 200`, prefix+"_operator"); n != 1 {
		t.Errorf("%d resign_requested rows attributed to the operator's login with a bounded via, want 1", n)
	}
}
