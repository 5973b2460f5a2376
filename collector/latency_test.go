package collector_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/bench"
	"github.com/pgleader/pgleader/internal/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

// TestCollectorLatency runs the collector benchmark of internal/bench briefly: it
// checks that every change was seen and that the forged cluster was read in full,
// and logs the figures (run with -v); it asserts no timing.
func TestCollectorLatency(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	const n = 20
	res, err := bench.CollectorLatency(context.Background(), dsn, n, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.N != n || len(res.CommitToEvent) != n || res.Scopes < 100 || res.Nodes < 300 || res.PollFull <= 0 || res.PollP99 < res.PollFull {
		t.Fatalf("result %+v", res)
	}
	lat := slices.Clone(res.CommitToEvent)
	slices.Sort(lat)
	t.Logf("commit → event over %d changes: min %v, median %v, max %v; full read over %d scopes and %d nodes: median %v, p99 %v",
		n, lat[0], lat[n/2], lat[n-1], res.Scopes, res.Nodes, res.PollFull, res.PollP99)
}
