package election_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/protocol"
)

// loginRoles creates login roles for one test: <prefix>_node and <prefix>_node2
// (in pgleader_node), _reader, _operator, _app (USAGE and EXECUTE on fence
// only) and _squat (nothing but CONNECT, and CREATE on public). Roles are shared by
// the cluster's databases, so each test gets its own prefix; they are dropped at
// the end.
func loginRoles(t *testing.T, dsn string) (prefix string, as func(role string) string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix = "t" + hex.EncodeToString(b)
	stmts := []string{
		"CREATE ROLE %[1]s_node LOGIN IN ROLE pgleader_node",
		"CREATE ROLE %[1]s_node2 LOGIN IN ROLE pgleader_node",
		"CREATE ROLE %[1]s_reader LOGIN IN ROLE pgleader_reader",
		"CREATE ROLE %[1]s_operator LOGIN IN ROLE pgleader_operator",
		"CREATE ROLE %[1]s_app LOGIN",
		"GRANT USAGE ON SCHEMA pgleader TO %[1]s_app",
		"GRANT EXECUTE ON FUNCTION pgleader.fence(text, bigint, text) TO %[1]s_app",
		"CREATE ROLE %[1]s_squat LOGIN",
		"GRANT CREATE ON SCHEMA public TO %[1]s_squat",
	}
	for _, s := range stmts {
		exec(t, dsn, fmt.Sprintf(s, prefix))
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		// Their sessions may outlive the test by a moment.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename LIKE $1", prefix+"\\_%")
		for _, r := range []string{"node", "node2", "reader", "operator", "app", "squat"} {
			_, _ = c.Exec(ctx, fmt.Sprintf("DROP OWNED BY %s_%s CASCADE", prefix, r))
			_, _ = c.Exec(ctx, fmt.Sprintf("DROP ROLE IF EXISTS %s_%s", prefix, r))
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return prefix, func(role string) string {
		v := *u
		v.User = url.User(prefix + "_" + role)
		return v.String()
	}
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// refused runs sql as the role behind dsn and wants SQLSTATE code.
func refused(t *testing.T, dsn, code, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	if got := sqlstate(err); got != code {
		t.Errorf("%s as %s: got %v (SQLSTATE %q), want SQLSTATE %s", sql, c.Config().User, err, got, code)
	}
}

// revokeAdvisoryLocks applies docs/security.md's hardening to the database: the
// advisory-lock functions are revoked from PUBLIC and granted to pgleader_owner.
func revokeAdvisoryLocks(t *testing.T, dsn string) {
	t.Helper()
	exec(t, dsn, `DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname LIKE 'pg\_%advisory\_%' LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO pgleader_owner', f);
  END LOOP;
END $$`)
	if n := queryInt(t, dsn, `SELECT count(*) FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname LIKE 'pg\_%advisory\_%'`); n != 21 {
		t.Fatalf("%d advisory-lock functions revoked, want the 21 of docs/security.md", n)
	}
}

// Each role does its job and nothing else, with the advisory-lock functions
// revoked from PUBLIC: nodes lead as pgleader_node; no role but the owner writes a
// table; a node cannot claim, heartbeat, release or register what is another's;
// the reader reads; the operator's resign is attributed to its login role; the
// application fences with EXECUTE on fence alone; operators planted in public run
// nowhere; a role with only CONNECT cannot squat.
func TestLeastPrivilege(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	revokeAdvisoryLocks(t, dsn)

	// Operators in public that an exact type match would pick over pg_catalog's
	// (int / numeric and numeric * int have no exact operator there): claim_batch
	// and the collector's read both use such expressions.
	squat := as("squat")
	exec(t, squat, `CREATE FUNCTION public.shadow_div(integer, numeric) RETURNS numeric LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'shadowed operator ran as %', current_user; END $$`)
	exec(t, squat, `CREATE OPERATOR public./ (leftarg = integer, rightarg = numeric, function = public.shadow_div)`)
	exec(t, squat, `CREATE FUNCTION public.shadow_mul(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'shadowed operator ran as %', current_user; END $$`)
	exec(t, squat, `CREATE OPERATOR public.* (leftarg = numeric, rightarg = integer, function = public.shadow_mul)`)
	// The trap works for a session with the default search_path (so the checks
	// below can fail).
	refused(t, squat, "P0001", "SELECT 1::integer / 1000.0")

	const scope = "lp"
	var nodes []*testnode.Node
	for _, id := range []string{"lp-a", "lp-b"} {
		nodes = append(nodes, testnode.Start(t, testnode.FastConfig(as("node"), id, scope)))
	}
	var leader *testnode.Node
	pgtest.WaitFor(t, "a leader running as the node role", 10*time.Second, func() bool {
		ls := leaders(nodes, scope)
		if len(ls) == 1 {
			leader = ls[0]
		}
		return len(ls) == 1
	})
	tok, err := leader.Scope(scope).Require(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("NoDirectWrites", func(t *testing.T) {
		for _, role := range []string{"node", "reader", "operator", "app", "squat"} {
			d := as(role)
			refused(t, d, "42501", "UPDATE pgleader.leader_state SET epoch = epoch + 1")
			refused(t, d, "42501", "UPDATE pgleader.leader_state SET lock_key = 42 WHERE scope = $1", scope)
			refused(t, d, "42501", "INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at) VALUES ('x', 1, 'x', 'x', 1, now())")
			refused(t, d, "42501", "UPDATE pgleader.terms SET holder = 'mallory'")
			refused(t, d, "42501", "INSERT INTO pgleader.audit (kind) VALUES ('forged')")
			refused(t, d, "42501", "DELETE FROM pgleader.audit")
			refused(t, d, "42501", "TRUNCATE pgleader.audit RESTART IDENTITY")
			refused(t, d, "42501", "UPDATE pgleader.nodes SET last_seen = now()")
			refused(t, d, "42501", "INSERT INTO pgleader.timelines (timeline, epoch_floor) VALUES (99, 0)")
			refused(t, d, "42501", "CREATE TABLE pgleader.planted (x int)")
		}
	})

	t.Run("NodeCannotTakeAnothersTerm", func(t *testing.T) {
		other := as("node2")
		key := protocol.LockKey(scope)
		withConn(t, other, func(ctx context.Context, c *pgx.Conn) error {
			var acquired, busy bool
			// Unregistered, the session proves nothing: refused (PLF12).
			_, err := c.Exec(ctx, `SELECT * FROM pgleader.claim_batch('intruder', 'h', 1, 50, 100, 300, 500, $1, $2)`, []string{scope}, []int64{key})
			if sqlstate(err) != "PLF12" {
				t.Errorf("claim_batch by a session that registered no node: %v, want PLF12", err)
			}
			if _, err := c.Exec(ctx, `SELECT pgleader.register_node('intruder', 'h', 1, 'v', $1, 50, 300, 500, 1, 2)`, []string{scope}); err != nil {
				return err
			}
			if err := c.QueryRow(ctx, `SELECT acquired, busy FROM pgleader.claim_batch('intruder', 'h', 1, 50, 100, 300, 500, $1, $2)`,
				[]string{scope}, []int64{key}).Scan(&acquired, &busy); err != nil {
				return err
			}
			if acquired {
				t.Errorf("claim_batch of a held scope acquired it")
			}
			var ok bool
			if err := c.QueryRow(ctx, `SELECT ok FROM pgleader.node_heartbeat($1, $2, $3, '{}', '{}') WHERE kind = 'led'`,
				tok.Holder, []string{scope}, []int64{tok.Epoch}).Scan(&ok); err != nil {
				return err
			}
			if ok {
				t.Errorf("node_heartbeat confirmed %s's term from another session", tok.Holder)
			}
			_, err = c.Exec(ctx, `SELECT ok FROM pgleader.release_batch($1, $2, $3, $4)`,
				tok.Holder, []string{scope}, []int64{tok.Epoch}, []string{"resigned"})
			if sqlstate(err) != "PLF12" {
				t.Errorf("release_batch of %s's term from another session: %v, want PLF12", tok.Holder, err)
			}
			if err := c.QueryRow(ctx, `SELECT ok FROM pgleader.release_batch('intruder', $1, $2, $3)`,
				[]string{scope}, []int64{tok.Epoch}, []string{"resigned"}).Scan(&ok); err != nil {
				return err
			}
			if ok {
				t.Errorf("release_batch released %s's term as another node", tok.Holder)
			}
			_, err = c.Exec(ctx, `SELECT pgleader.register_node($1, 'h', 1, 'v', $2, 50, 300, 500, 1, 2)`, tok.Holder, []string{scope})
			if got := sqlstate(err); got != "PLF06" {
				t.Errorf("register_node of live node %s by another login: %v, want PLF06", tok.Holder, err)
			}
			_, err = c.Exec(ctx, `SELECT pgleader.session_lock($1)`, key)
			if got := sqlstate(err); got != "PLF05" {
				t.Errorf("session_lock on a scope's key: %v, want PLF05", err)
			}
			return nil
		})
		if cur, err := leader.Scope(scope).Require(ctx); err != nil || cur.Epoch != tok.Epoch {
			t.Fatalf("leader lost its term to the attempts: %+v, %v", cur, err)
		}
	})

	t.Run("WrongRoleNamedAtStart", func(t *testing.T) {
		for role, want := range map[string]string{"reader": "GRANT pgleader_node", "squat": "may not use schema pgleader"} {
			e, err := election.New(testnode.FastConfig(as(role), "wrong-"+role, scope))
			if err != nil {
				t.Fatal(err)
			}
			err = e.Check(ctx)
			if !errors.Is(err, election.ErrPermission) || !strings.Contains(err.Error(), want) {
				t.Errorf("Check as %s: %v, want ErrPermission saying %q", role, err, want)
			}
		}
	})

	t.Run("ReaderReadsOnly", func(t *testing.T) {
		r := as("reader")
		if n := queryInt(t, r, "SELECT count(*) FROM pgleader.leader_state"); n != 1 {
			t.Errorf("reader sees %d leader_state rows, want 1", n)
		}
		refused(t, r, "42501", "SELECT pgleader.request_resign($1, NULL, 'reader')", scope)
		refused(t, r, "42501", "SELECT * FROM pgleader.claim_batch('r', 'h', 1, 50, 100, 300, 500, '{x}', '{1}')")
		refused(t, r, "42501", "SELECT pgleader.session_lock(7)")
		refused(t, r, "42501", "SELECT pgleader.fence($1, $2, $3)", scope, tok.Epoch, tok.Holder)
		cc, err := pgx.ParseConfig(r)
		if err != nil {
			t.Fatal(err)
		}
		col, err := collector.New(collector.Config{ConnConfig: cc, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := col.Poll(ctx) // its read has an int / numeric and a numeric * int
		if err != nil {
			t.Fatalf("collector as the reader role: %v", err)
		}
		if sc, ok := snap.Scope(scope); !ok || sc.Leader != tok.Holder || sc.Epoch != tok.Epoch {
			t.Errorf("collector as the reader role sees %+v, want %s at epoch %d", sc, tok.Holder, tok.Epoch)
		}
	})

	t.Run("ApplicationFences", func(t *testing.T) {
		app := as("app")
		withConn(t, app, func(ctx context.Context, c *pgx.Conn) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			return election.Fence(ctx, tx, tok)
		})
		refused(t, app, "PLF01", "SELECT pgleader.fence($1, $2, $3)", scope, tok.Epoch-1, tok.Holder)
		refused(t, app, "42501", "SELECT pgleader.request_resign($1, NULL, 'app')", scope)
	})

	t.Run("CannotSquat", func(t *testing.T) {
		refused(t, squat, "42501", "SELECT pg_advisory_lock_shared($1)", protocol.LockKey(scope))
		refused(t, squat, "42501", "SELECT pg_try_advisory_lock($1)", protocol.LockKey(scope))
	})

	// Last: it moves leadership (and the claim evaluates int / numeric).
	t.Run("OperatorResignIsAttributed", func(t *testing.T) {
		op := as("operator")
		var ok bool
		withConn(t, op, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT pgleader.request_resign($1, NULL, 'someone else')", scope).Scan(&ok)
		})
		if !ok {
			t.Fatal("request_resign as the operator marked nothing")
		}
		var by, via, sessionRole string
		withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT detail->>'by', detail->>'via', session_role FROM pgleader.audit
				WHERE kind = 'resign_requested' ORDER BY id DESC LIMIT 1`).Scan(&by, &via, &sessionRole)
		})
		if want := prefix + "_operator"; by != want || sessionRole != want || via != "someone else" {
			t.Errorf("resign audited as by=%q session_role=%q via=%q, want by=session_role=%q via=%q", by, sessionRole, via, want, "someone else")
		}
		pgtest.WaitFor(t, "the other node to lead after the resign", 10*time.Second, func() bool {
			for _, n := range nodes {
				if cur, err := n.Scope(scope).Require(ctx); err == nil && cur.Epoch > tok.Epoch {
					return true
				}
			}
			return false
		})
	})
}

// A session with nothing but CONNECT squats a scope's key (both modes, advisory
// functions not revoked): the collector names it on its first read, with its role
// and application, and the blocked node logs a warning naming it; leadership
// resumes once it lets go.
func TestSquatterNamed(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MigratedDSN(t)
	prefix, as := loginRoles(t, dsn)
	squat := as("squat")
	const scope = "sq"
	key := protocol.LockKey(scope)

	for _, mode := range []string{"pg_advisory_lock", "pg_advisory_lock_shared"} {
		t.Run(mode, func(t *testing.T) {
			scc, err := pgx.ParseConfig(squat)
			if err != nil {
				t.Fatal(err)
			}
			scc.RuntimeParams["application_name"] = "squatter"
			c, err := pgx.ConnectConfig(ctx, scc)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			var pid int32
			if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, "SELECT "+mode+"($1)", key); err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			cfg := testnode.FastConfig(as("node"), "sq-"+mode, scope)
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			n := testnode.Start(t, cfg)

			cc, err := pgx.ParseConfig(as("reader"))
			if err != nil {
				t.Fatal(err)
			}
			col, err := collector.New(collector.Config{ConnConfig: cc, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			// The node registers first (the scope has no row yet: the collector
			// knows it from the node's candidacy); then one read names the squatter.
			pgtest.WaitFor(t, "the node registered", 10*time.Second, func() bool {
				return queryInt(t, dsn, "SELECT count(*) FROM pgleader.nodes WHERE node_id = $1 AND stopped_at IS NULL", cfg.NodeID) == 1
			})
			snap, err := col.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sc, _ := snap.Scope(scope)
			if len(sc.Interference) != 1 || sc.Interference[0].PID != int(pid) || sc.Interference[0].Role != prefix+"_squat" ||
				sc.Interference[0].ApplicationName != "squatter" || !sc.Interference[0].Granted {
				t.Fatalf("one read: interference %+v, want pid %d role %s_squat application squatter, granted", sc.Interference, pid, prefix)
			}
			var alerted bool
			for _, a := range sc.Alerts {
				alerted = alerted || (a.Kind == collector.AlertInterference && strings.Contains(a.Summary, fmt.Sprint(pid)))
			}
			if !alerted {
				t.Errorf("no interference alert naming pid %d in %+v", pid, sc.Alerts)
			}
			pgtest.WaitFor(t, "the node's warning naming the squatter", 15*time.Second, func() bool {
				s := logs.String()
				return strings.Contains(s, "blocks leadership") && strings.Contains(s, fmt.Sprintf("pid %d", pid)) &&
					strings.Contains(s, prefix+"_squat")
			})
			if n.Leads(scope) {
				t.Fatal("the node leads a squatted scope")
			}
			if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
				t.Fatal(err)
			}
			pgtest.WaitFor(t, "leadership once the squatter let go", 10*time.Second, func() bool { return n.Leads(scope) })
			snap, err = col.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if sc, _ := snap.Scope(scope); len(sc.Interference) != 0 {
				t.Errorf("interference after the squatter let go: %+v", sc.Interference)
			}
			n.Stop()
		})
	}
}
