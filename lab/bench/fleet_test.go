package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/bench"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestFleetScrape runs the fleet benchmark small — two databases of 20 scopes
// over 3 nodes — and checks what it measured is the fleet's: the page over two
// databases has twice the series of one, the forged leaders are live, and Close
// drops the databases it created.
func TestFleetScrape(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := bench.ForgeFleet(ctx, bench.FleetOptions{DSN: dsn, Databases: 2, Scopes: 20, Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
	}()
	res, err := bench.FleetScrape(ctx, f, 20, 3, 3, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if res.One.Databases != 1 || res.Fleet.Databases != 2 || len(res.One.Scrape) != 3 || len(res.Fleet.Scrape) != 3 {
		t.Fatalf("figures: %+v", res)
	}
	if res.One.Series == 0 || res.Fleet.Series != 2*res.One.Series {
		t.Errorf("series: one %d, fleet %d: want the fleet's twice one's", res.One.Series, res.Fleet.Series)
	}
	if res.Fleet.ScrapeP99 <= 0 || res.Fleet.PollP50 <= 0 || res.Fleet.HeapMiB <= 0 {
		t.Errorf("figures not measured: %+v", res.Fleet)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	if !strings.Contains(b.String(), "2 databases") || !strings.Contains(b.String(), "scrape p99") {
		t.Errorf("table:\n%s", b.String())
	}

	conn, err := pgx.ConnectConfig(ctx, f.Configs[0].Copy())
	if err != nil {
		t.Fatal(err)
	}
	var led int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pgleader.leader_state s JOIN pg_locks l
	   ON l.locktype = 'advisory' AND l.granted AND l.pid = s.holder_pid
	  AND ((l.classid::bigint << 32) | l.objid::bigint) = s.lock_key`).Scan(&led)
	conn.Close(ctx)
	if err != nil || led != 20 {
		t.Errorf("scopes whose lock the forged holder holds: %d, %v; want 20", led, err)
	}

	f.Close()
	closed = true
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname LIKE 'bench_fleet_%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("databases left after Close: %d, %v", left, err)
	}
}
