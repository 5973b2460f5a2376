package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestLockModeRefusesTransactionPooler: behind PgBouncer in transaction or
// statement mode, Start refuses lock mode at once (ErrPooler), naming the pooling
// and the fixes.
func TestLockModeRefusesTransactionPooler(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	for _, mode := range []string{"transaction", "statement"} {
		t.Run(mode, func(t *testing.T) {
			via := pgtest.NewBouncer(t, dsn, mode)
			e, err := election.New(testnode.FastConfig(via, "a", "billing"))
			if err != nil {
				t.Fatal(err)
			}
			err = e.Start(context.Background())
			if !errors.Is(err, election.ErrPooler) {
				t.Fatalf("Start through a %s pooler = %v, want ErrPooler", mode, err)
			}
			for _, want := range []string{mode + " ", "lease", "DSN"} {
				if !containsFold(err.Error(), want) {
					t.Errorf("the error does not name %q: %v", want, err)
				}
			}
		})
	}
}

// TestLeaseModeThroughPgBouncer: lease mode works through PgBouncer in
// transaction mode: one leader, a resignation moves the scope within a
// heartbeat interval or two, fenced writes through the pooler commit under the
// current term and are refused under an old one, and no two gates overlap.
func TestLeaseModeThroughPgBouncer(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	via := pgtest.NewBouncer(t, dsn, "transaction")
	rec := &recorder{}
	start := func(id string) *testnode.Node {
		c := testnode.FastConfig(via, id, "billing")
		c.Mode = election.ModeLease
		return testnode.Start(t, c, rec.Observe)
	}
	a, b := start("a"), start("b")
	pgtest.WaitFor(t, "a leader", 15*time.Second, func() bool { return a.Leads("billing") || b.Leads("billing") })
	leader, other := a, b
	if b.Leads("billing") {
		leader, other = b, a
	}
	ctx := context.Background()
	tok, err := leader.Scope("billing").Require(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The application's pool through the same pooler (unnamed statements).
	pcfg, err := pgxpool.ParseConfig(via)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	}); err != nil {
		t.Fatalf("FencedTx through PgBouncer under the current term: %v", err)
	}
	if err := leader.Scope("billing").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "the other node to lead", 15*time.Second, func() bool { return other.Leads("billing") })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = election.Fence(ctx, tx, tok)
	_ = tx.Rollback(ctx)
	if !errors.Is(err, election.ErrFenced) {
		t.Fatalf("Fence with the old epoch through PgBouncer = %v, want ErrFenced", err)
	}
	assertNoOverlap(t, rec, "billing")
	var mode string
	if err := pool.QueryRow(ctx, "SELECT mode FROM pgleader.leader_state WHERE scope = 'billing'").Scan(&mode); err != nil || mode != "lease" {
		t.Fatalf("scope mode %q (%v), want lease", mode, err)
	}
}

// TestModesDoNotMix: a lock-mode node refuses to start on a scope that live
// lease-mode nodes campaign for.
func TestModesDoNotMix(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	c := testnode.FastConfig(dsn, "lease-a", "billing")
	c.Mode = election.ModeLease
	a := testnode.Start(t, c)
	pgtest.WaitFor(t, "the lease node leads", 15*time.Second, func() bool { return a.Leads("billing") })
	e, err := election.New(testnode.FastConfig(dsn, "lock-b", "billing"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); !errors.Is(err, election.ErrModeConflict) {
		t.Fatalf("Start of a lock-mode node on a lease-mode scope = %v, want ErrModeConflict", err)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// TestLockModeThroughSessionPooler: behind PgBouncer in session mode, which
// refuses the session settings in the startup packet, lock mode works: the
// settings are applied on the pinned session, and a resignation moves the
// scope as on a direct connection.
func TestLockModeThroughSessionPooler(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	via := pgtest.NewBouncer(t, dsn, "session")
	a := testnode.Start(t, testnode.FastConfig(via, "a", "billing"))
	pgtest.WaitFor(t, "a leads through the session pooler", 15*time.Second, func() bool { return a.Leads("billing") })
	b := testnode.Start(t, testnode.FastConfig(via, "b", "billing"))
	awaitRegistered(t, dsn, "b")
	if err := a.Scope("billing").Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "b leads", 15*time.Second, func() bool { return b.Leads("billing") })
	var lease string
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce(max(s.setting), '') FROM pg_stat_activity a, LATERAL (SELECT 1) x,
		    LATERAL (SELECT setting FROM pg_settings WHERE name = 'idle_session_timeout') s
		    WHERE a.application_name LIKE 'pgleader leadership %'`).Scan(&lease)
	})
	_ = lease // the server's view of another session's setting is not readable; the start-up check verified it
}
