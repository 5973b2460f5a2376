package collector_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/lab/bench"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// TestCollectorLatency runs the collector benchmark of lab/bench briefly on
// each source: it checks that every change was seen and that the forged cluster
// was read in full, and logs the figures (run with -v); it asserts no timing.
func TestCollectorLatency(t *testing.T) {
	pgtest.Slow(t)
	for _, tc := range []struct {
		source collector.SourceMode
		want   collector.Source
	}{
		{collector.SourceModeNotify, collector.SourceLive},
		{collector.SourceModeLogical, collector.SourceLogical},
	} {
		t.Run(string(tc.source), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
				t.Fatal(err)
			}
			const n = 20
			res, err := bench.CollectorSourceLatency(context.Background(), dsn, tc.source, n, func(string, ...any) {})
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != tc.want || res.N != n || len(res.CommitToEvent) != n || res.EventP99 < res.EventP50 ||
				res.Scopes < 100 || res.Nodes < 300 || res.PollFull <= 0 || res.PollP99 < res.PollFull {
				t.Fatalf("result %+v", res)
			}
			lat := slices.Clone(res.CommitToEvent)
			slices.Sort(lat)
			t.Logf("%s: commit → event over %d changes: min %v, p50 %v, p99 %v, max %v; full read over %d scopes and %d nodes: median %v, p99 %v",
				res.Source, n, lat[0], res.EventP50, res.EventP99, lat[n-1], res.Scopes, res.Nodes, res.PollFull, res.PollP99)
		})
	}
}
