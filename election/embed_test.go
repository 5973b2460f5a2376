package election_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestStartErrors: what keeps an Elector from campaigning comes back from Start
// promptly, with its cause intact (errors.As finds the server's error), and Wait
// reports it too.
func TestStartErrors(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	bare := pgtest.DSN(t) // no schema
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	for _, tc := range []struct {
		name  string
		dsn   string
		want  error
		check func(error) bool
	}{
		{"UnknownRole", withUser(t, dsn, "nosuchuser"), election.ErrUnreachable,
			func(err error) bool { var pe *pgconn.PgError; return errors.As(err, &pe) && pe.Code == "28000" }},
		{"Refused", "postgres://postgres@127.0.0.1:" + itoa(refusedPort) + "/x?connect_timeout=2", election.ErrUnreachable,
			func(err error) bool { return errors.Is(err, syscallECONNREFUSED) }},
		{"NoSchema", bare, election.ErrSchemaMissing, nil},
		{"NoDatabase", strings.Replace(dsn, "/"+cfg.Database, "/nosuchdb", 1), election.ErrUnreachable,
			func(err error) bool { var pe *pgconn.PgError; return errors.As(err, &pe) && pe.Code == "3D000" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := election.New(testnode.FastConfig(tc.dsn, "", "billing"))
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = e.Start(context.Background())
			if !errors.Is(err, tc.want) {
				t.Fatalf("Start = %v, want %v", err, tc.want)
			}
			if tc.check != nil && !tc.check(err) {
				t.Fatalf("Start = %v: the cause is not reachable through errors.As/Is", err)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("Start took %v to fail", took)
			}
			if werr := e.Wait(); werr != err {
				t.Fatalf("Wait = %v, want Start's error", werr)
			}
			if err := e.Start(context.Background()); !errors.Is(err, election.ErrClosed) {
				t.Fatalf("second Start = %v, want ErrClosed", err)
			}
		})
	}
}

// TestDefaultsAndConnConfig: without a NodeID the node campaigns as
// DefaultNodeID's form; a ConnConfig's own DialFunc is used for every session.
func TestDefaultsAndConnConfig(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	base := cc.DialFunc
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return base(ctx, network, addr)
	}
	c := testnode.FastConfig("", "", "billing")
	c.ConnConfig = cc
	n := testnode.Start(t, c)
	pgtest.WaitFor(t, "leadership", 15*time.Second, func() bool { return n.Leads("billing") })
	id := n.NodeID()
	if parts := strings.Split(id, "-"); len(parts) < 3 || len(parts[len(parts)-1]) != 6 {
		t.Fatalf("default node id %q, want <hostname>-<pid>-<6 hex>", id)
	}
	if got := queryString(t, dsn, "SELECT holder FROM pgleader.leader_state WHERE scope = 'billing'"); got != id {
		t.Fatalf("holder %q, want %q", got, id)
	}
	if d := dials.Load(); d < 3 {
		t.Fatalf("the ConnConfig's DialFunc was used %d times, want every session (≥ 3)", d)
	}
}

// TestFencedTx: commits under a valid term; refused (ErrFenced, audited) after a
// takeover; a transaction idle longer than FencedTxIdleTimeout fails with
// ErrFencedTxIdle; fn's own error comes back as it is.
func TestFencedTx(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	exec(t, dsn, "CREATE TABLE work (epoch bigint NOT NULL, note text)")
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := testnode.FastConfig(dsn, "a", "billing")
	c.FencedTxIdleTimeout = 150 * time.Millisecond
	a := testnode.Start(t, c)
	pgtest.WaitFor(t, "a leads", 15*time.Second, func() bool { return a.Leads("billing") })
	tok, err := a.Scope("billing").Require(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	insert := func(note string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO work VALUES ($1, $2)", tok.Epoch, note)
			return err
		}
	}
	if err := election.FencedTx(ctx, pool, tok, insert("committed")); err != nil {
		t.Fatalf("FencedTx under a valid term: %v", err)
	}
	boom := errors.New("boom")
	if err := election.FencedTx(ctx, pool, tok, func(context.Context, pgx.Tx) error { return boom }); err != boom {
		t.Fatalf("FencedTx = %v, want fn's error as it is", err)
	}
	err = election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		time.Sleep(400 * time.Millisecond) // an API call, say, longer than the idle limit
		_, err := tx.Exec(ctx, "INSERT INTO work VALUES ($1, 'idle')", tok.Epoch)
		return err
	})
	if !errors.Is(err, election.ErrFencedTxIdle) {
		t.Fatalf("FencedTx idle past the limit = %v, want ErrFencedTxIdle", err)
	}

	// Another node takes over: the old token's write is refused and audited.
	b := testnode.Start(t, testnode.FastConfig(dsn, "b", "billing"))
	awaitRegistered(t, dsn, "b")
	if err := a.Scope("billing").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "b leads", 15*time.Second, func() bool { return b.Leads("billing") })
	stale := tok
	err = election.FencedTx(ctx, pool, stale, insert("stale"))
	if !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("FencedTx with a token whose gate closed = %v, want ErrNotLeader", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = election.Fence(ctx, tx, stale)
	_ = tx.Rollback(ctx)
	if !errors.Is(err, election.ErrFenced) {
		t.Fatalf("Fence with the old epoch = %v, want ErrFenced", err)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM work"); n != 1 {
		t.Fatalf("%d rows written, want 1 (only the committed one)", n)
	}
}

// TestFenceSQLTx: database/sql transactions are fenced the same way (pgx's
// stdlib driver here).
func TestFenceSQLTx(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	a := testnode.Start(t, testnode.FastConfig(dsn, "a", "billing"))
	pgtest.WaitFor(t, "a leads", 15*time.Second, func() bool { return a.Leads("billing") })
	ctx := context.Background()
	tok, err := a.Scope("billing").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fence := func() error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		return election.FenceSQLTx(ctx, tx, tok)
	}
	if err := fence(); err != nil {
		t.Fatalf("FenceSQLTx under a valid term: %v", err)
	}
	b := testnode.Start(t, testnode.FastConfig(dsn, "b", "billing"))
	awaitRegistered(t, dsn, "b")
	if err := a.Scope("billing").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "b leads", 15*time.Second, func() bool { return b.Leads("billing") })
	if err := fence(); !errors.Is(err, election.ErrFenced) {
		t.Fatalf("FenceSQLTx with the old epoch = %v, want ErrFenced", err)
	}
}

// TestHealthHandler: 200 with the scope's role once the node heartbeats; 503
// after it stopped.
func TestHealthHandler(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	n := testnode.Start(t, testnode.FastConfig(dsn, "a", "billing"))
	pgtest.WaitFor(t, "a leads", 15*time.Second, func() bool { return n.Leads("billing") })
	pgtest.WaitFor(t, "a healthy heartbeat", 15*time.Second, func() bool { return n.Health().Healthy })
	rec := httptest.NewRecorder()
	n.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"role":"leader"`) || !strings.Contains(rec.Body.String(), `"scope":"billing"`) {
		t.Fatalf("GET /readyz while leading: %d %s", rec.Code, rec.Body)
	}
	n.Stop()
	rec = httptest.NewRecorder()
	n.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"running":false`) {
		t.Fatalf("GET /readyz after stop: %d %s", rec.Code, rec.Body)
	}
}

// withUser returns dsn with its user replaced.
func withUser(t testing.TB, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

var syscallECONNREFUSED = syscall.ECONNREFUSED

func itoa(n int) string { return strconv.Itoa(n) }
