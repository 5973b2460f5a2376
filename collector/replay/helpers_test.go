package replay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
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
