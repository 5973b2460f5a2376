package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/promtest"
)

// during says what a panel query may show while its database cannot be read,
// given the values of every series at the outage's steps: "" when right.
type during func(values []float64) string

// gap: no value at all (the default): nothing was read, nothing is drawn.
func gap(values []float64) string {
	if len(values) > 0 {
		return fmt.Sprintf("%d values, want none (a gap): %v", len(values), values)
	}
	return ""
}

// all wants a value at every step of the outage, each satisfying ok.
func all(what string, ok func(float64) bool) during {
	return func(values []float64) string {
		if len(values) == 0 {
			return "no value, want " + what
		}
		for _, v := range values {
			if !ok(v) {
				return fmt.Sprintf("value %g, want %s: %v", v, what, values)
			}
		}
		return ""
	}
}

// anyValue accepts what the collector knows of itself (its counters, the
// duration of its last read), present or not.
func anyValue([]float64) string { return "" }

var (
	down    = all("0 (down)", func(v float64) bool { return v == 0 })
	unknown = all("NaN (UNKNOWN)", math.IsNaN)
)

// outage is what each panel query may show while its database is not read;
// a query not named here must show a gap.
var outage = map[string]during{
	"Collector now/A":                   down,
	"Scopes without a leader/A":         unknown,
	"Alerts firing/A":                   unknown,
	"Split brain / stale leaders/A":     unknown,
	"Fenced writes rejected in range/A": unknown,
	"Foreign sessions on scope locks/A": unknown,
	"Collector up over time/A":          down,
	"Collector source/A":                down,
	"Snapshot age and read duration/A":  all("an age", func(v float64) bool { return v >= 0 }),
	"Snapshot age and read duration/B":  anyValue,
	"Read errors per second/A":          anyValue,
	"Reconnects/A":                      anyValue,
}

// TestDashboardOutage evaluates every query of the dashboard, as Grafana would
// graph it, across a stop of the database's server: while the collector cannot
// read it, each query shows a gap, UNKNOWN (a stat) or what is true of the
// collector (down, the snapshot's growing age, its errors) — never a healthy
// cluster. A second database, read throughout, keeps its panels.
func TestDashboardOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops and boots a private server")
	}
	tgs := targets(t)
	for key := range outage {
		if !slices.ContainsFunc(tgs, func(tg target) bool { return tg.String() == key }) {
			t.Fatalf("outage names %s, which is no panel query of the dashboard", key)
		}
	}
	ctx := context.Background()
	promtest.Binary(t) // skips without prometheus, before the server starts
	srv := pgtest.NewServer(t)
	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("app")
	pgtest.Migrate(t, dsn)
	other := pgtest.MigratedDSN(t)
	for _, id := range []string{"node-a", "node-b"} {
		startNode(t, dsn, id, "billing")
	}
	startNode(t, other, "node-a", "billing")
	newCollector := func(dsn string) *collector.Collector {
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
		runCollector(t, c)
		return c
	}
	fleet, err := exporter.NewFleet([]exporter.Member{{Name: "app", Source: newCollector(dsn)}, {Name: "other", Source: newCollector(other)}},
		exporter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(fleet.Handler(nil))
	t.Cleanup(h.Close)
	prom := startPrometheus(t, strings.TrimPrefix(h.URL, "http://"))

	// steps returns the times of the 1s steps since from where expr has a value.
	steps := func(expr string, from time.Time) ([]time.Time, error) {
		got, err := prom.QueryRange(expr, from, time.Now(), time.Second)
		var ts []time.Time
		for _, s := range got {
			for _, p := range s.Points {
				ts = append(ts, p.T)
			}
		}
		return ts, err
	}
	eventually(t, "3 scrapes of app's billing led", 30*time.Second, func() string {
		ts, err := steps(`pgleader_scope_has_leader{database="app",scope="billing"} == 1`, prom.Started)
		if err != nil || len(ts) < 3 {
			return fmt.Sprint(len(ts), err)
		}
		return ""
	})
	stopped := time.Now()
	if err := srv.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	var downSteps []time.Time
	eventually(t, "4 scrapes of app's collector down", 30*time.Second, func() string {
		var err error
		downSteps, err = steps(`pgleader_collector_up{database="app"} == 0`, stopped)
		if err != nil || len(downSteps) < 4 {
			return fmt.Sprint(len(downSteps), err)
		}
		return ""
	})
	// Every query across the outage's steps, as a graph panel of a dashboard
	// whose range starts before it.
	first, last := downSteps[0], downSteps[len(downSteps)-1]
	rangeLen := last.Sub(prom.Started)
	pending := map[string]string{}
	for _, tg := range tgs {
		want := outage[tg.String()]
		if want == nil {
			want = gap
		}
		got, err := prom.QueryRange(expand(tg.expr, "app", rangeLen), first, last, time.Second)
		if err != nil {
			pending[tg.String()] = err.Error()
			continue
		}
		var values []float64
		for _, s := range got {
			if tg.panel == "Active alerts" && s.Labels["alert"] != string(collector.AlertCollectorDown) {
				pending[tg.String()] = fmt.Sprintf("alert %v shown while the database is not read", s.Labels)
			}
			values = append(values, s.Values()...)
		}
		if tg.panel == "Active alerts" {
			continue // collector_down, or nothing before the collector raises it
		}
		if why := want(values); why != "" {
			pending[tg.String()] = why
		}
	}
	for _, k := range slices.Sorted(maps.Keys(pending)) {
		t.Errorf("while app was not read (%d steps), %s: %s", len(downSteps), k, pending[k])
	}
	// The database read throughout keeps its panels (those that do not depend
	// on its leader holding on under load).
	for _, panel := range []string{"Collector now", "Epoch per scope", "Nodes up", "Split brain, stale leader, stale node"} {
		for _, tg := range tgs {
			if tg.panel != panel || tg.refID != "A" {
				continue
			}
			got, err := prom.QueryRange(expand(tg.expr, "other", rangeLen), first, last, time.Second)
			if err != nil || len(got) == 0 || len(got[0].Points) != len(downSteps) {
				t.Errorf("%s of the other database while app was down: %+v, %v; want a value at each of %d steps", tg, got, err, len(downSteps))
			}
		}
	}

	// Read again: the stats are known again.
	if err := srv.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	eventually(t, "app read again in every stat", 30*time.Second, func() string {
		for _, tg := range tgs {
			if !tg.instant || tg.panel == "Active alerts" || tg.panel == "Leaders now" {
				continue
			}
			got, err := prom.Query(expand(tg.expr, "app", time.Since(prom.Started)), time.Now())
			switch {
			case err != nil:
				return err.Error()
			case len(got) != 1 || math.IsNaN(got[0].Points[0].V):
				return fmt.Sprintf("%s: %+v", tg, got)
			}
		}
		return ""
	})
	t.Logf("%d queries checked across %d steps of the outage (%v after the stop); read again %v after the boot",
		len(tgs), len(downSteps), first.Sub(stopped).Round(time.Millisecond), time.Since(booted).Round(time.Millisecond))
}
