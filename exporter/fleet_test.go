package exporter_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

// TestFleet: one exporter over three databases — two read, one never read —
// labels every pgleader series with its database, serves one database alone on
// /probe, and stays ready while any database is.
func TestFleet(t *testing.T) {
	t.Parallel()
	opts := exporter.Options{Now: func() time.Time { return t0 }}
	members := []exporter.Member{
		{Name: "billing", Source: staticSource{ledCluster()}},
		{Name: "orders", Source: staticSource{synthetic(5, 3)}},
		{Name: "down", Source: staticSource{nil}},
	}
	f, err := exporter.NewFleet(members, opts, collectors.NewGoCollector())
	if err != nil {
		t.Fatal(err)
	}
	h := f.Handler(f.Ready(nil))

	code, body := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	families := parse(t, body)
	seen := map[string]bool{}
	for name, fam := range families {
		if !strings.HasPrefix(name, "pgleader_") {
			continue
		}
		for _, m := range fam.GetMetric() {
			db := label(m.GetLabel(), exporter.DatabaseLabel)
			if db == "" {
				t.Errorf("%s has a series without a database label: %v", name, m.GetLabel())
			}
			seen[db] = true
		}
	}
	for _, db := range []string{"billing", "orders", "down"} {
		if !seen[db] {
			t.Errorf("no series of database %q", db)
		}
	}
	for _, want := range []string{
		`pgleader_collector_up{database="billing"} 1`,
		`pgleader_collector_up{database="orders"} 1`,
		`pgleader_collector_up{database="down"} 0`,
		`pgleader_scope_leader{database="billing",node="node-a",scope="billing"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Error("/metrics lacks the process's own go_* metrics")
	}
	if fam := families["go_goroutines"]; fam != nil && label(fam.GetMetric()[0].GetLabel(), exporter.DatabaseLabel) != "" {
		t.Error("go_goroutines carries a database label: the process's metrics are its own")
	}

	// /probe?target=orders: that database only, none of the process's metrics.
	code, body = get(t, h, "/probe?target=orders")
	if code != http.StatusOK || !strings.Contains(body, `pgleader_collector_up{database="orders"} 1`) ||
		strings.Contains(body, `database="billing"`) || strings.Contains(body, "go_goroutines") {
		t.Errorf("/probe?target=orders: %d\n%s", code, body)
	}
	for path, want := range map[string]string{
		"/probe":                "target parameter missing",
		"/probe?target=nope":    "target nope is not served here",
		"/probe?target=%3Cb%3E": "the target is not served here", // never echoed
	} {
		if code, body := get(t, h, path); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 with %q", path, code, body, want)
		}
	}
	if code, body := get(t, h, "/"); !strings.Contains(body, "/probe") {
		t.Errorf("/: %d %q lacks /probe", code, body)
	}

	// Ready while any database is read; not once none is.
	if code, body := get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with two of three read: %d %q", code, body)
	}
	none, err := exporter.NewFleet([]exporter.Member{{Name: "a", Source: staticSource{nil}}, {Name: "b", Source: staticSource{nil}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, none.Handler(none.Ready(nil)), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no snapshot yet") {
		t.Errorf("/readyz with none read: %d %q", code, body)
	}
	// Stale: a database whose snapshot is old is collector_up 0 beside a fresh one.
	old := ledCluster()
	old.At = t0.Add(-time.Minute)
	stale, err := exporter.NewFleet([]exporter.Member{{Name: "fresh", Source: staticSource{ledCluster()}}, {Name: "stale", Source: staticSource{old}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, body = get(t, stale.Handler(nil), "/metrics")
	if !strings.Contains(body, `pgleader_collector_up{database="stale"} 0`) || !strings.Contains(body, `pgleader_collector_up{database="fresh"} 1`) {
		t.Errorf("stale member:\n%s", body)
	}
}

// TestFleetMemberNotRead: a database whose collector cannot read it (its
// snapshot re-published, disconnected, or too old) has none of its scope, node
// or lock series on the page, only its collector's health and the
// collector_down alert; the database read beside it keeps every series.
func TestFleetMemberNotRead(t *testing.T) {
	t.Parallel()
	disconnected := ledCluster()
	disconnected.Health.Source = collector.SourceDisconnected
	disconnected.Alerts = []collector.Alert{
		{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical},
		{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: "billing", Node: "node-a"},
	}
	old := ledCluster()
	old.At = t0.Add(-time.Minute)
	f, err := exporter.NewFleet([]exporter.Member{
		{Name: "read", Source: staticSource{ledCluster()}},
		{Name: "disconnected", Source: staticSource{disconnected}},
		{Name: "old", Source: staticSource{old}},
	}, exporter.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	// What a database not read may show: its collector's health, the scrape's.
	allowed := func(name string, m *dto.Metric) bool {
		return strings.HasPrefix(name, "pgleader_collector_") || strings.HasPrefix(name, "pgleader_exporter_") ||
			name == "pgleader_alert" && label(m.GetLabel(), "alert") == string(collector.AlertCollectorDown)
	}
	for path, h := range map[string]http.Handler{"/metrics": f.Handler(nil), "/probe?target=disconnected": f.Handler(nil)} {
		_, body := get(t, h, path)
		fams := parse(t, body)
		count := map[string]int{}
		for name, fam := range fams {
			for _, m := range fam.GetMetric() {
				db := label(m.GetLabel(), exporter.DatabaseLabel)
				count[db]++
				if db != "read" && !allowed(name, m) {
					t.Errorf("%s: %s{database=%q} served for a database not read: %v", path, name, db, m.GetLabel())
				}
			}
		}
		for _, want := range []string{
			`pgleader_collector_up{database="disconnected"} 0`,
			`pgleader_collector_source{database="disconnected"} 0`,
			`pgleader_alert{alert="collector_down",database="disconnected",node="",scope="",severity="critical"} 1`,
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		if path != "/metrics" {
			continue
		}
		for _, want := range []string{
			`pgleader_collector_up{database="old"} 0`,
			`pgleader_collector_snapshot_age_seconds{database="old"} 60`,
			`pgleader_scope_has_leader{database="read",scope="billing"} 1`,
			`pgleader_scope_leader{database="read",node="node-a",scope="billing"} 1`,
			`pgleader_node_up{database="read",node="node-b"} 1`,
			`pgleader_lock_table_used{database="read"} 40`,
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		// The database read is served whole: as a fleet of itself alone.
		alone, err := exporter.NewFleet([]exporter.Member{{Name: "read", Source: staticSource{ledCluster()}}},
			exporter.Options{Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		_, aloneBody := get(t, alone.Handler(nil), "/metrics")
		if n := strings.Count(aloneBody, `database="read"`); count["read"] != n {
			t.Errorf("the database read has %d series beside the others, %d alone", count["read"], n)
		}
	}
}

func TestFleetRefusesBadNames(t *testing.T) {
	t.Parallel()
	src := staticSource{nil}
	for _, members := range [][]exporter.Member{
		nil,
		{{Name: "", Source: src}},
		{{Name: "a b", Source: src}},
		{{Name: "a", Source: src}, {Name: "a", Source: src}},
	} {
		if _, err := exporter.NewFleet(members, exporter.Options{}); err == nil {
			t.Errorf("NewFleet(%v) accepted", members)
		}
	}
}

func parse(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

func label(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
