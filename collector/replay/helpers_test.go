package replay

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/pgdial"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait is the deadline of every condition a test waits for.
const wait = 10 * time.Second

// readHistory reads the window around at from conn and rebuilds it.
func readHistory(ctx context.Context, conn *pgx.Conn, at time.Time, window time.Duration) (*History, error) {
	rows, err := collector.ReadHistory(ctx, conn, at, window)
	if err != nil {
		return nil, err
	}
	return New(rows), nil
}

// replayAt is the snapshot of at, rebuilt from the window around it.
func replayAt(ctx context.Context, conn *pgx.Conn, at time.Time) (*collector.Snapshot, error) {
	h, err := readHistory(ctx, conn, at, collector.ReplayWindow)
	if err != nil {
		return nil, err
	}
	return h.At(at), nil
}

func scope(t testing.TB, s *collector.Snapshot, name string) collector.Scope {
	t.Helper()
	sc, ok := s.Scope(name)
	if !ok {
		t.Fatalf("snapshot %d has no scope %q", s.Seq, name)
	}
	return sc
}

func alert(s *collector.Snapshot, kind collector.AlertKind, scope string) (collector.Alert, bool) {
	for _, a := range s.Alerts {
		if a.Kind == kind && (scope == "" || a.Scope == scope) {
			return a, true
		}
	}
	return collector.Alert{}, false
}

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgdial.Close(conn) })
	return conn
}

func exec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(t testing.TB, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// node is an in-process elector with the election tests' fast timing.
type node struct {
	*election.Elector
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startNode(t testing.TB, dsn, id string, scopes ...string) *node {
	t.Helper()
	e, err := election.New(election.Config{
		DSN: dsn, NodeID: id, Scopes: scopes,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond,
		DrainTimeout: time.Second, ResignCooldown: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Elector: e, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop drains the elector and waits for it.
func (n *node) stop(t testing.TB) {
	n.once.Do(func() {
		n.cancel()
		select {
		case err := <-n.done:
			if err != nil {
				t.Errorf("elector %s: Run returned %v", n.NodeID(), err)
			}
		case <-time.After(30 * time.Second):
			panic("elector Run did not return within 30s of cancel")
		}
	})
}

func (n *node) leads(scope string) bool {
	_, err := n.Scope(scope).Require(context.Background())
	return err == nil
}
