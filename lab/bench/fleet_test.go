package bench

import (
	"testing"
	"time"
)

// TestFleetOptions: the fleet benchmark's defaults and its DSN per database
// (a short unit test; the benchmark itself runs in make bench only).
func TestFleetOptions(t *testing.T) {
	var o FleetOptions
	o.defaults()
	if o.Databases != 10 || o.Scopes != 1000 || o.Nodes != 5 || o.Refreshes != 30 || o.Interval != time.Second || o.Width != 120 || o.Height != 40 {
		t.Fatalf("defaults %+v", o)
	}
	got, err := withDatabase("postgres://ops:pw@db:5433/app?sslmode=disable", fleetDB(3))
	if want := "postgres://ops:pw@db:5433/pgleader_bench_fleet_03?sslmode=disable"; err != nil || got != want {
		t.Fatalf("withDatabase: %q, %v; want %q", got, err, want)
	}
	if _, err := withDatabase("host=db dbname=app", "x"); err == nil {
		t.Fatal("a keyword/value DSN was taken")
	}
}
