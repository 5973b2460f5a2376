package election_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/protocol"
)

// Probes of a hostile neighbour with a login (docs/security.md): each was seen to
// work before schema version 12.

// A scope bound to a service's role is refused to every other node login, at
// registration and at the claim, lock and lease mode, naming the scope and the
// role; the bound role still leads; a prefix binding covers every scope under it.
// fenceSQL is the statement election.Fence runs (docs/protocol.md).
const fenceSQL = "SELECT pgleader.fence($1, $2, $3)"

func TestHostileScopeBindings(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('scope', 'bound', ARRAY[$1])`, prefix+"_node")
	exec(t, dsn, `SELECT * FROM pgleader.bind_scope('prefix', 'svc-a/', ARRAY[$1])`, prefix+"_node")
	intruder := as("node2")

	wantPLF10 := func(t *testing.T, what string, err error, scope string) {
		t.Helper()
		if sqlstate(err) != "PLF10" {
			t.Fatalf("%s: got %v, want SQLSTATE PLF10", what, err)
		}
		if msg := err.Error(); !strings.Contains(msg, prefix+"_node2") || !strings.Contains(msg, scope) {
			t.Errorf("%s: the refusal does not name the role and the scope: %s", what, msg)
		}
	}
	for _, scope := range []string{"bound", "svc-a/cron"} {
		withConn(t, intruder, func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `SELECT pgleader.register_node('intruder', 'h', 1, 'v', $1, 50, 300, 500, 1, 2)`, []string{scope})
			wantPLF10(t, "register_node "+scope, err, scope)
			// Registered for an open scope only, the intruder claims the bound one:
			// a node claims only the scopes it registered (PLF12).
			if _, err := c.Exec(ctx, `SELECT pgleader.register_node('intruder', 'h', 1, 'v', '{open}', 50, 300, 500, 1, 2)`); err != nil {
				t.Fatal(err)
			}
			_, err = c.Exec(ctx, `SELECT * FROM pgleader.claim_batch('intruder', 'h', 1, 50, 100, 300, 500, $1, $2)`,
				[]string{scope}, []int64{protocol.LockKey(scope)})
			if sqlstate(err) != "PLF12" {
				t.Errorf("claim_batch %s by a node that did not register it: got %v, want SQLSTATE PLF12", scope, err)
			}
			_, err = c.Exec(ctx, `SELECT pgleader.lease_register('intruder', 'h', 1, 'v', $1, 50, 300, 500, 7, 1, 300, NULL)`, []string{scope})
			wantPLF10(t, "lease_register "+scope, err, scope)
			return nil
		})
	}
	// An unbound scope stays open to every node role.
	withConn(t, intruder, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pgleader.register_node('intruder', 'h', 1, 'v', $1, 50, 300, 500, 1, 2)`, []string{"open"})
		if err != nil {
			t.Errorf("register an unbound scope: %v", err)
		}
		return nil
	})

	// The bound role leads; the intruder's node cannot start on the scope.
	owner := testnode.Start(t, testnode.FastConfig(as("node"), "svc-a-1", "bound", "svc-a/cron"))
	pgtest.WaitFor(t, "the bound role leading both scopes", 10*time.Second, func() bool {
		return owner.Leads("bound") && owner.Leads("svc-a/cron")
	})
	e, err := election.New(testnode.FastConfig(intruder, "svc-b-1", "bound"))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	runErr := e.Run(rctx)
	if runErr == nil || !strings.Contains(runErr.Error(), "may not campaign for scope") {
		t.Errorf("a node of another login on a bound scope: Run returned %v, want the binding's refusal", runErr)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.terms WHERE holder = 'svc-b-1'`); n != 0 {
		t.Errorf("the intruder held %d terms", n)
	}
	// The binding is audited with the login that made it.
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'scope_bound' AND session_role = current_user`); n != 2 {
		t.Errorf("%d scope_bound audit rows by this login, want 2", n)
	}
	// Only the owner binds: no node, reader or operator login may.
	for _, role := range []string{"node", "node2", "reader", "operator", "app", "squat"} {
		refused(t, as(role), "42501", `SELECT * FROM pgleader.bind_scope('scope', 'bound', ARRAY['x'])`)
	}
}

// Failback stays within the bound roles, and a failback request is attributed to
// the login of the node that caused it, not to the leader whose heartbeat wrote it.
func TestHostileFailbackAttribution(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	victim := testnode.Start(t, testnode.FastConfig(as("node"), "victim", "fb"))
	pgtest.WaitFor(t, "the victim leading", 10*time.Second, func() bool { return victim.Leads("fb") })

	cfg := testnode.FastConfig(as("node2"), "preferred", "fb")
	cfg.Priority = 1000
	cfg.FailbackAfter = 300 * time.Millisecond
	pref := testnode.Start(t, cfg)
	pgtest.WaitFor(t, "the preferred node taking the scope back", 15*time.Second, func() bool { return pref.Leads("fb") })
	var by, recorded string
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT detail->>'by', detail->>'recorded_by' FROM pgleader.audit
			WHERE kind = 'handover_requested' AND detail->>'via' = 'failback' ORDER BY id DESC LIMIT 1`).Scan(&by, &recorded)
	})
	if by != prefix+"_node2" || recorded != prefix+"_node" {
		t.Errorf("failback request attributed to %q (recorded by %q), want the preferred node's login %q (recorded by the leader's %q)",
			by, recorded, prefix+"_node2", prefix+"_node")
	}
}

// A node cannot choose a scope's key: a claim under any key but the derived one
// (or the override the owner or an operator recorded) is refused and leaves no
// row; an override is recorded by an operator, audited, and only while no session
// holds the scope.
func TestHostileLockKeys(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	node := as("node")
	victimKey := protocol.LockKey("victim")
	const claimSQL = `SELECT * FROM pgleader.claim_batch('n', 'h', 1, 50, 100, 300, 500, $1, $2)`
	noLock := func(what string, key int64) {
		t.Helper()
		if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.advisory_locks() WHERE key = $1`, key); n != 0 {
			t.Errorf("%s: %d sessions still hold key %d", what, n, key)
		}
	}
	withConn(t, node, func(ctx context.Context, c *pgx.Conn) error {
		// Unregistered: the claim proves nothing about its caller (PLF12).
		_, err := c.Exec(ctx, claimSQL, []string{"victim"}, []int64{victimKey})
		if sqlstate(err) != "PLF12" {
			t.Errorf("claim by a session that registered no node: got %v, want SQLSTATE PLF12", err)
		}
		if _, err := c.Exec(ctx, `SELECT pgleader.register_node('n', 'h', 1, 'v', '{victim}', 50, 300, 500, 1, 2)`); err != nil {
			return err
		}
		for _, key := range []int64{42, protocol.LockKey("victim-other")} {
			_, err := c.Exec(ctx, claimSQL, []string{"victim"}, []int64{key})
			if sqlstate(err) != "PLF03" {
				t.Errorf("claim of scope victim under key %d: got %v, want SQLSTATE PLF03", key, err)
			}
			noLock(fmt.Sprintf("a claim under key %d, refused", key), key)
		}
		// The release-11 warm-up (a scratch scope named after the random key it
		// claims) is refused outright: it let a node lock any key it chose, and
		// keep it after a rollback.
		warmScope := fmt.Sprintf("pgleader-warmup-%016x", uint64(victimKey))
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, claimSQL, []string{warmScope}, []int64{victimKey}); sqlstate(err) != "PLF03" {
			t.Errorf("a release-11 warm-up claim under another scope's key: got %v, want SQLSTATE PLF03", err)
		}
		_ = tx.Rollback(ctx)
		noLock("a release-11 warm-up claim, rolled back", victimKey)
		// Today's warm-up (a scratch scope under its derived key, rolled back)
		// leaves no lock behind: its lock is the transaction's.
		scratch := "pgleader-warmup-0123456789abcdef"
		if tx, err = c.Begin(ctx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, claimSQL, []string{scratch}, []int64{protocol.LockKey(scratch)}); err != nil {
			t.Errorf("a warm-up claim: %v", err)
		}
		_ = tx.Rollback(ctx)
		noLock("a warm-up claim, rolled back", protocol.LockKey(scratch))
		// Nor can a scratch row commit.
		if _, err := c.Exec(ctx, claimSQL, []string{scratch}, []int64{protocol.LockKey(scratch)}); sqlstate(err) != "PLF03" {
			t.Errorf("a warm-up claim that would commit: got %v, want SQLSTATE PLF03", err)
		}
		noLock("a warm-up claim that would commit, refused", protocol.LockKey(scratch))
		// A scope the node did not register: PLF12.
		if _, err := c.Exec(ctx, claimSQL, []string{"victim-other"}, []int64{protocol.LockKey("victim-other")}); sqlstate(err) != "PLF12" {
			t.Errorf("a claim of a scope the node did not register: got %v, want SQLSTATE PLF12", err)
		}
		_, err = c.Exec(ctx, `SELECT pgleader.node_stopped('n')`)
		return err
	})
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.leader_state WHERE scope = 'victim' OR scope LIKE 'pgleader-warmup-%'`); n != 0 {
		t.Fatalf("refused claims left %d rows", n)
	}
	// Real nodes lead the scope under its derived key.
	n1 := testnode.Start(t, testnode.FastConfig(node, "real-1", "victim"))
	pgtest.WaitFor(t, "a real node leading", 10*time.Second, func() bool { return n1.Leads("victim") })

	// An override: not while held; then recorded by an operator, audited.
	refused(t, as("operator"), "PLF07", `SELECT pgleader.set_lock_key('victim', 4242)`)
	refused(t, node, "42501", `SELECT pgleader.set_lock_key('victim', 4242)`)
	refused(t, as("reader"), "42501", `SELECT pgleader.set_lock_key('victim', 4242)`)
	exec(t, as("operator"), `SELECT pgleader.set_lock_key('other', 4242)`)
	cfg := testnode.FastConfig(node, "real-2", "other")
	cfg.LockKeys = map[string]int64{"other": 4242}
	n2 := testnode.Start(t, cfg)
	pgtest.WaitFor(t, "a node leading under the recorded override", 10*time.Second, func() bool { return n2.Leads("other") })
	if k := queryInt(t, dsn, `SELECT lock_key FROM pgleader.leader_state WHERE scope = 'other'`); k != 4242 {
		t.Errorf("scope other has key %d, want the override 4242", k)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'lock_key_set' AND scope = 'other'
		AND (detail->>'lock_key')::bigint = 4242 AND session_role LIKE '%\_operator'`); n != 1 {
		t.Errorf("%d lock_key_set audit rows naming the operator, want 1", n)
	}
}

// The reader cannot read lease tokens; the owner sees a new one at every
// registration of a node id.
func TestHostileLeaseTokens(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	for _, role := range []string{"reader", "operator", "node", "app", "squat"} {
		refused(t, as(role), "42501", `SELECT lease_token FROM pgleader.nodes`)
		refused(t, as(role), "42501", `SELECT n.* FROM pgleader.nodes n`)
	}
	// The reader still reads every other column.
	exec(t, as("reader"), `SELECT node_id, hostname, os_pid, version, scopes, leads, last_seen, login_role FROM pgleader.nodes`)

	tokens := map[int64]bool{}
	for range 3 {
		cfg := testnode.FastConfig(as("node"), "lease-1", "lt")
		cfg.Mode = election.ModeLease
		n := testnode.Start(t, cfg)
		pgtest.WaitFor(t, "the lease node leading", 10*time.Second, func() bool { return n.Leads("lt") })
		tokens[queryInt(t, dsn, `SELECT lease_token FROM pgleader.nodes WHERE node_id = 'lease-1'`)] = true
		n.Stop()
	}
	if len(tokens) != 3 {
		t.Errorf("3 registrations of one node id used %d distinct lease tokens, want 3", len(tokens))
	}
}

// A role with EXECUTE on fence alone cannot stall a failover: its fenced
// transaction that outlives its term is ended once the successor has waited the
// trust window, audited with its pid and login, and its writes never commit. The
// fence's refusal says the epoch is stale, not who leads now.
func TestHostileFencedTxBounded(t *testing.T) {
	pgtest.Slow(t)
	for _, mode := range []election.Mode{election.ModeLock, election.ModeLease} {
		t.Run(string(mode), func(t *testing.T) { testFencedTxBounded(t, mode) })
	}
}

func testFencedTxBounded(t *testing.T, mode election.Mode) {
	ctx := context.Background()
	cfgOf := func(dsn, id string) election.Config {
		c := testnode.FastConfig(dsn, id, "ft")
		c.Mode = mode
		return c
	}
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	const scope = "ft"
	a := testnode.Start(t, cfgOf(as("node"), "ft-a"))
	pgtest.WaitFor(t, "a leading", 10*time.Second, func() bool { return a.Leads(scope) })
	tok, err := a.Scope(scope).Require(ctx)
	if err != nil {
		t.Fatal(err)
	}

	app, err := pgx.Connect(ctx, as("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fenceSQL, tok.Scope, tok.Epoch, tok.Holder); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(30)`) // busy: idle_in_transaction_session_timeout does not apply
		slept <- err
	}()

	// The leader's process dies (its sessions end); a successor starts.
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		a.Cancel()
		_, err := c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '% ft-a'`)
		return err
	})
	start := time.Now()
	b := testnode.Start(t, cfgOf(as("node"), "ft-b"))
	pgtest.WaitFor(t, "the successor leading", 15*time.Second, func() bool { return b.Leads(scope) })
	took := time.Since(start)
	select {
	case err := <-slept:
		if err == nil {
			t.Fatal("the fenced transaction's statement finished normally")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced transaction was not ended")
	}
	t.Logf("the successor led %v after the leader's sessions ended (trust window %v)", took.Round(time.Millisecond), testnode.FastConfig("", "").TrustWindow)
	if took > 10*time.Second {
		t.Errorf("the successor waited %v for a fenced transaction", took)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit WHERE kind = 'fenced_tx_ended' AND scope = $1
		AND detail->>'login_role' = $2 AND (detail->>'ended')::boolean`, scope, prefix+"_app"); n != 1 {
		t.Errorf("%d fenced_tx_ended audit rows naming the app's login, want 1", n)
	}

	// The refusal of a stale epoch names neither the current epoch nor the holder.
	withConn(t, as("app"), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, fenceSQL, tok.Scope, tok.Epoch, tok.Holder)
		if sqlstate(err) != protocol.SQLStateFenced {
			t.Fatalf("stale fence: got %v, want SQLSTATE %s", err, protocol.SQLStateFenced)
		}
		if strings.Contains(err.Error(), "ft-b") || strings.Contains(err.Error(), "current is") {
			t.Errorf("the fence's refusal tells who leads now: %v", err)
		}
		return nil
	})
	// The termination followed an audit row that committed before it.
	if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.audit f JOIN pgleader.audit e
		  ON e.kind = 'fenced_tx_ended' AND e.scope = f.scope AND e.detail->>'pid' = f.detail->>'pid' AND e.id > f.id
		 WHERE f.kind = 'fenced_tx_found' AND f.scope = $1 AND f.detail->>'login_role' = $2`, scope, prefix+"_app"); n != 1 {
		t.Errorf("%d fenced_tx_found rows before the fenced_tx_ended row, want 1", n)
	}
	// A leader's own fenced transactions are never ended: end_fenced proves its
	// caller (PLF12 for a session that registered no node), and refuses while
	// the scope is led (PLF07).
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT * FROM pgleader.end_fenced('x', $1)`, scope)
		if sqlstate(err) != "PLF12" {
			t.Errorf("end_fenced by a session that registered no node: got %v, want SQLSTATE PLF12", err)
		}
		if _, err := c.Exec(ctx, `SELECT pgleader.register_node('x', 'h', 1, 'v', $1, 50, 300, 500, 1, 2)`, []string{scope}); err != nil {
			return err
		}
		_, err = c.Exec(ctx, `SELECT * FROM pgleader.end_fenced('x', NULL, $1)`, scope)
		if sqlstate(err) != "PLF07" {
			t.Errorf("end_fenced of a led scope: got %v, want SQLSTATE PLF07", err)
		}
		_, err = c.Exec(ctx, `SELECT pgleader.node_stopped('x')`)
		return err
	})
}
