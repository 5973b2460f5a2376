package exporter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/promtest"
)

// runNode runs an election node of scopes on dsn until the test ends.
func runNode(t *testing.T, dsn, id string, scopes ...string) {
	t.Helper()
	e, err := election.New(election.Config{
		DSN: dsn, NodeID: id, Scopes: scopes,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 400 * time.Millisecond, SessionLease: 800 * time.Millisecond,
		DrainTimeout: time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("node %s: %v", id, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("node %s did not stop within 30s", id)
		}
	})
}

// runCollector runs a collector of dsn (poll every 200ms) until the test ends.
func runCollector(t *testing.T, dsn string) *collector.Collector {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cc.ConnectTimeout = time.Second
	c, err := collector.New(collector.Config{ConnConfig: cc, PollInterval: 200 * time.Millisecond,
		Source: collector.SourceModeNotify, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("collector Run: %v", err)
		}
	})
	return c
}

// TestOutageLeavesAGap: a real Prometheus scrapes the exporter every second,
// both ways it is served (the fleet's page with two databases, and one
// Exporter on a registry), while the server of one database is stopped for a
// few seconds and started again. Across the outage, /api/v1/query_range finds
// pgleader_scope_has_leader of that database with samples before and after and
// none while pgleader_collector_up is 0 — a gap, not a flat healthy line —
// and the other database's series with no gap at all. The rules, loaded into
// the same Prometheus, hold PgleaderCollectorDown pending and raise no slow
// failover for the term that follows the outage.
func TestOutageLeavesAGap(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops and boots a private server")
	}
	promtest.Binary(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("app")
	pgtest.Migrate(t, dsn)
	other := pgtest.MigratedDSN(t) // on the shared server, up throughout
	runNode(t, dsn, "node-1", "jobs")
	runNode(t, other, "node-1", "jobs")
	col, otherCol := runCollector(t, dsn), runCollector(t, other)

	fleet, err := exporter.NewFleet([]exporter.Member{{Name: "app", Source: col}, {Name: "other", Source: otherCol}}, exporter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(col, exporter.Options{}))
	fleetSrv, singleSrv := httptest.NewServer(fleet.Handler(nil)), httptest.NewServer(exporter.Handler(reg, nil))
	t.Cleanup(fleetSrv.Close)
	t.Cleanup(singleSrv.Close)
	fleetTarget, singleTarget := strings.TrimPrefix(fleetSrv.URL, "http://"), strings.TrimPrefix(singleSrv.URL, "http://")
	prom := promtest.StartWithRules(t, []string{filepath.Join("rules", "pgleader.rules.yml")}, fleetTarget, singleTarget)

	// The series of app, each way it is served.
	app := map[string]string{
		"fleet":  fmt.Sprintf(`{instance=%q,database="app"}`, fleetTarget),
		"single": fmt.Sprintf(`{instance=%q}`, singleTarget),
	}
	otherSel := `{database="other"}`
	samples := func(metric, sel string, from time.Time, keep func(float64) bool) int {
		t.Helper()
		got, err := prom.QueryRange(metric+sel, from, time.Now(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range got {
			for _, p := range s.Points {
				if keep(p.V) {
					n++
				}
			}
		}
		return n
	}
	is := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	waitScrapes := func(n int, what, metric string, from time.Time, keep func(float64) bool, sels ...string) {
		t.Helper()
		pgtest.WaitFor(t, what, 30*time.Second, func() bool {
			for _, sel := range sels {
				if samples(metric, sel, from, keep) < n {
					return false
				}
			}
			return true
		})
	}

	waitScrapes(3, "3 scrapes of app's scope led", "pgleader_scope_has_leader", prom.Started, is(1), app["fleet"], app["single"], otherSel)
	stopped := time.Now()
	if err := srv.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	// Down for longer than the slow-failover threshold (5s): the term after
	// the outage begins more than 5s after its predecessor's last heartbeat.
	waitScrapes(7, "7 scrapes of app's collector down", "pgleader_collector_up", stopped, is(0), app["fleet"], app["single"])
	if err := srv.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	waitScrapes(3, "3 scrapes of app read again and led", "pgleader_scope_has_leader", booted, is(1), app["fleet"], app["single"])
	end := time.Now()

	// One query_range across the whole run, at a 1s step, as a graph panel
	// asks: the steps where app's collector is down, and has_leader's points.
	step := time.Second
	series := func(expr string) map[int64]float64 {
		t.Helper()
		got, err := prom.QueryRange(expr, prom.Started, end, step)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 1 {
			t.Fatalf("%s: %d series, want one", expr, len(got))
		}
		pts := map[int64]float64{}
		for _, s := range got {
			for _, p := range s.Points {
				pts[p.T.Unix()] = p.V
			}
		}
		return pts
	}
	otherLed := series(`pgleader_scope_has_leader{database="other",scope="jobs",instance="` + fleetTarget + `"}`)
	for _, way := range []string{"fleet", "single"} {
		up := series("pgleader_collector_up" + app[way])
		led := series(strings.Replace("pgleader_scope_has_leader"+app[way], "{", `{scope="jobs",`, 1))
		var down, before, after, during []int64
		healthy := 0 // points during the outage saying "led"
		for ts, v := range up {
			if v == 0 {
				down = append(down, ts)
				if l, ok := led[ts]; ok {
					during = append(during, ts)
					if l == 1 {
						healthy++
					}
				}
			}
		}
		first, last := minMax(down)
		for ts := range led {
			switch {
			case ts < first:
				before = append(before, ts)
			case ts > last:
				after = append(after, ts)
			}
		}
		t.Logf("%s: query_range of has_leader over %d steps: %d points before the outage, %d during it (%d of them 1; %d steps with collector_up 0), %d after",
			way, len(up), len(before), len(during), healthy, len(down), len(after))
		switch {
		case len(down) < 3:
			t.Errorf("%s: %d steps with collector_up 0, want the outage seen at least 3 times", way, len(down))
		case len(during) > 0:
			t.Errorf("%s: has_leader has points at %d of the %d steps where collector_up is 0 (%v): a database not read is served as known",
				way, len(during), len(down), times(during))
		case len(before) == 0 || len(after) == 0:
			t.Errorf("%s: has_leader has %d points before the outage and %d after, want some of each", way, len(before), len(after))
		}
		if way == "fleet" {
			for _, ts := range down {
				if _, ok := otherLed[ts]; !ok {
					t.Errorf("the other database's has_leader has no point at %v, while app was down: one database's outage blanked another", time.Unix(ts, 0))
				}
			}
		}
	}

	// The rules over the same data (Prometheus evaluates them every second):
	// the outage is pending as PgleaderCollectorDown (it waits a minute);
	// the new term's handover gap is above 5s, which the old gauge rule paged
	// for, but its predecessor ended with the database (database_failover),
	// so the collector's slow_failover check, and the rule that reads it,
	// stay silent: as pgleader status and top.
	alerts := func(expr string) int {
		t.Helper()
		got, err := prom.QueryRange(expr, prom.Started, time.Now(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range got {
			n += len(s.Points)
		}
		return n
	}
	gapAbove5 := alerts(`pgleader_scope_last_handover_gap_seconds` + app["fleet"] + ` > 5`)
	oldRule := alerts(`pgleader_scope_last_handover_gap_seconds > 5 and pgleader_scope_tenure_seconds < 1800`)
	pending := alerts(`ALERTS{alertname="PgleaderCollectorDown",alertstate="pending"}`)
	slow := alerts(`ALERTS{alertname="PgleaderSlowFailover"}`) + alerts(`pgleader_alert{alert="slow_failover"}`)
	t.Logf("after the outage: handover gap above 5s at %d steps (the old rule's expression true at %d); PgleaderCollectorDown pending at %d; slow_failover at %d",
		gapAbove5, oldRule, pending, slow)
	if gapAbove5 == 0 || oldRule == 0 || pending == 0 || slow != 0 {
		t.Errorf("want a gap above 5s after the outage (the old rule's condition), PgleaderCollectorDown pending, and no slow failover (the collector's check ignores a database outage): %d, %d, %d, %d",
			gapAbove5, oldRule, pending, slow)
	}
	t.Logf("stopped %v after the start, booted %v later, read again after %v",
		stopped.Sub(prom.Started).Round(time.Millisecond), booted.Sub(stopped).Round(time.Millisecond), end.Sub(booted).Round(time.Millisecond))
}

func minMax(ts []int64) (lo, hi int64) {
	for i, v := range ts {
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}

func times(ts []int64) []string {
	out := make([]string, len(ts))
	for i, v := range ts {
		out[i] = time.Unix(v, 0).Format("15:04:05")
	}
	return out
}
