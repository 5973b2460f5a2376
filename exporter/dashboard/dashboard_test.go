package dashboard_test

//lint:file-ignore SA1019 the classic dashboard model is deliberate (dashboard.go)

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"

	"github.com/pgleader/pgleader/exporter/dashboard"
)

// committed is the path of the committed dashboard, from this package's directory.
var committed = filepath.Join("..", dashboard.File)

func build(t *testing.T) sdk.Dashboard {
	t.Helper()
	d, err := dashboard.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return d
}

// TestDashboardJSONUpToDate: the committed JSON is what the code builds, byte
// for byte.
func TestDashboardJSONUpToDate(t *testing.T) {
	t.Parallel()
	want, err := dashboard.JSON(build(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("%v: run `go generate ./exporter/...` and commit exporter/%s", err, dashboard.File)
	}
	if !bytes.Equal(got, want) {
		line := 1 + bytes.Count(want[:commonPrefix(got, want)], []byte("\n"))
		t.Fatalf("exporter/%s differs from what exporter/dashboard builds (first difference on line %d): "+
			"run `go generate ./exporter/...` and commit the file", dashboard.File, line)
	}
}

// TestDashboardJSONDecodes: the committed file decodes strictly as Grafana's
// dashboard model (the SDK's schema: no unknown field, every panel and query of
// a known kind), validates, and encodes back to the same bytes.
func TestDashboardJSONDecodes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	// UnmarshalJSONStrict checks every field (it returns its error list as an
	// error even when empty: a nil cog.BuildErrors in a non-nil interface), but
	// leaves the panels out of what it decodes; json.Unmarshal decodes them.
	if err := new(sdk.Dashboard).UnmarshalJSONStrict(raw); err != nil && !(errors.As(err, new(cog.BuildErrors)) && err.Error() == "") {
		t.Fatalf("exporter/%s: %v", dashboard.File, err)
	}
	var d sdk.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("exporter/%s: %v", dashboard.File, err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("exporter/%s: %v", dashboard.File, err)
	}
	again, err := dashboard.JSON(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("exporter/%s does not survive a decode and encode: the SDK reads something else than was written", dashboard.File)
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestDashboardJSONStable: two builds give the same bytes (no map order or
// clock leaks into the file).
func TestDashboardJSONStable(t *testing.T) {
	t.Parallel()
	a, err := dashboard.JSON(build(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := dashboard.JSON(build(t))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two builds of the dashboard differ")
		}
	}
}

func variable(d sdk.Dashboard, name string) *sdk.VariableModel {
	for i := range d.Templating.List {
		if d.Templating.List[i].Name == name {
			return &d.Templating.List[i]
		}
	}
	return nil
}

// TestDashboardVariables: a Prometheus data source variable, and database from
// pgleader_collector_up's database label, multi-select with All.
func TestDashboardVariables(t *testing.T) {
	t.Parallel()
	d := build(t)
	ds := variable(d, dashboard.DatasourceVariable)
	if ds == nil || ds.Type != sdk.VariableTypeDatasource || ds.Query == nil || ds.Query.String == nil || *ds.Query.String != "prometheus" {
		t.Errorf("datasource variable: %+v, want type datasource over prometheus", ds)
	}
	db := variable(d, dashboard.DatabaseVariable)
	if db == nil {
		t.Fatalf("no %q variable", dashboard.DatabaseVariable)
	}
	if db.Type != sdk.VariableTypeQuery || db.Query == nil || db.Query.String == nil ||
		*db.Query.String != "label_values(pgleader_collector_up, database)" {
		t.Errorf("database variable: type %q, query %+v; want a query over label_values(pgleader_collector_up, database)", db.Type, db.Query)
	}
	if db.Multi == nil || !*db.Multi || db.IncludeAll == nil || !*db.IncludeAll {
		t.Errorf("database variable: multi %v, include all %v; want both", db.Multi, db.IncludeAll)
	}
	if db.Current == nil || !slices.Equal(db.Current.Value.ArrayOfString, []string{"$__all"}) {
		t.Errorf("database variable: current %+v, want All ($__all)", db.Current)
	}
	if db.Datasource == nil || db.Datasource.Uid == nil || *db.Datasource.Uid != "${datasource}" {
		t.Errorf("database variable's data source %+v, want ${datasource}", db.Datasource)
	}
}

// Panels returns the panels of d (rows left out) in order.
func panels(d sdk.Dashboard) []*sdk.Panel {
	var out []*sdk.Panel
	for _, p := range d.Panels {
		if p.Panel != nil {
			out = append(out, p.Panel)
		}
		if p.RowPanel != nil {
			for i := range p.RowPanel.Panels {
				out = append(out, &p.RowPanel.Panels[i])
			}
		}
	}
	return out
}

var runbookAnchor = regexp.MustCompile(`docs/runbooks\.md#([a-z_]+)`)

// TestDashboardPanels: unique ids (rows included), titles and descriptions;
// every panel on ${datasource} with at least one query, every query selecting
// database=~"$database" on each pgleader_ series it reads and keeping the
// database label; runbook links point at anchors that exist.
func TestDashboardPanels(t *testing.T) {
	t.Parallel()
	d := build(t)
	runbooks, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]string{}
	for _, p := range d.Panels {
		if r := p.RowPanel; r != nil {
			if prev, dup := ids[r.Id]; dup {
				t.Errorf("row %q has the id %d of %q", deref(r.Title), r.Id, prev)
			}
			ids[r.Id] = "row " + *r.Title
		}
	}
	titles, descriptions := map[string]bool{}, map[string]bool{}
	ps := panels(d)
	if len(ps) < 15 {
		t.Fatalf("%d panels", len(ps))
	}
	series := regexp.MustCompile(`pgleader_[a-z_]+(\{[^}]*\})?`)
	grouping := regexp.MustCompile(`\bby \(([^)]*)\)`)
	for _, p := range ps {
		title := deref(p.Title)
		if p.Id == nil {
			t.Errorf("panel %q has no id", title)
		} else {
			if prev, dup := ids[*p.Id]; dup {
				t.Errorf("panel %q has the id %d of %q", title, *p.Id, prev)
			}
			ids[*p.Id] = title
		}
		if title == "" || titles[title] {
			t.Errorf("panel title %q empty or repeated", title)
		}
		titles[title] = true
		desc := deref(p.Description)
		if len(desc) < 80 || descriptions[desc] {
			t.Errorf("panel %q: description empty, short or repeated: %q", title, desc)
		}
		descriptions[desc] = true
		for _, m := range runbookAnchor.FindAllStringSubmatch(desc, -1) {
			if !bytes.Contains(runbooks, []byte("\n## "+m[1]+"\n")) {
				t.Errorf("panel %q links runbook anchor #%s, which docs/runbooks.md lacks", title, m[1])
			}
		}
		if p.Datasource == nil || deref(p.Datasource.Uid) != "${datasource}" {
			t.Errorf("panel %q: data source %+v, want ${datasource}", title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, tg := range p.Targets {
			q, ok := promQuery(tg)
			if !ok {
				t.Errorf("panel %q: target %T, want a Prometheus query", title, tg)
				continue
			}
			if !strings.Contains(q.Expr, `database=~"$database"`) {
				t.Errorf("panel %q: query %q does not select $database", title, q.Expr)
			}
			for _, s := range series.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(s[1], `database=~"$database"`) {
					t.Errorf("panel %q: %s in %q does not select $database", title, s[0], q.Expr)
				}
			}
			for _, by := range grouping.FindAllStringSubmatch(q.Expr, -1) {
				if !slices.Contains(strings.Split(by[1], ", "), "database") {
					t.Errorf("panel %q: query %q aggregates the database label away", title, q.Expr)
				}
			}
			if q.Datasource == nil || deref(q.Datasource.Uid) != "${datasource}" {
				t.Errorf("panel %q: query data source %+v, want ${datasource}", title, q.Datasource)
			}
		}
	}
}

// TestDashboardAnnotations: Grafana's built-in annotation, and the leadership
// changes on ${datasource}, selecting $database.
func TestDashboardAnnotations(t *testing.T) {
	t.Parallel()
	d := build(t)
	var names []string
	for _, a := range d.Annotations.List {
		names = append(names, a.Name)
		if a.BuiltIn != nil && *a.BuiltIn == 1 {
			continue
		}
		if a.Datasource == nil || deref(a.Datasource.Uid) != "${datasource}" || !strings.Contains(deref(a.Expr), `database=~"$database"`) {
			t.Errorf("annotation %q: data source %+v, expr %q; want ${datasource} and $database", a.Name, a.Datasource, deref(a.Expr))
		}
	}
	if !slices.Contains(names, dashboard.LeadershipChangesAnnotation) {
		t.Errorf("annotations %v lack %q", names, dashboard.LeadershipChangesAnnotation)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// promQuery returns the Prometheus query of a panel target (the SDK stores
// values; a decoded dashboard holds pointers).
func promQuery(tg variants.Dataquery) (*prometheus.Dataquery, bool) {
	switch q := tg.(type) {
	case prometheus.Dataquery:
		return &q, true
	case *prometheus.Dataquery:
		return q, true
	}
	return nil, false
}

// TestDashboardStatsShowUnknown: every stat but Collector now reads a
// database that is not read as NaN (its query's "* NaN" branch) and shows it
// as UNKNOWN, reducing with last (lastNotNull skips NaN); no stat shows a 0
// for it.
func TestDashboardStatsShowUnknown(t *testing.T) {
	t.Parallel()
	stats := 0
	for _, p := range panels(build(t)) {
		if p.Type != "stat" {
			continue
		}
		stats++
		title := deref(p.Title)
		opts, ok := p.Options.(*stat.Options)
		if !ok || !slices.Equal(opts.ReduceOptions.Calcs, []string{"last"}) {
			t.Errorf("stat %q: options %+v, want the reducer last", title, p.Options)
		}
		if p.FieldConfig == nil || deref(p.FieldConfig.Defaults.NoValue) != "UNKNOWN" {
			t.Errorf("stat %q: no value is not shown as UNKNOWN", title)
		}
		if title == "Collector now" {
			continue // 0 is DOWN: the one thing known of a database not read
		}
		mapped := false
		for _, m := range p.FieldConfig.Defaults.Mappings {
			if sm := m.SpecialValueMap; sm != nil && sm.Options.Match == sdk.SpecialValueMatchNullAndNan && deref(sm.Options.Result.Text) == "UNKNOWN" {
				mapped = true
			}
		}
		q, _ := promQuery(p.Targets[0])
		if !mapped || !strings.Contains(q.Expr, "== 0) * NaN") || !strings.Contains(q.Expr, "unless on (database)") {
			t.Errorf("stat %q: NaN mapped to UNKNOWN %v; query %q, want a NaN for a database not read and none of its figures", title, mapped, q.Expr)
		}
	}
	if stats != 6 {
		t.Errorf("%d stats, want the 6 of the overview", stats)
	}
}
