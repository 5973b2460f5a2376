package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// trapFuncs are exact-type overloads of what pgleader's statements call, as a role
// with CREATE on a schema in the caller's search_path may plant them: those whose
// argument types match better than pg_catalog's (a polymorphic or implicit-cast
// signature) run in place of pg_catalog's in a session that resolves names
// through public or "$user"; the others (same signature as pg_catalog's) show
// that pg_catalog, searched first, keeps them.
var trapFuncs = []struct{ sig, ret, call string }{
	{"has_schema_privilege(regnamespace, text)", "boolean", "pg_catalog.has_schema_privilege($1::oid, $2)"},
	{"has_function_privilege(text, text)", "boolean", "pg_catalog.has_function_privilege($1, $2)"},
	{"has_table_privilege(text, text)", "boolean", "pg_catalog.has_table_privilege($1, $2)"},
	{"pg_has_role(name, text, text)", "boolean", "pg_catalog.pg_has_role($1, $2::name, $3)"},
	{"cardinality(text[])", "integer", "pg_catalog.cardinality($1)"},
	{"array_length(text[], integer)", "integer", "pg_catalog.array_length($1, $2)"},
	{"array_position(text[], text)", "integer", "pg_catalog.array_position($1, $2)"},
	{"array_append(text[], text)", "text[]", "pg_catalog.array_append($1, $2)"},
	{"array_remove(text[], text)", "text[]", "pg_catalog.array_remove($1, $2)"},
	{"array_to_string(text[], text)", "text", "pg_catalog.array_to_string($1, $2)"},
	{"array_to_string(text[], text, text)", "text", "pg_catalog.array_to_string($1, $2, $3)"},
	{"unnest(text[])", "SETOF text", "pg_catalog.unnest($1)"},
	{"unnest(bigint[])", "SETOF bigint", "pg_catalog.unnest($1)"},
	{"current_setting(text)", "text", "pg_catalog.current_setting($1)"},
	{"set_config(text, text, boolean)", "text", "pg_catalog.set_config($1, $2, $3)"},
	{"to_jsonb(text)", "jsonb", "pg_catalog.to_jsonb($1)"},
	{"to_jsonb(bigint)", "jsonb", "pg_catalog.to_jsonb($1)"},
	{"jsonb_build_object(text, text)", "jsonb", "pg_catalog.jsonb_build_object($1, $2)"},
	{"jsonb_build_object(text, bigint)", "jsonb", "pg_catalog.jsonb_build_object($1, $2)"},
	{"format(text, text)", "text", "pg_catalog.format($1, $2)"},
	{"now()", "timestamptz", "pg_catalog.now()"},
	{"pg_backend_pid()", "integer", "pg_catalog.pg_backend_pid()"},
	{"pg_is_in_recovery()", "boolean", "pg_catalog.pg_is_in_recovery()"},
	{"to_regnamespace(text)", "regnamespace", "pg_catalog.to_regnamespace($1)"},
	{"to_regprocedure(text)", "regprocedure", "pg_catalog.to_regprocedure($1)"},
	{"pg_advisory_lock(bigint)", "void", "pg_catalog.pg_advisory_lock($1)"},
	{"pg_terminate_backend(integer, bigint)", "boolean", "pg_catalog.pg_terminate_backend($1, $2)"},
}

// trapAggs are aggregates planted the same way (pg_catalog's take "any",
// anyarray or anynonarray): name, argument type, state type, initial state and
// the state function's body.
var trapAggs = []struct{ name, arg, stype, init, step string }{
	{"count", "text", "bigint", "0", "s + 1"},
	{"count", "bigint", "bigint", "0", "s + 1"},
	{"array_agg", "text", "text[]", "{}", "pg_catalog.array_append(s, v)"},
	{"array_agg", "bigint", "bigint[]", "{}", "pg_catalog.array_append(s, v)"},
}

// trapOps are operators planted the same way: op, left and right types.
var trapOps = [][3]string{
	{"=", "double precision", "integer"}, // `$2::float8 = 0` resolves to float8eq by an implicit cast
	{">", "double precision", "integer"},
	{"=", "text[]", "text[]"}, // array_eq is (anyarray, anyarray)
	{"@>", "text[]", "text[]"},
	{"&&", "text[]", "text[]"},
	{"=", "text", "text"},
	{"<>", "text", "text"},
	{"=", "bigint", "bigint"},
	{"=", "integer", "integer"},
	{"=", "bigint", "integer"},
}

// plantTraps creates, as the role of dsn, every trap in schema: each records that
// it ran (a row in public.sp_fired, or a notification on sp_fired when the
// transaction is read-only) and returns what pg_catalog's version returns.
func plantTraps(t *testing.T, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	c := pgtest.Connect(t, dsn)
	s := pgx.Identifier{schema}.Sanitize()
	stmts := []string{fmt.Sprintf(`CREATE FUNCTION %[1]s.sp_fire(what text) RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog AS $$
	BEGIN
	  PERFORM pg_catalog.pg_notify('sp_fired', what);
	  BEGIN
	    INSERT INTO public.sp_fired (what) VALUES (what);
	  EXCEPTION WHEN OTHERS THEN NULL; -- a read-only transaction: the notification tells
	  END;
	END $$`, s)}
	for _, f := range trapFuncs {
		what := schema + "." + f.sig
		ret := "RETURN " + f.call + ";"
		if strings.HasPrefix(f.ret, "SETOF") {
			ret = "RETURN QUERY SELECT " + f.call + ";"
		} else if f.ret == "void" {
			ret = "PERFORM " + f.call + ";"
		}
		stmts = append(stmts, fmt.Sprintf(`CREATE FUNCTION %s.%s RETURNS %s LANGUAGE plpgsql AS $$
		BEGIN PERFORM %s.sp_fire(%s); %s END $$`, s, f.sig, f.ret, s, quoteLiteral(what), ret))
	}
	for i, o := range trapOps {
		what := fmt.Sprintf("%s.%s(%s, %s)", schema, o[0], o[1], o[2])
		fn := fmt.Sprintf("%s.sp_op%d", s, i)
		stmts = append(stmts,
			fmt.Sprintf(`CREATE FUNCTION %s(l %s, r %s) RETURNS boolean LANGUAGE plpgsql AS $$
			BEGIN PERFORM %s.sp_fire(%s); RETURN l OPERATOR(pg_catalog.%s) r; END $$`, fn, o[1], o[2], s, quoteLiteral(what), o[0]),
			fmt.Sprintf(`CREATE OPERATOR %s.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)`, s, o[0], o[1], o[2], fn))
	}
	for i, a := range trapAggs {
		what := fmt.Sprintf("%s.%s(%s)", schema, a.name, a.arg)
		fn := fmt.Sprintf("%s.sp_agg%d", s, i)
		stmts = append(stmts,
			fmt.Sprintf(`CREATE FUNCTION %s(s %s, v %s) RETURNS %s LANGUAGE plpgsql AS $$
			BEGIN PERFORM %s.sp_fire(%s); RETURN %s; END $$`, fn, a.stype, a.arg, a.stype, s, quoteLiteral(what), a.step),
			fmt.Sprintf(`CREATE AGGREGATE %s.%s(%s) (SFUNC = %s, STYPE = %s, INITCOND = %s)`, s, a.name, a.arg, fn, a.stype, quoteLiteral(a.init)))
	}
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("plant in %s: %v\n%s", schema, err, q)
		}
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// firedLog collects what the traps recorded.
type firedLog struct {
	admin  *pgx.Conn // reads and clears public.sp_fired
	listen *pgx.Conn // LISTENs on sp_fired
}

// take returns what fired since the last take, and forgets it.
func (f *firedLog) take(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		n, err := f.listen.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		seen[n.Payload] = true
	}
	rows, err := f.admin.Query(ctx, "DELETE FROM public.sp_fired RETURNING what")
	if err != nil {
		t.Fatal(err)
	}
	whats, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range whats {
		seen[w] = true
	}
	var out []string
	for w := range seen {
		out = append(out, w)
	}
	return out
}

// runIn runs the command line in this process (runContext) until it returns or
// ctx ends, and returns its exit code and output.
func runIn(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runContext(ctx, args, &o, &e)
	return code, o.String(), e.String()
}

// TestSearchPathHostile plants exact-type overloads of the functions, aggregates
// and operators pgleader's statements use in public and in the "$user" schema of
// every role that runs a command, then runs the commands in this process as
// those roles: the superuser (migrate, status, history, top, resign, slots, scope bind/unbind), a
// node (node in lock mode and in lease mode, directly and through PgBouncer in
// transaction mode, with the fenced-write workload), a reader (status, history,
// top, exporter) and an operator (resign, handover, scope retire/bindings/key). No planted
// object may run.
func TestSearchPathHostile(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t) // not migrated yet: the traps are there before migrate runs
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	super := u.User.Username()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "sp" + hex.EncodeToString(b)
	role := func(r string) string { return prefix + "_" + r }
	as := func(r string) string {
		v := *u
		v.User = url.User(r)
		return v.String()
	}
	admin := pgtest.Connect(t, dsn)
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity WHERE usename::text LIKE $1", prefix+"\\_%")
		for _, r := range []string{"node", "reader", "operator", "squat"} {
			_, _ = c.Exec(ctx, fmt.Sprintf("DROP OWNED BY %s CASCADE", role(r)))
			_, _ = c.Exec(ctx, fmt.Sprintf("DROP ROLE IF EXISTS %s", role(r)))
		}
	})
	squat := role("squat")
	mustExec(fmt.Sprintf("CREATE ROLE %s LOGIN", squat)) // CONNECT (PUBLIC has it) and nothing else
	mustExec(fmt.Sprintf("GRANT CREATE ON SCHEMA public TO %s", squat))
	mustExec("CREATE TABLE public.sp_fired (what text NOT NULL, by_role text NOT NULL DEFAULT session_user)")
	mustExec("GRANT INSERT ON public.sp_fired TO PUBLIC")
	// The "$user" schema of a role: created for it by the squatter's friend (the
	// superuser here), owned by the squatter.
	userSchema := func(r string) {
		t.Helper()
		mustExec(fmt.Sprintf("CREATE SCHEMA %s AUTHORIZATION %s", pgx.Identifier{r}.Sanitize(), squat))
		mustExec(fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO PUBLIC", pgx.Identifier{r}.Sanitize()))
		plantTraps(t, as(squat), r)
	}
	plantTraps(t, as(squat), "public")
	userSchema(super)

	listen := pgtest.Connect(t, dsn)
	if _, err := listen.Exec(ctx, "LISTEN sp_fired"); err != nil {
		t.Fatal(err)
	}
	fired := &firedLog{admin: admin, listen: listen}
	// A positive control: an unqualified call in a session with the default path
	// does run a trap, so the log works.
	var n, m int
	var eq bool
	if err := admin.QueryRow(ctx, `SELECT cardinality(ARRAY['a']::text[]), (SELECT count(x) FROM (VALUES ('a'::text)) v(x)), 1::float8 = 1`).
		Scan(&n, &m, &eq); err != nil || n != 1 || m != 1 || !eq {
		t.Fatalf("control: %d %d %v, %v", n, m, eq, err)
	}
	if got := fired.take(t); len(got) != 3 {
		t.Fatalf("control: a function, an aggregate and an operator planted in %s should have recorded themselves, got %v", super, got)
	}

	var failed bool
	check := func(what string, code int, stdout, stderr string, okCodes ...int) {
		t.Helper()
		if got := fired.take(t); len(got) > 0 {
			failed = true
			t.Errorf("%s: planted objects ran: %s", what, strings.Join(got, ", "))
		}
		for _, c := range append(okCodes, 0) {
			if code == c {
				return
			}
		}
		t.Errorf("%s: exit %d\n%s%s", what, code, stdout, stderr)
	}
	cmd := func(what, dsn string, args []string, okCodes ...int) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		code, o, e := runIn(cctx, append(args, "--dsn", dsn)...)
		check(what, code, o, e, okCodes...)
	}

	cmd("migrate as superuser", dsn, []string{"migrate"})

	// The operator has no "$user" schema: public's traps are the ones in its path
	// (a "$user" schema comes before public and hides them).
	for _, r := range []struct{ name, in string }{{"node", "pgleader_node"}, {"reader", "pgleader_reader"}, {"operator", "pgleader_operator"}} {
		mustExec(fmt.Sprintf("CREATE ROLE %s LOGIN IN ROLE %s", role(r.name), r.in))
		if r.name != "operator" {
			userSchema(role(r.name))
		}
	}
	// The demo workload's table is the application's: granted like one.
	mustExec(fmt.Sprintf("GRANT INSERT ON pgleader.demo_actions TO %s", role("node")))
	mustExec(fmt.Sprintf("GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgleader TO %s", role("node")))
	fired.take(t) // setup statements of this test

	// node runs `pgleader node` as the role of dsn until it leads the scope and its
	// workload has written once, then stops it as SIGTERM would.
	node := func(what, dsn, scope, id string, extra ...string) {
		t.Helper()
		nctx, cancel := context.WithCancel(ctx)
		type result struct {
			code           int
			stdout, stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, o, e := runIn(nctx, append([]string{"node", "--dsn", dsn, "--scope", scope, "--id", id,
				"--work-interval", "50ms", "--log-level", "warn"}, extra...)...)
			done <- result{code, o, e}
		}()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var wrote bool
			err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgleader.demo_actions WHERE node_id OPERATOR(pg_catalog.=) $1::text)`, id).Scan(&wrote)
			if err != nil {
				t.Fatal(err)
			}
			if wrote {
				break
			}
			select {
			case r := <-done:
				cancel()
				check(what, r.code, r.stdout, r.stderr)
				t.Fatalf("%s: node %s stopped before its first fenced write: exit %d\n%s", what, id, r.code, r.stderr)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				cancel()
				r := <-done
				t.Fatalf("%s: node %s made no fenced write within 15 s\n%s", what, id, r.stderr)
			}
		}
		cancel()
		r := <-done
		check(what, r.code, r.stdout, r.stderr, 1, 130, 143)
	}

	// candidate runs `pgleader node` as the role of dsn in the background until
	// stop is called, and waits until it is registered.
	candidate := func(dsn, scope, id string) (stop func()) {
		nctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runIn(nctx, "node", "--dsn", dsn, "--scope", scope, "--id", id, "--work-interval", "100ms", "--log-level", "warn")
		}()
		pgtest.WaitFor(t, id+" registered", 15*time.Second, func() bool {
			var ok bool
			_ = admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgleader.nodes WHERE node_id OPERATOR(pg_catalog.=) $1::text)`, id).Scan(&ok)
			return ok
		})
		return func() { cancel(); <-done }
	}

	node("node (lock mode) as node", as(role("node")), "sp-lock", "sp-lock-1")
	node("node (lease mode) as node", as(role("node")), "sp-lease", "sp-lease-1", "--mode", "lease")
	bouncer := pgtest.NewBouncer(t, dsn, "transaction") // the bouncer logs in to PostgreSQL as the superuser
	bounced := func(r string) string {
		v, err := url.Parse(bouncer)
		if err != nil {
			t.Fatal(err)
		}
		v.User = url.User(r)
		return v.String()
	}
	node("node (lease mode, PgBouncer transaction pooling) as node", bounced(role("node")),
		"sp-bounce", "sp-bounce-1", "--mode", "lease")

	stop1 := candidate(as(role("node")), "sp", "sp-1")
	pgtest.WaitFor(t, "a leader", 15*time.Second, func() bool {
		var ok bool
		_ = admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgleader.leader_state WHERE scope OPERATOR(pg_catalog.=) 'sp'
		    AND holder IS NOT NULL AND released_at IS NULL)`).Scan(&ok)
		return ok
	})
	stop2 := candidate(as(role("node")), "sp", "sp-2")
	fired.take(t) // the candidates' own statements are checked by node above
	for _, r := range []struct{ who, dsn string }{{"reader", as(role("reader"))}, {"superuser", dsn}} {
		cmd("status -o json as "+r.who, r.dsn, []string{"status", "-o", "json"})
		cmd("history as "+r.who, r.dsn, []string{"history", "--since", "1h", "--scope", "sp"})
		cmd("top --once as "+r.who, r.dsn, []string{"top", "--once"})
	}
	scrape(t, "exporter as reader", as(role("reader")), check)
	var holder string
	if err := admin.QueryRow(ctx, `SELECT holder FROM pgleader.leader_state WHERE scope OPERATOR(pg_catalog.=) 'sp'`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	to := map[string]string{"sp-1": "sp-2", "sp-2": "sp-1"}[holder]
	cmd("handover as operator", as(role("operator")), []string{"handover", "sp", "--to", to, "--timeout", "15s"})
	cmd("resign as operator", as(role("operator")), []string{"resign", "sp"}, 3)
	cmd("resign as superuser", dsn, []string{"resign", "sp"}, 3)
	for _, args := range [][]string{{"status", "-o", "json"}, {"history", "--scope", "sp"}, {"top", "--once"}, {"resign", "sp"}} {
		cmd(strings.Join(args, " ")+" through PgBouncer (transaction pooling)", bounced(role("operator")), args, 3)
	}
	cmd("scope retire as operator", as(role("operator")), []string{"scope", "retire", "sp-lock"})
	cmd("scope bind as superuser", dsn, []string{"scope", "bind", "sp-bound", "--role", role("node")})
	cmd("scope bind --prefix as superuser", dsn, []string{"scope", "bind", "--prefix", "sp-b/", "--role", role("node")})
	cmd("scope bindings as operator", as(role("operator")), []string{"scope", "bindings", "-o", "json"})
	cmd("scope key as operator", as(role("operator")), []string{"scope", "key", "sp-keyed", "4242"})
	cmd("scope unbind as superuser", dsn, []string{"scope", "unbind", "sp-bound"})
	cmd("slots list -o json as superuser", dsn, []string{"slots", "list", "-o", "json"})
	cmd("slots drop as superuser", dsn, []string{"slots", "drop", "sp-none"}, 2) // no such slot: the lookup ran
	stop1()
	stop2()
	if failed {
		t.Log("a planted object ran: some session resolved names through public or \"$user\" (see internal/pgsession)")
	}
}

// scrape runs `pgleader exporter` as the role of dsn until one scrape of
// /metrics has answered 200 with pgleader's metrics, then stops it.
func scrape(t *testing.T, what, dsn string, check func(what string, code int, stdout, stderr string, okCodes ...int)) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var code int
	var stdout, stderr string
	wg.Go(func() {
		code, stdout, stderr = runIn(ctx, "exporter", "--dsn", dsn, "--listen", addr, "--interval", "200ms", "--source", "notify")
	})
	var body string
	pgtest.WaitFor(t, what+": a scrape with the scopes", 15*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `scope="sp"`)
	})
	cancel()
	wg.Wait()
	check(what, code, stdout, stderr, 1, 130, 143)
}
