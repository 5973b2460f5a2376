package election_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// manyScopes returns n scope names unique to the test.
func manyScopes(t testing.TB, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", t.Name(), i)
	}
	return out
}

// connectionsOf counts the server connections of each node, by application_name
// ("pgleader <role> <node>").
func connectionsOf(t testing.TB, dsn string, ids ...string) map[string]int {
	t.Helper()
	got := map[string]int{}
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		for _, id := range ids {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			        WHERE application_name LIKE 'pgleader %' AND split_part(application_name, ' ', 3) = $1`, id).Scan(&n); err != nil {
				return err
			}
			got[id] = n
		}
		return nil
	})
	return got
}

// Four connections per node, whatever the number of scopes; every scope led once;
// the node that leads most scopes killed (its leadership backend terminated) → every
// one of them led again by the others, in batches, with dense epochs.
func TestConnectionEconomy(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	scopes := manyScopes(t, 300)
	ids := []string{"econ-a", "econ-b", "econ-c"}
	var nodes []*testnode.Node
	for _, id := range ids {
		nodes = append(nodes, testnode.Start(t, testnode.FastConfig(dsn, id, scopes...)))
	}
	ledBy := func() map[string]int {
		m := map[string]int{}
		for _, s := range scopes {
			for _, l := range leaders(nodes, s) {
				m[l.NodeID()]++
			}
		}
		return m
	}
	total := func(m map[string]int) int {
		n := 0
		for _, v := range m {
			n += v
		}
		return n
	}
	pgtest.WaitFor(t, "every scope led by exactly one node", 15*time.Second, func() bool { return total(ledBy()) == len(scopes) })

	t.Run("ThreeConnectionsPerNode", func(t *testing.T) {
		// Give every node time to open its watch connection and settle.
		pgtest.WaitFor(t, "every node's three sessions", 5*time.Second, func() bool {
			for _, n := range connectionsOf(t, dsn, ids...) {
				if n != 3 {
					return false
				}
			}
			return true
		})
		for id, n := range connectionsOf(t, dsn, ids...) {
			if n != 3 {
				t.Errorf("%s has %d server connections, want 3 (leadership, guard, watch)", id, n)
			}
		}
		// Followers hold no lock on the scopes they follow: one exclusive lock per
		// scope in the whole database, and no waiting or shared one.
		if n := queryInt(t, dsn, `SELECT count(*) FROM pg_locks l JOIN pgleader.leader_state s
		        ON ((l.classid::bigint << 32) | l.objid::bigint) = s.lock_key AND l.locktype = 'advisory' AND l.objsubid = 1
		        WHERE s.scope = ANY ($1)`, scopes); n != int64(len(scopes)) {
			t.Errorf("%d advisory locks on the scopes' keys, want %d (one per led scope, none for followers)", n, len(scopes))
		}
	})

	t.Run("TerminatedLeaderIsReplacedForEveryScope", func(t *testing.T) {
		m := ledBy()
		var victim *testnode.Node
		for _, n := range nodes {
			if victim == nil || m[n.NodeID()] > m[victim.NodeID()] {
				victim = n
			}
		}
		var before int64
		withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
			if err := c.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM pgleader.terms").Scan(&before); err != nil {
				return err
			}
			// The leadership session: its locks and its beacon go at once.
			_, err := c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			        WHERE application_name = 'pgleader leadership ' || $1`, victim.NodeID())
			return err
		})
		lost := m[victim.NodeID()]
		// Led again, each by one node (the victim may win some back once its session
		// is rebuilt; what matters is that none stays leaderless).
		pgtest.WaitFor(t, "every scope led again", 15*time.Second, func() bool {
			if total(ledBy()) != len(scopes) {
				return false
			}
			return queryInt(t, dsn, `SELECT count(DISTINCT scope) FROM pgleader.terms WHERE id > $1`, before) >= int64(lost)
		})
		if n := queryInt(t, dsn, `SELECT count(*) FROM pgleader.terms WHERE id > $1 AND holder <> $2`, before, victim.NodeID()); n == 0 {
			t.Errorf("no scope was taken over by another node")
		}
		if n := queryInt(t, dsn, `SELECT count(*) FROM (SELECT scope FROM pgleader.terms GROUP BY scope
		        HAVING max(epoch) <> count(*) OR count(*) <> count(DISTINCT epoch)) x`); n != 0 {
			t.Errorf("%d scopes have gaps or duplicates in their epochs", n)
		}
	})
}

// Check refuses more scopes than half the server's lock table
// (max_locks_per_transaction × (max_connections + max_prepared_transactions)).
func TestLockTableCapacity(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	var half int
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT current_setting('max_locks_per_transaction')::int *
		        (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int) / 2`).Scan(&half)
	})
	cfg := testnode.FastConfig(dsn, "too-many", manyScopes(t, half+1)...)
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Check(context.Background()); !errors.Is(err, election.ErrTooManyScopes) {
		t.Fatalf("Check with %d scopes: %v, want ErrTooManyScopes", len(cfg.Scopes), err)
	}
}
