package exporter_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

// TestFleetTextMatchesRegistry: the fleet's /metrics, written without a
// registry, is the registry's page line for line — the same HELP and TYPE of
// every family and the same samples (labels in name order, values formatted
// alike), whatever the snapshots: a large cluster, alerts, names with
// control characters and a repeated series (left out by both), no snapshot.
func TestFleetTextMatchesRegistry(t *testing.T) {
	t.Parallel()
	repeated := ledCluster()
	// Two alerts whose keys differ but whose label values are the same once
	// escaped: the registry refuses the second series; so must the text.
	repeated.Alerts = append(repeated.Alerts,
		collector.Alert{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: "n\x1b"},
		collector.Alert{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: `n\x1b`})
	// A database the collector cannot read: its collector's health and the
	// collector_down alert only.
	unread := ledCluster()
	unread.Health.Source = collector.SourceDisconnected
	unread.Alerts = []collector.Alert{{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical}}
	members := []exporter.Member{
		{Name: "big", Source: staticSource{synthetic(300, 7)}},
		{Name: "led", Source: staticSource{ledCluster()}},
		{Name: "hostile", Source: staticSource{hostileCluster(func(s string) string { return s + payload + `"\` })}},
		{Name: "repeated", Source: staticSource{repeated}},
		{Name: "none", Source: staticSource{nil}},
		{Name: "unread", Source: staticSource{unread}},
	}
	f, err := exporter.NewFleet(members, exporter.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	_, text := get(t, f.Handler(nil), "/metrics")
	var reg bytes.Buffer
	fams, _ := f.Gatherer().Gather() // the repeated series is an error; the rest is served
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(&reg, mf); err != nil {
			t.Fatal(err)
		}
	}
	got, want := sortedLines(text), sortedLines(reg.String())
	if !slices.Equal(got, want) {
		for _, l := range diff(got, want) {
			t.Error(l)
		}
		t.Fatalf("the text page (%d lines) differs from the registry's (%d lines)", len(got), len(want))
	}
	// Each family's lines are together: the text format requires it.
	seen := map[string]bool{}
	last := ""
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		name := familyOf(l)
		if name != last {
			if seen[name] {
				t.Fatalf("family %s appears twice, apart", name)
			}
			seen[name], last = true, name
		}
	}
	if !strings.Contains(text, `pgleader_alert{alert="collector_down",database="unread",node="",scope="",severity="critical"} 1`) ||
		strings.Contains(text, `pgleader_scope_epoch{database="unread"`) {
		t.Errorf("the database not read is served as known, or its collector_down alert is missing")
	}
	if strings.Count(text, `pgleader_alert{alert="stale_node",database="repeated",node="n\\x1b",scope="",severity="warning"} 1`) != 1 {
		t.Errorf("the repeated series is not there exactly once")
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Errorf("the page does not parse: %v", err)
	}
	run(t, []byte(text), promtool(t), "check", "metrics")
}

// TestFleetTextServing: gzip when asked, the process's metrics after the
// fleet's, /probe with one database only.
func TestFleetTextServing(t *testing.T) {
	t.Parallel()
	f, err := exporter.NewFleet([]exporter.Member{{Name: "a", Source: staticSource{ledCluster()}}, {Name: "b", Source: staticSource{nil}}},
		exporter.Options{Now: func() time.Time { return t0 }}, collectors.NewGoCollector())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler(nil))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("headers %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(zr)
	page := string(body)
	if !strings.Contains(page, `pgleader_collector_up{database="a"} 1`) || !strings.Contains(page, `pgleader_collector_up{database="b"} 0`) ||
		!strings.Contains(page, "\ngo_goroutines ") || strings.Index(page, "go_goroutines") < strings.Index(page, "pgleader_exporter_scrape_success") {
		t.Errorf("page:\n%s", page)
	}
	_, probe := get(t, f.Handler(nil), "/probe?target=a")
	if strings.Contains(probe, `database="b"`) || strings.Contains(probe, "go_goroutines") || !strings.Contains(probe, `pgleader_scope_leader{database="a",node="node-a",scope="billing"} 1`) {
		t.Errorf("/probe?target=a:\n%s", probe)
	}
}

// sortedLines are the lines of a page, sorted, with the value of the scrape's
// own duration (which differs between any two scrapes) left out.
func sortedLines(s string) []string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range ls {
		if strings.HasPrefix(l, "pgleader_exporter_scrape_duration_seconds{") {
			ls[i] = l[:strings.LastIndexByte(l, ' ')]
		}
	}
	slices.Sort(ls)
	return ls
}

// diff lists the first lines only in one of two sorted lists.
func diff(got, want []string) []string {
	var out []string
	i, j := 0, 0
	for (i < len(got) || j < len(want)) && len(out) < 10 {
		switch {
		case j >= len(want) || (i < len(got) && got[i] < want[j]):
			out = append(out, "only in text:     "+got[i])
			i++
		case i >= len(got) || want[j] < got[i]:
			out = append(out, "only in registry: "+want[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return out
}

// familyOf is the metric family a line of the page belongs to.
func familyOf(l string) string {
	if rest, ok := strings.CutPrefix(l, "# "); ok {
		f := strings.Fields(rest)
		return f[1]
	}
	name := l[:strings.IndexAny(l, "{ ")]
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			name = strings.TrimSuffix(name, suf)
		}
	}
	return name
}

// BenchmarkScrapeFleet measures a whole /metrics request of an exporter over
// ten databases of 1,000 scopes and 5 nodes each (about 180,000 series): the
// page written from the snapshots (what the exporter serves), beside the same
// page through a registry and its encoder (what it served before) in the same
// run.
func BenchmarkScrapeFleet(b *testing.B) {
	var members []exporter.Member
	for i := range 10 {
		members = append(members, exporter.Member{Name: "db" + string(rune('0'+i)), Source: staticSource{synthetic(1000, 5)}})
	}
	f, err := exporter.NewFleet(members, exporter.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, h http.Handler) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d", rec.Code)
			}
		}
	}
	b.Run("text", func(b *testing.B) { run(b, f.Handler(nil)) })
	b.Run("registry", func(b *testing.B) { run(b, gathererHandler(f.Gatherer())) })
}

// gathererHandler serves g as the exporter's Handler serves a registry.
func gathererHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
