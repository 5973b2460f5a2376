package election_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionlog"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/history"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
	"github.com/pgleader/pgleader/migrations/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder collects the engine events of several nodes.
type recorder struct {
	mu     sync.Mutex
	events []election.Event
}

func (r *recorder) Observe(e election.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []election.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]election.Event(nil), r.events...)
}

func (r *recorder) count(node string, kind election.EventKind) int {
	n := 0
	for _, e := range r.snapshot() {
		if (node == "" || e.Node == node) && e.Kind == kind {
			n++
		}
	}
	return n
}

func leaders(nodes []*testnode.Node, scope string) []*testnode.Node {
	var out []*testnode.Node
	for _, n := range nodes {
		if n.Leads(scope) {
			out = append(out, n)
		}
	}
	return out
}

func assertNoOverlap(t testing.TB, r *recorder, scope string) {
	t.Helper()
	var recs []eventlog.Record
	for _, e := range r.snapshot() {
		recs = append(recs, electionlog.Records(e)...)
	}
	eventlog.SortByMono(recs)
	ivs := history.GateIntervals(recs, scope, monotime.Now())
	if len(ivs) == 0 {
		t.Fatalf("no gate intervals recorded for %s: the overlap check would be vacuous", scope)
	}
	if os := history.Overlaps(ivs); len(os) > 0 {
		t.Errorf("gates overlapped for %v: %v", history.TotalOverlap(os), os)
	}
}

// withConn runs fn on a fresh connection to dsn.
func withConn(t testing.TB, dsn string, fn func(context.Context, *pgx.Conn) error) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := fn(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// queryStrings returns the first column of every row of sql.
func queryStrings(t testing.TB, dsn, sql string, args ...any) []string {
	t.Helper()
	var out []string
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		rows, err := c.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out
}

func queryInt(t testing.TB, dsn, sql string, args ...any) int64 {
	t.Helper()
	var v int64
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		if err := c.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	})
	return v
}

func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	})
}

func migrationsUp(cfg *pgx.ConnConfig) (migrate.Result, error) {
	return migrate.Up(context.Background(), cfg, nil)
}

func queryString(t testing.TB, dsn, sql string, args ...any) string {
	t.Helper()
	var s string
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error { return c.QueryRow(ctx, sql, args...).Scan(&s) })
	return s
}

// awaitRegistered waits until node id has registered (a live row in
// pgleader.nodes): a test that makes the leader resign for it must wait so, or
// on a loaded machine the leader, alone, takes the scope back after its
// cooldown before the newcomer campaigns.
func awaitRegistered(t testing.TB, dsn, id string) {
	t.Helper()
	pgtest.WaitFor(t, id+" registered", 15*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT count(*) FROM pgleader.nodes WHERE node_id = $1 AND stopped_at IS NULL", id) == 1
	})
}
