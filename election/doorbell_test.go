package election_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// slowConfig heartbeats every 8 s: a follower that acts well within half of
// that (doorbellDeadline) learned of the change from its doorbell, not from a
// heartbeat.
func slowConfig(dsn, id string, scopes ...string) election.Config {
	cfg := testnode.FastConfig(dsn, id, scopes...)
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 8*time.Second, time.Second
	cfg.TrustWindow, cfg.SessionLease = 10*time.Second, 12*time.Second
	cfg.ResignCooldown = 20 * time.Second
	return cfg
}

// doorbellDeadline is how long a wake-up the doorbell carries may take under
// slowConfig: half a heartbeat interval (a condition's deadline, not a figure).
const doorbellDeadline = 4 * time.Second

// watchesBeacon reports whether node's watch session waits on the beacon of peer.
func watchesBeacon(t *testing.T, dsn, node, peer string) bool {
	t.Helper()
	return queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
		JOIN pgleader.nodes n ON n.node_id = $2 AND ((l.classid::bigint << 32) | l.objid::bigint) = n.beacon_key
		WHERE a.application_name = 'pgleader watch ' || $1`, node, peer) > 0
}

// TestDoorbellWakeUps: with heartbeats 8 s apart, each wake-up the doorbell
// carries arrives within half of that: a node that joins is watched by the node it
// falls after, a release is claimed by a follower, a handover reaches the leader
// and then its target. The nodes log in as a node role, whose sessions the
// owner may signal.
func TestDoorbellWakeUps(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	within := func(what string, ok func() bool) {
		t.Helper()
		pgtest.WaitFor(t, what+" (the doorbell; a heartbeat would take up to 8 s)", doorbellDeadline, ok)
	}
	n1 := testnode.Start(t, slowConfig(as("node"), "db-1", "db"))
	pgtest.WaitFor(t, "db-1 leads", 10*time.Second, func() bool { return n1.Leads("db") })
	n3 := testnode.Start(t, slowConfig(as("node"), "db-3", "db"))
	awaitRegistered(t, dsn, "db-3")
	within("db-1 watches db-3, which joined", func() bool { return watchesBeacon(t, dsn, "db-1", "db-3") })
	n2 := testnode.Start(t, slowConfig(as("node"), "db-2", "db"))
	awaitRegistered(t, dsn, "db-2")
	within("db-1 watches db-2, which joined between it and db-3", func() bool { return watchesBeacon(t, dsn, "db-1", "db-2") })
	pgtest.WaitFor(t, "three ringable doorbells", 10*time.Second, func() bool {
		return queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells WHERE ringable AND node_id LIKE 'db-%'`) == 3
	})
	pgtest.WaitFor(t, "db-2 and db-3 campaign", 10*time.Second, func() bool {
		return watchesBeacon(t, dsn, "db-2", "db-3") && watchesBeacon(t, dsn, "db-3", "db-1")
	})

	ctx := context.Background()
	if err := n1.Scope("db").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	within("a follower leads after db-1 resigned", func() bool { return n2.Leads("db") || n3.Leads("db") })

	leader, target := n2, "db-3"
	if n3.Leads("db") {
		leader, target = n3, "db-2"
	}
	exec(t, as("operator"), `SELECT * FROM pgleader.request_handover('db', $1, 10000, 'test')`, target)
	within("the handover's target leads", func() bool {
		return !leader.Leads("db") && map[string]*testnode.Node{"db-2": n2, "db-3": n3}[target].Leads("db")
	})
}

// TestDoorbellUnavailable: the doorbell of a node that logs in as a superuser
// cannot ring (only a superuser may signal a superuser's session; the owner is
// not one): the node says so once, the table says why, and its heartbeats carry
// its wake-ups — a release is claimed, a handover's target ends its cooldown.
func TestDoorbellUnavailable(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	var said atomic.Int64
	cfg := func(id string) election.Config {
		c := coolingConfig(dsn, id, election.ModeLock)
		c.Logger = slog.New(logCount{prefix: "doorbell unavailable", n: &said})
		return c
	}
	a := testnode.Start(t, cfg("a"))
	pgtest.WaitFor(t, "a leads", 10*time.Second, func() bool { return a.Leads("s") })
	b := testnode.Start(t, cfg("b"))
	awaitRegistered(t, dsn, "b")
	pgtest.WaitFor(t, "both doorbells registered", 10*time.Second, func() bool {
		return queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells`) == 2
	})
	for _, why := range queryStrings(t, dsn, `SELECT coalesce(why_not, 'ringable') FROM pgleader.doorbells`) {
		if !strings.Contains(why, "superuser") {
			t.Errorf("a superuser node's doorbell: %q, want why it cannot ring (a superuser)", why)
		}
	}
	if err := requestHandover(t, dsn, "b"); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "b leads", 5*time.Second, func() bool { return b.Leads("s") })
	if err := requestHandover(t, dsn, "a"); err != nil {
		t.Fatal(err)
	}
	// Well within a's cooldown: its heartbeat's reservation row ended it.
	pgtest.WaitFor(t, "a leads again before its cooldown ends", handoverCooldown/2, func() bool { return a.Leads("s") })
	if n := said.Load(); n != 2 {
		t.Errorf("%d log lines saying the doorbell is unavailable, want one per node (2)", n)
	}
}

// A hostile login against doorbell_register: it registers only its own session,
// for its own live node, and never a session that holds locks.
func TestHostileDoorbellRegister(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	victim := testnode.Start(t, testnode.FastConfig(as("node"), "victim", "bell"))
	pgtest.WaitFor(t, "the victim leading", 10*time.Second, func() bool { return victim.Leads("bell") })
	pgtest.WaitFor(t, "the victim's doorbell", 10*time.Second, func() bool {
		return queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells WHERE node_id = 'victim' AND ringable`) == 1
	})
	watchPID := queryInt(t, dsn, `SELECT backend_pid FROM pgleader.doorbells WHERE node_id = 'victim'`)

	// Another login: not its node.
	refused(t, as("node2"), "PLF12", `SELECT * FROM pgleader.doorbell_register('victim')`)
	// Roles without the node role may not call it at all.
	for _, role := range []string{"reader", "operator", "app", "squat"} {
		refused(t, as(role), "42501", `SELECT * FROM pgleader.doorbell_register('victim')`)
		refused(t, as(role), "42501", `SELECT * FROM pgleader.ring_doorbells(ARRAY['victim'])`)
	}
	refused(t, as("node"), "42501", `SELECT * FROM pgleader.ring_doorbells(ARRAY['victim'])`)
	refused(t, as("node"), "PLF11", "SELECT * FROM pgleader.doorbell_register(E'vic\\ttim')")
	refused(t, as("node"), "PLF12", `SELECT * FROM pgleader.doorbell_register('nobody')`)

	// A node of node2's own, live on one session (beacon and registration):
	// that session, or one holding an advisory lock (a guard), is refused; a
	// session without locks registers itself, and only itself.
	ctx := context.Background()
	lead, err := pgx.Connect(ctx, as("node2"))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close(ctx)
	beacon := int64(0x5eed0001)
	if _, err := lead.Exec(ctx, `SELECT pgleader.session_lock($1)`, beacon); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Exec(ctx, `SELECT pgleader.register_node('own', 'h', 1, 'v', '{own}', 50, 300, 500, $1, 2)`, beacon); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Exec(ctx, `SELECT * FROM pgleader.doorbell_register('own')`); sqlstate(err) != "PLF12" {
		t.Errorf("doorbell_register on the node's leadership session: %v, want SQLSTATE PLF12", err)
	}
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `SELECT pgleader.session_lock(12345)`); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.doorbell_register('own')`); sqlstate(err) != "PLF12" {
			t.Errorf("doorbell_register on a session holding a guard: %v, want SQLSTATE PLF12", err)
		}
		return nil
	})
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		var ok bool
		var self int64
		if err := c.QueryRow(ctx, `SELECT r.ringable, pg_backend_pid() FROM pgleader.doorbell_register('own') r`).Scan(&ok, &self); err != nil {
			return err
		}
		if pid := queryInt(t, dsn, `SELECT backend_pid FROM pgleader.doorbells WHERE node_id = 'own'`); !ok || pid != self {
			t.Errorf("a lock-free session of its own node: ringable %v, pid %d, want true and its own pid %d", ok, pid, self)
		}
		return nil
	})
	if now := queryInt(t, dsn, `SELECT backend_pid FROM pgleader.doorbells WHERE node_id = 'victim'`); now != watchPID {
		t.Errorf("the victim's doorbell moved from backend %d to %d", watchPID, now)
	}
	if !victim.Leads("bell") {
		t.Error("the victim lost its term")
	}
}

// A hostile login against watch: only the registered watch session of a node
// runs it, bounded.
func TestHostileWatch(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	victim := testnode.Start(t, testnode.FastConfig(as("node"), "victim", "bell"))
	pgtest.WaitFor(t, "the victim's doorbell", 10*time.Second, func() bool {
		return queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells WHERE node_id = 'victim'`) == 1
	})
	for _, login := range []string{"node", "node2"} { // its own login on another session, another login
		refused(t, as(login), "PLF12", `SELECT * FROM pgleader.watch('victim', NULL, 10, '{}', true)`)
	}
	for _, role := range []string{"reader", "operator", "app", "squat"} {
		refused(t, as(role), "42501", `SELECT * FROM pgleader.watch('victim', NULL, 10, '{}', true)`)
	}
	// Bounds, on a registered watch session of node2's own node.
	registerByHand(t, as("node2"), "own", "own", 0x5eed0002)
	withConn(t, as("node2"), func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `SELECT * FROM pgleader.doorbell_register('own')`); err != nil {
			return err
		}
		for _, q := range []string{
			`SELECT * FROM pgleader.watch('own', NULL, 0, '{}', true)`,
			`SELECT * FROM pgleader.watch('own', NULL, 60001, '{}', true)`,
			`SELECT * FROM pgleader.watch('own', NULL, 10, ARRAY(SELECT g FROM generate_series(1, 10001) g), true)`,
			`SELECT * FROM pgleader.watch('own', NULL, 10, '{}', NULL)`,
		} {
			if _, err := c.Exec(ctx, q); sqlstate(err) != "PLF11" {
				t.Errorf("%s: %v, want SQLSTATE PLF11", q, err)
			}
		}
		// Its answer concerns its own node only: the peer (the victim, the
		// only other live node), nothing of the victim's scope.
		rows, err := c.Query(ctx, `SELECT kind, coalesce(scope, ''), coalesce(node, '') FROM pgleader.watch('own', NULL, 10, '{}', true)`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var kind, scope, node string
			if err := rows.Scan(&kind, &scope, &node); err != nil {
				return err
			}
			if scope == "bell" || (kind != "peer" && kind != "wait") {
				t.Errorf("watch of node2's node returned %s %s %s", kind, scope, node)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// A bare wait (no re-read) after a wait that ran out, with no ring in
		// between, answers with its wait alone, though the peer row is unseen.
		// The first bare wait of a session reads first (no wait of the session
		// began before it), as does one after a ring (TestWatchReadsARingInItsStatement).
		var hashes []int32
		if err := c.QueryRow(ctx, `SELECT array_agg(hash) FROM pgleader.watch('own', NULL, 10, '{}', true)`).Scan(&hashes); err != nil {
			return err
		}
		var kinds []string
		if err := c.QueryRow(ctx, `SELECT array_agg(kind) FROM pgleader.watch('own', NULL, 10, $1, true)`, hashes).Scan(&kinds); err != nil {
			return err
		}
		if len(kinds) != 1 || kinds[0] != "wait" {
			t.Errorf("a re-read with nothing new returned %v, want [wait]", kinds)
		}
		if err := c.QueryRow(ctx, `SELECT array_agg(kind) FROM pgleader.watch('own', NULL, 10, '{}', false)`).Scan(&kinds); err != nil {
			return err
		}
		if len(kinds) != 1 || kinds[0] != "wait" {
			t.Errorf("a bare wait returned %v, want [wait]", kinds)
		}
		return nil
	})
	if !victim.Leads("bell") {
		t.Error("the victim lost its term")
	}
}

// A doorbell rings only the watch session it recorded: a pid whose start, login
// or application name differ (a reused pid, another session) is never
// signalled. The rows are forged here as the owner would see a stale one; no
// role but the owner may write them.
func TestHostileDoorbellRingsOnlyWatchSessions(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	n := testnode.Start(t, testnode.FastConfig(as("node"), "rung", "ring"))
	pgtest.WaitFor(t, "rung leads, its doorbell registered", 10*time.Second, func() bool {
		return n.Leads("ring") && queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells WHERE node_id = 'rung' AND ringable`) == 1
	})
	for _, role := range []string{"node", "node2", "operator"} {
		refused(t, as(role), "42501", `UPDATE pgleader.doorbells SET backend_pid = 1`)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		login  string // the victim session's login
		forge  string // how the row points at it
		signal bool
	}{
		{"AnotherLoginSameStart", "node2", "backend_start = a.backend_start, application_name = a.application_name", false},
		{"ReusedPid", "node", "backend_start = a.backend_start - interval '1 second', application_name = a.application_name", false},
		{"AnotherApplication", "node", "backend_start = a.backend_start", false},
		{"TheRecordedSession", "node", "backend_start = a.backend_start, application_name = a.application_name", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgtest.WaitFor(t, "rung leads", 10*time.Second, func() bool { return n.Leads("ring") })
			victim, err := pgx.Connect(ctx, as(tc.login))
			if err != nil {
				t.Fatal(err)
			}
			defer victim.Close(ctx)
			pid := victim.PgConn().PID()
			slept := make(chan error, 1)
			go func() { _, err := victim.Exec(ctx, "SELECT pg_sleep(3)"); slept <- err }()
			pgtest.WaitFor(t, "the victim's statement running", 5*time.Second, func() bool {
				return queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid) == 1
			})
			exec(t, dsn, `UPDATE pgleader.doorbells d SET backend_pid = a.pid, `+tc.forge+`
				FROM pg_stat_activity a WHERE a.pid = $1 AND d.node_id = 'rung'`, pid)
			exec(t, as("operator"), `SELECT pgleader.request_resign('ring', NULL, 'test')`)
			err = <-slept
			if got := sqlstate(err) == "57014"; got != tc.signal {
				t.Errorf("the victim's statement ended with %v: signalled %v, want %v", err, got, tc.signal)
			}
		})
	}
}

// A node login cannot make the schema ring for a node that lives: a claim that
// announces a live node as lost (node_lost names it on the caller's word) rings
// no doorbell; the same doorbell rings when that node really releases. The
// doorbell rung here is a session of the victim's login that registered itself
// as the watch session of a node of its own (a candidate of the scope),
// sleeping: a signal would end its statement with 57014.
func TestHostileAnnounceRingsNoLiveNode(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	rung := testnode.Start(t, testnode.FastConfig(as("node"), "held", "ann"))
	pgtest.WaitFor(t, "held leads", 10*time.Second, func() bool { return rung.Leads("ann") })

	ctx := context.Background()
	registerByHand(t, as("node"), "cand", "ann", 0x5eed0003)
	bell, err := pgx.Connect(ctx, as("node"))
	if err != nil {
		t.Fatal(err)
	}
	defer bell.Close(ctx)
	if _, err := bell.Exec(ctx, `SELECT * FROM pgleader.doorbell_register('cand')`); err != nil {
		t.Fatal(err)
	}
	if ok := queryInt(t, dsn, `SELECT count(*) FROM pgleader.doorbells WHERE node_id = 'cand' AND ringable`); ok != 1 {
		t.Fatalf("cand's doorbell ringable: %d rows, want 1", ok)
	}
	// sleeps runs one statement on the doorbell's session while do runs, and
	// reports whether a signal ended it.
	sleeps := func(what string, do func()) bool {
		t.Helper()
		slept := make(chan error, 1)
		go func() { _, err := bell.Exec(ctx, "SELECT pg_sleep(2)"); slept <- err }()
		pid := bell.PgConn().PID()
		pgtest.WaitFor(t, what+": the doorbell's statement running", 5*time.Second, func() bool {
			return queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid) == 1
		})
		do()
		err := <-slept
		if err != nil && sqlstate(err) != "57014" {
			t.Fatalf("%s: %v", what, err)
		}
		return sqlstate(err) == "57014"
	}

	hostile := registerByHand(t, as("node2"), "own", "ann", 0x5eed0004)
	if sleeps("a claim announcing held lost", func() {
		if _, err := hostile.Exec(ctx, `SELECT * FROM pgleader.claim_scopes('own', 'h', 1, 50, 100, 300, 500, '{ann}', ARRAY[pgleader.lock_key('ann')], 'held')`); err != nil {
			t.Errorf("the hostile claim: %v", err)
		}
	}) {
		t.Error("a claim announcing a live node as lost rang its scope's candidates")
	}
	if !rung.Leads("ann") {
		t.Error("held lost its term to a claim")
	}
	if !sleeps("held resigns", func() {
		if err := rung.Scope("ann").Resign(ctx); err != nil {
			t.Error(err)
		}
	}) {
		t.Error("a release did not ring the doorbell of its scope's candidate")
	}
}

// TestWatchReadsARingInItsStatement: a ring that finds the watch in its wait,
// while the ringer's transaction is still open, is answered in the same
// statement: the READ after the ringer's commit comes back as rows, not as a
// cancelled statement the caller must follow with another call. The caller's own
// cancel request still ends the statement (57014).
func TestWatchReadsARingInItsStatement(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	_, as := loginRoles(t, dsn)
	held := testnode.Start(t, testnode.FastConfig(as("node"), "held", "rs"))
	pgtest.WaitFor(t, "held leads", 10*time.Second, func() bool { return held.Leads("rs") })
	ctx := context.Background()
	registerByHand(t, as("node"), "cand", "rs", 0x5eed0005)
	bell, err := pgx.Connect(ctx, as("node"))
	if err != nil {
		t.Fatal(err)
	}
	defer bell.Close(ctx)
	if _, err := bell.Exec(ctx, `SELECT * FROM pgleader.doorbell_register('cand')`); err != nil {
		t.Fatal(err)
	}
	type row struct {
		kind  string
		scope *string
	}
	watch := func(seen []int32, timeoutMS int) ([]row, []int32, error) {
		rows, err := bell.Query(ctx, `SELECT kind, scope, hash FROM pgleader.watch('cand', NULL, $1, $2, $3)`, timeoutMS, seen, seen == nil)
		if err != nil {
			return nil, nil, err
		}
		var out []row
		var hashes []int32
		var r row
		var h *int32
		_, err = pgx.ForEachRow(rows, []any{&r.kind, &r.scope, &h}, func() error {
			out = append(out, r)
			if h != nil {
				hashes = append(hashes, *h)
			}
			return nil
		})
		return out, hashes, err
	}
	_, seen, err := watch(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(what string) {
		pid := bell.PgConn().PID()
		pgtest.WaitFor(t, what+": the watch waiting", 5*time.Second, func() bool {
			return queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid) == 1
		})
	}
	type answer struct {
		rows []row
		seen []int32
		err  error
		took time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		t0 := time.Now()
		rows, seen, err := watch(seen, 10000)
		got <- answer{rows, seen, err, time.Since(t0)}
	}()
	waiting("a release")
	if err := held.Scope("rs").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("the rung watch ended with %v, want rows in the same statement", a.err)
	}
	claim := false
	for _, r := range a.rows {
		claim = claim || (r.kind == "claim" && r.scope != nil && *r.scope == "rs")
	}
	if !claim || a.took > 5*time.Second {
		t.Fatalf("the rung watch returned %+v after %v, want a claim row for rs at once", a.rows, a.took)
	}
	go func(seen []int32) {
		_, _, err := watch(seen, 10000)
		got <- answer{err: err}
	}(a.seen)
	waiting("the caller's cancel")
	if err := bell.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-got; sqlstate(a.err) != "57014" {
		t.Fatalf("the watch cancelled by its caller ended with %v, want 57014", a.err)
	}

	// A ring that finds the session idle between a slice that ran out and the
	// bare wait after it is not signalled (the server would ignore it), but the
	// bare wait finds the row's new locker and reads first.
	pgtest.WaitFor(t, "held leads again", 10*time.Second, func() bool { return held.Leads("rs") })
	if _, seen, err = watch(nil, 1); err != nil {
		t.Fatal(err)
	}
	if rows, _, err := watch(seen, 1); err != nil || len(rows) != 1 || rows[0].kind != "wait" {
		t.Fatalf("a bare wait of 1 ms: %+v, %v; want one wait row", rows, err)
	}
	if err := held.Scope("rs").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	rows, _, err := watch(seen, 10000)
	claim = false
	for _, r := range rows {
		claim = claim || (r.kind == "claim" && r.scope != nil && *r.scope == "rs")
	}
	if err != nil || !claim || time.Since(t0) > 5*time.Second {
		t.Fatalf("the bare wait after a ring that found the session idle: %+v, %v after %v; want a claim row for rs at once", rows, err, time.Since(t0))
	}
}

// registerByHand registers node id, a candidate of scope, on a leadership
// session of its own under dsn's login (its beacon held, as an engine's), and
// returns that session, closed at the test's end.
func registerByHand(t *testing.T, dsn, id, scope string, beacon int64) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c := pgtest.Connect(t, dsn)
	if _, err := c.Exec(ctx, `SELECT pgleader.session_lock($1)`, beacon); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SELECT pgleader.register_node($1, 'h', 1, 'v', ARRAY[$2], 50, 300, 500, $3, 2)`, id, scope, beacon); err != nil {
		t.Fatal(err)
	}
	return c
}

// logCount counts the log records whose message starts with prefix.
type logCount struct {
	prefix string
	n      *atomic.Int64
}

func (h logCount) Enabled(context.Context, slog.Level) bool { return true }
func (h logCount) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.n.Add(1)
	}
	return nil
}
func (h logCount) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCount) WithGroup(string) slog.Handler      { return h }
