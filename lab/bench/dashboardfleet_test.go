package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/bench"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestDashboardFleet runs the dashboard-over-a-fleet benchmark small — two
// databases of 20 scopes over 3 nodes, two refreshes 50 ms apart — and checks
// that it measured one database, then both.
func TestDashboardFleet(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := bench.ForgeFleet(ctx, bench.FleetOptions{DSN: dsn, Databases: 2, Scopes: 20, Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := bench.DashboardFleet(ctx, f, 50*time.Millisecond, 2, 120, 40, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if res.One.Databases != 1 || res.One.Scopes != 20 || res.Fleet.Databases != 2 || res.Fleet.Scopes != 40 || res.Fleet.Nodes != 6 {
		t.Fatalf("measured %+v / %+v", res.One, res.Fleet)
	}
	if len(res.One.Total) != 2 || len(res.Fleet.Total) != 2 || res.Fleet.HeapMiB <= 0 {
		t.Fatalf("figures %+v", res.Fleet)
	}
}
