package dashboard

// The SDK marks its dashboard package (Grafana's classic JSON model, schema
// version 42) deprecated in favour of dashboardv2, the v2 schema that only
// Grafana 12 and later import, behind a feature flag. The classic model is what
// Grafana's dashboard import takes by default, so this package keeps it.
//
//lint:file-ignore SA1019 the classic dashboard model is deliberate (see above)

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's uid: stable, so that a re-import replaces it.
const UID = "pgleader"

// Title is the dashboard's title.
const Title = "pgleader"

// File is the name of the committed JSON, in directory exporter.
const File = "pgleader-dashboard.json"

// DatabaseVariable is the name of the template variable selecting databases
// (the database label of every pgleader_* series).
const DatabaseVariable = "database"

// DatasourceVariable is the name of the template variable selecting the
// Prometheus data source.
const DatasourceVariable = "datasource"

// LeadershipChangesAnnotation is the name of the annotation that marks the
// minutes in which a scope changed hands.
const LeadershipChangesAnnotation = "Leadership changes"

// runbooks is where the descriptions point: the same base as the rules'
// runbook_url annotations.
const runbooks = "https://github.com/pgleader/pgleader/blob/main/docs/runbooks.md"

// sel is the selector every query carries.
//
// Two exporters may serve one database (for availability): a query takes the
// max across them (max by database and the series' own labels) before it
// counts, so that a figure is not doubled. The collector's own counters (read
// errors, reconnects) are each exporter's and are summed.
const sel = `database=~"$database"`

var datasource = common.DataSourceRef{
	Type: cog.ToPtr("prometheus"),
	Uid:  cog.ToPtr("${" + DatasourceVariable + "}"),
}

// query is one target of a panel.
type query struct {
	expr    string
	legend  string
	instant bool // an instant query (stat, table); else a range query
	table   bool // format table
}

func (q query) builder(refID string) *prometheus.DataqueryBuilder {
	b := prometheus.NewDataqueryBuilder().RefId(refID).Expr(q.expr).Datasource(datasource)
	if q.legend != "" {
		b = b.LegendFormat(q.legend)
	}
	if q.instant {
		b = b.Instant()
	} else {
		b = b.Range()
	}
	if q.table {
		b = b.Format(prometheus.PromQueryFormatTable)
	}
	return b
}

// panelBuilder is what every SDK panel builder offers; B is the builder's own
// type, so that the chain keeps it.
type panelBuilder[B any] interface {
	cog.Builder[sdk.Panel]
	Id(uint32) B
	Title(string) B
	Description(string) B
	Datasource(common.DataSourceRef) B
	Height(uint32) B
	Span(uint32) B
	WithTarget(cog.Builder[variants.Dataquery]) B
}

// panel sets what every panel has: id, title, description, data source, size
// and its queries (refIds A, B, …).
func panel[B panelBuilder[B]](b B, id uint32, title, description string, w, h uint32, qs ...query) B {
	b = b.Id(id).Title(title).Description(description).Datasource(datasource).Span(w).Height(h)
	for i, q := range qs {
		b = b.WithTarget(q.builder(string(rune('A' + i))))
	}
	return b
}

// valueText maps values to texts and colours (state timelines, stats).
func valueText(pairs ...[3]string) []sdk.ValueMapping {
	opts := map[string]sdk.ValueMappingResult{}
	for i, p := range pairs {
		opts[p[0]] = sdk.ValueMappingResult{Text: cog.ToPtr(p[1]), Color: cog.ToPtr(p[2]), Index: cog.ToPtr(int32(i))}
	}
	return []sdk.ValueMapping{{ValueMap: &sdk.ValueMap{Type: sdk.MappingTypeValueToText, Options: opts}}}
}

// thresholds colours a value below 1 with below and from 1 on with from: the
// stats count faults (0 is healthy) or say up (1 is healthy).
func thresholds(below, from string) *sdk.ThresholdsConfigBuilder {
	return sdk.NewThresholdsConfigBuilder().Mode(sdk.ThresholdsModeAbsolute).
		Steps([]sdk.Threshold{{Value: nil, Color: below}, {Value: cog.ToPtr(1.0), Color: from}})
}

// The databases read now, and those not read now: by every exporter that
// serves them (max: two exporters of one database for availability).
var (
	readNow    = `(max by (database) (pgleader_collector_up{` + sel + `}) == 1)`
	notReadNow = `(max by (database) (pgleader_collector_up{` + sel + `}) == 0)`
)

// zeroWhenNone makes a count that is absent when nothing fires (pgleader_alert
// has no series then) a 0 per database read now, so that a stat reads 0 rather
// than "No data" on a healthy database. A database not read gets no 0: nothing
// is known of its alerts.
func zeroWhenNone(expr string) string {
	return fmt.Sprintf(`(%s) or on (database) %s * 0`, expr, readNow)
}

// known makes a stat's figure NaN, shown as UNKNOWN, for a database not read
// now. The exporter serves none of its scope and node series then (a stat
// would leave it out, and a viewer would read the others' zeros as the whole
// fleet), and an exporter from before that served its last figures as current
// (left out here).
func known(expr string) string {
	return fmt.Sprintf(`(%s) unless on (database) %s or on (database) %s * NaN`, expr, notReadNow, notReadNow)
}

// unknown maps NaN (known's) to UNKNOWN in grey, and null alike.
var unknown = sdk.ValueMapping{SpecialValueMap: &sdk.SpecialValueMap{Type: sdk.MappingTypeSpecialValue,
	Options: sdk.DashboardSpecialValueMapOptions{Match: sdk.SpecialValueMatchNullAndNan,
		Result: sdk.ValueMappingResult{Text: cog.ToPtr("UNKNOWN"), Color: cog.ToPtr(unknownColor), Index: cog.ToPtr(int32(0))}}}}

const unknownColor = "#8e8e8e"

// epoch is the scope's epoch, as every query selects it.
const epoch = `pgleader_scope_epoch{` + sel + `}`

// Epochs on timeline tl start above (tl − 1)·2^40 (collector.EpochFloor): a
// rise of 2^39 or more is a database failover, not 2^39 new terms.
const (
	timelineSpan = "2^40"
	floorJump    = "2^39"
)

// before is the value of x (a selector) before the window that ends at each
// step: its last sample within 10 minutes before the window, so that what
// happened while the database was not read counts in the first window after
// it; for a series younger than that (its first term, or a Prometheus just
// started), its first sample within the window.
func before(x, window string) string {
	return fmt.Sprintf(`(last_over_time(%[1]s[10m] offset %[2]s) or min_over_time(%[1]s[%[2]s]))`, x, window)
}

// rise is how much the highest value of x (a selector) among the exporters
// that serve it rose within the window before each step, per by (labels). The
// highest first: two exporters of one database scrape it at different
// moments, so each sees a change in a different window, and a maximum of
// their own rises would count it twice.
func rise(x, by, window string) string {
	return fmt.Sprintf(`(max by (%[2]s) (%[1]s) - max by (%[2]s) %[3]s)`, x, by, before(x, window))
}

// newTerms is the number of terms each scope began within the window before
// each step: the rise of its epoch (each grant raises it by exactly one), or,
// across a database failover, the terms of the new timeline (epoch modulo the
// timeline's span). With window = $__interval the windows of a graph's steps
// tile time: each new term is counted once (changes() over overlapping
// windows counted one failover in every window that held it, 3 to 11 times).
func newTerms(window string) string {
	const by = "database, scope"
	r := rise(epoch, by, window)
	return fmt.Sprintf(`((%[1]s >= 0 < %[2]s) or (max by (%[5]s) (%[3]s) %% %[4]s and %[1]s >= %[2]s))`,
		r, floorJump, epoch, timelineSpan, by)
}

// increments is how much counter c (a selector) rose within each step's
// window, per series (c's own value after a reset): exact counts per step,
// that a bar chart may sum, where increase() over overlapping windows counts
// an event in several bars and extrapolates fractions of it. For a count each
// exporter makes of its own (reconnects): summed, not maxed.
func increments(c, window string) string {
	prev := before(c, window)
	return fmt.Sprintf(`((%[1]s - %[2]s >= 0) or (%[1]s < %[2]s))`, c, prev)
}

// shared is increments for a count every exporter of a database makes alike
// (fenced writes refused, from the database's audit): the rise of the
// highest, per by (see rise).
func shared(c, by, window string) string {
	return fmt.Sprintf(`((%[1]s >= 0) or (max by (%[3]s) (%[2]s) < max by (%[3]s) %[4]s))`, rise(c, by, window), c, by, before(c, window))
}

// statPanel shows one figure per database; faultColor colours it from 1 on.
// A database not read shows UNKNOWN (known); so does a panel with no data at
// all (no exporter scraped). The reducer is last, not lastNotNull: the query
// is instant (one value per series), and lastNotNull skips NaN, which would
// show "No data" instead.
func statPanel(id uint32, title, description string, q query, faultColor string) *stat.PanelBuilder {
	q.instant = true
	return panel(stat.NewPanelBuilder(), id, title, description, 4, 4, q).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"last"})).
		Mappings([]sdk.ValueMapping{unknown}).
		NoValue("UNKNOWN").
		Thresholds(thresholds("green", faultColor))
}

func timeseriesPanel(id uint32, title, description, unit string, w uint32, qs ...query) *timeseries.PanelBuilder {
	return panel(timeseries.NewPanelBuilder(), id, title, description, w, 8, qs...).
		Unit(unit).
		Min(0).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(tooltip())
}

// tooltip lists every series at the cursor, highest first.
func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}

func timelinePanel(id uint32, title, description string, w, h uint32, mappings []sdk.ValueMapping, qs ...query) *statetimeline.PanelBuilder {
	return panel(statetimeline.NewPanelBuilder(), id, title, description, w, h, qs...).
		Mappings(mappings).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(false)).
		Tooltip(tooltip())
}

// tablePanel is an instant table of one query's labels, in the given column
// order; the value column is renamed value (or dropped when value is "").
func tablePanel(id uint32, title, description string, w, h uint32, q query, value string, columns ...string) *table.PanelBuilder {
	q.instant, q.table = true, true
	exclude := map[string]any{"Time": true}
	rename := map[string]any{}
	if value == "" {
		exclude["Value"] = true
	} else {
		rename["Value"] = value
	}
	index := map[string]any{}
	for i, c := range columns {
		index[c] = i
	}
	if value != "" {
		index["Value"] = len(columns)
	}
	return panel(table.NewPanelBuilder(), id, title, description, w, h, q).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"})).
		Transformations([]sdk.DataTransformerConfig{{Id: "organize", Options: map[string]any{
			"excludeByName": exclude,
			"indexByName":   index,
			"renameByName":  rename,
		}}})
}

// Build returns pgleader's dashboard.
func Build() (sdk.Dashboard, error) {
	upDown := valueText([3]string{"1", "up", "green"}, [3]string{"0", "DOWN", "red"})
	b := sdk.NewDashboardBuilder(Title).
		Uid(UID).
		Description("pgleader: leadership per scope, failovers, heartbeats, the collector's checks, fenced writes and collector health, per database. While a database cannot be read its panels show a gap and its stats UNKNOWN: nothing is drawn from figures nobody read. Built by exporter/dashboard (Go); do not edit the JSON by hand.").
		Tags([]string{"pgleader", "postgresql", "leader-election"}).
		Editable().
		Tooltip(sdk.DashboardCursorSyncCrosshair).
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Refresh("30s").
		Annotation(sdk.NewAnnotationQueryBuilder().
			Name("Annotations & Alerts").
			Type("dashboard").
			BuiltIn(1).
			Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
			Hide(true).
			IconColor("rgba(0, 211, 255, 1)")).
		// A mark on every graph where a scope changed hands, so that a jump in
		// another panel can be read against the failover that caused it: one
		// per scope and minute that began a term, each term in one minute only.
		Annotation(sdk.NewAnnotationQueryBuilder().
			Name(LeadershipChangesAnnotation).
			Datasource(datasource).
			Expr(newTerms("1m") + ` > 0`).
			Step("1m").
			TitleFormat("Leadership change").
			TextFormat("{{database}} {{scope}}: a new term").
			TagKeys("database,scope").
			IconColor("orange")).
		WithVariable(sdk.NewDatasourceVariableBuilder(DatasourceVariable).
			Label("Data source").
			Type("prometheus")).
		WithVariable(sdk.NewQueryVariableBuilder(DatabaseVariable).
			Label("Database").
			Description("The database label of the pgleader series: the exporter's target name (config file) or the database name of its --dsn.").
			Datasource(datasource).
			Query(sdk.StringOrMap{String: cog.ToPtr("label_values(pgleader_collector_up, database)")}).
			Definition("label_values(pgleader_collector_up, database)").
			Refresh(sdk.VariableRefreshOnTimeRangeChanged).
			Sort(sdk.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			// All selected until the viewer picks: Grafana's $__all.
			Current(sdk.VariableOption{Selected: cog.ToPtr(true),
				Text:  sdk.StringOrArrayOfString{ArrayOfString: []string{"All"}},
				Value: sdk.StringOrArrayOfString{ArrayOfString: []string{"$__all"}}}).
			AllValue(".*"))

	// Overview: one stat per question on-call asks first.
	b = b.WithRow(sdk.NewRowBuilder("Overview").Id(100)).
		WithPanel(statPanel(1, "Collector now",
			"1 (up) when the exporter's collector reads the database and its snapshot is fresh. DOWN: the database cannot be read; its other panels show a gap and its stats UNKNOWN until it is read again (the exporter serves no figure it could not read). Runbook: "+runbooks+"#collector_down",
			query{expr: `max by (database) (pgleader_collector_up{` + sel + `})`, legend: "{{database}}"},
			"").Mappings(upDown).Thresholds(thresholds("red", "green"))).
		WithPanel(statPanel(2, "Scopes without a leader",
			"Scopes that have no leader and are not IDLE (IDLE: every candidate stopped cleanly, nobody is meant to lead). Above 0 their singleton work is not being done; the alert fires after 10s. UNKNOWN while the database cannot be read. Runbook: "+runbooks+"#no_leader",
			query{expr: known(`sum by (database) (max by (database, scope) ((1 - pgleader_scope_has_leader{` + sel + `}) * (1 - pgleader_scope_idle{` + sel + `})))`), legend: "{{database}}"},
			"red")).
		WithPanel(statPanel(3, "Alerts firing",
			"Alerts the collector raises now (the same as pgleader status and pgleader top): the Active alerts table below names them. UNKNOWN while the database cannot be read (only collector_down is known then). Each kind has its section in "+runbooks,
			query{expr: known(zeroWhenNone(`count by (database) (max by (database, alert, scope, node) (pgleader_alert{` + sel + `}))`)), legend: "{{database}}"},
			"orange")).
		WithPanel(statPanel(4, "Split brain / stale leaders",
			"Scopes where the collector's split_brain or stale_leader check fires. split_brain: the lock holder and the recorded holder disagree, or the epoch went backwards; stale_leader (a zombie): the lock is held but its holder stopped heartbeating. Both page. UNKNOWN while the database cannot be read. Runbooks: "+runbooks+"#split_brain and "+runbooks+"#stale_leader",
			query{expr: known(`sum by (database) (max by (database, scope) (pgleader_scope_split_brain{` + sel + `})) + sum by (database) (max by (database, scope) (pgleader_scope_stale_leader{` + sel + `}))`), legend: "{{database}}"},
			"red")).
		WithPanel(statPanel(5, "Fenced writes rejected in range",
			"Fenced writes the database refused over the dashboard's time range: a former leader acted after losing leadership and its epoch stopped it. Fencing worked; find the zombie (the Active alerts table names the node). UNKNOWN while the database cannot be read. Runbook: "+runbooks+"#fence_rejected",
			query{expr: known(`sum by (database) (max by (database, scope) (increase(pgleader_fence_rejected_total{` + sel + `}[$__range])))`), legend: "{{database}}"},
			"orange")).
		WithPanel(statPanel(6, "Foreign sessions on scope locks",
			"Sessions that hold or wait on a scope's advisory lock without being its candidates (squatters). Above 0 leadership of those scopes is blocked or will pass to that session. pgleader status names the pid, role and client. UNKNOWN while the database cannot be read. Runbook: "+runbooks+"#interference",
			query{expr: known(`sum by (database) (max by (database, scope) (pgleader_scope_foreign_sessions{` + sel + `}))`), legend: "{{database}}"},
			"red"))

	// Leadership: terms, who leads now, changes, how long failovers took,
	// heartbeats.
	b = b.WithRow(sdk.NewRowBuilder("Leadership").Id(101)).
		WithPanel(timelinePanel(7, "Terms per scope",
			"One row per scope: a segment per term, labelled with its epoch (the term's number), green while led; red NO LEADER while it has none; a gap while the database cannot be read. A new segment is a failover or handover. Who leads now: Leaders now; who led a past term and why it ended: pgleader history --scope SCOPE. One row per scope however often nodes restart under new ids.",
			24, 9, append(valueText([3]string{"0", "NO LEADER", "red"}),
				sdk.ValueMapping{RangeMap: &sdk.RangeMap{Type: sdk.MappingTypeRangeToText, Options: sdk.DashboardRangeMapOptions{
					From: cog.ToPtr(1.0), Result: sdk.ValueMappingResult{Color: cog.ToPtr("green"), Index: cog.ToPtr(int32(1))}}}}),
			query{expr: `max by (database, scope) (pgleader_scope_epoch{` + sel + `} * pgleader_scope_has_leader{` + sel + `})`, legend: "{{database}} {{scope}}"}).
			ShowValue(common.VisibilityModeAuto).
			LineWidth(1)).
		WithPanel(tablePanel(24, "Leaders now",
			"The node that leads each scope now, and for how long its term has lasted (database time). A scope without a leader, and every scope of a database that cannot be read, has no row: see Scopes without a leader and Collector now.",
			12, 8,
			query{expr: `max by (database, scope, node) (pgleader_scope_leader{` + sel + `} * on (instance, database, scope) group_left pgleader_scope_tenure_seconds{` + sel + `})`},
			"leading for", "database", "scope", "node").
			Unit("s")).
		WithPanel(timeseriesPanel(8, "Leadership changes (failovers and handovers)",
			"New terms per scope in each interval of the graph: the rise of the epoch, which every grant raises by one, so each term is counted once, in the interval it began (terms begun while the database could not be read count in the first interval after it). Planned handovers, resignations and shutdowns count here; the flapping alert counts only unplanned changes (more than 6 in 5 minutes). Runbook: "+runbooks+"#flapping",
			"short", 12,
			query{expr: newTerms("$__interval"), legend: "{{database}} {{scope}}"}).
			DrawStyle(common.GraphDrawStyleBars)).
		WithPanel(timeseriesPanel(9, "Failover duration",
			"Handover gap, one point per failover, at the interval its term began: how long the scope was without a leader before it (its predecessor's last sign of life to the new term; above 5s the collector raises slow_failover). A scope's first term has none. Without a leader: how long a scope that is not IDLE has had no leader, drawn only while it has none. Runbooks: "+runbooks+"#slow_failover and "+runbooks+"#no_leader",
			"s", 12,
			query{expr: `max by (database, scope) (pgleader_scope_last_handover_gap_seconds{` + sel + `}) and on (database, scope) (` + newTerms("$__interval") + ` > 0)`, legend: "{{database}} {{scope}} handover gap"},
			query{expr: `max by (database, scope) (pgleader_scope_leaderless_seconds{` + sel + `} > 0 unless on (instance, database, scope) pgleader_scope_idle{` + sel + `} == 1)`, legend: "{{database}} {{scope}} without a leader"}).
			OverrideByQuery("A", []sdk.DynamicConfigValue{{Id: "custom.drawStyle", Value: "points"}, {Id: "custom.pointSize", Value: 8}})).
		WithPanel(timeseriesPanel(10, "Heartbeat age vs trust window",
			"For each scope that has a leader: the age of its leader's last heartbeat beside the trust window it runs with (scopes without a leader are left out: their age only grows). The age stays well below the window while the leader is healthy; above it the leader's gate is closed, and above window + 1s the stale_leader check fires (a frozen or cut-off leader still holds the lock). Runbook: "+runbooks+"#stale_leader",
			"s", 12,
			query{expr: `max by (database, scope) (pgleader_scope_heartbeat_age_seconds{` + sel + `} and on (instance, database, scope) pgleader_scope_has_leader{` + sel + `} == 1)`, legend: "{{database}} {{scope}} heartbeat age"},
			query{expr: `max by (database, scope) (pgleader_scope_trust_window_seconds{` + sel + `} and on (instance, database, scope) pgleader_scope_has_leader{` + sel + `} == 1)`, legend: "{{database}} {{scope}} trust window"})).
		WithPanel(timeseriesPanel(11, "Epoch per scope",
			"The current epoch (fencing token) of each scope. It only grows; a write fenced with an older epoch is refused. A jump of 2^40 or more follows a database failover (epoch_floor_raised). Runbook: "+runbooks+"#epoch_floor_raised",
			"none", 12,
			query{expr: `max by (database, scope) (pgleader_scope_epoch{` + sel + `})`, legend: "{{database}} {{scope}}"}))

	// Checks: the collector's alerts and the faults fencing stopped.
	b = b.WithRow(sdk.NewRowBuilder("Checks").Id(102)).
		WithPanel(timelinePanel(12, "Split brain, stale leader, stale node",
			"The collector's safety checks over time, 0 (ok) or 1 (firing) per scope or node; a gap while the database cannot be read. split_brain and stale_leader page at once; a stale node (crashed, frozen or cut off without stopping cleanly, unseen for 30s) warns after a minute. Runbooks: "+runbooks+"#split_brain, #stale_leader, #stale_node",
			24, 8, valueText([3]string{"0", "ok", "green"}, [3]string{"1", "FIRING", "red"}),
			query{expr: `max by (database, scope) (pgleader_scope_split_brain{` + sel + `})`, legend: "{{database}} {{scope}} split brain"},
			query{expr: `max by (database, scope) (pgleader_scope_stale_leader{` + sel + `})`, legend: "{{database}} {{scope}} stale leader"},
			query{expr: `max by (database, node) (pgleader_node_stale{` + sel + `})`, legend: "{{database}} {{node}} stale node"})).
		WithPanel(timeseriesPanel(13, "Fenced writes rejected",
			"Fenced writes the database refused per scope in each interval of the graph, each counted once: a former leader (a zombie) acted under an old epoch and the fence stopped it. Each one is a fault that fencing contained; repeated ones mean a process keeps acting after losing leadership. Runbook: "+runbooks+"#fence_rejected",
			"short", 12,
			query{expr: shared(`pgleader_fence_rejected_total{`+sel+`}`, "database, scope", "$__interval"), legend: "{{database}} {{scope}}"}).
			DrawStyle(common.GraphDrawStyleBars)).
		WithPanel(timeseriesPanel(14, "Interference: foreign sessions on scope locks",
			"Sessions holding or waiting on a scope's advisory lock that are not its candidates (a squatter, or someone testing with pg_advisory_lock in psql). While above 0 the scope cannot change hands normally; after 15s it alerts. pgleader status names the session. Runbook: "+runbooks+"#interference",
			"short", 12,
			query{expr: `max by (database, scope) (pgleader_scope_foreign_sessions{` + sel + `})`, legend: "{{database}} {{scope}}"})).
		WithPanel(timeseriesPanel(27, "Lock table and notification queue",
			"The server's shared lock table in use (the locks of every database of the server, advisory or not, over max_locks_per_transaction × (max_connections + max_prepared_transactions)): above 50% lock_pressure warns, and when it fills every session of the server fails. The server's notification queue in use: above 10% notify_queue warns, and when it fills every NOTIFY fails, pgleader's claims included. Runbooks: "+runbooks+"#lock_pressure and "+runbooks+"#notify_queue",
			"percentunit", 24,
			query{expr: `max by (database) (pgleader_lock_table_used{` + sel + `} / pgleader_lock_table_capacity{` + sel + `})`, legend: "{{database}} lock table"},
			query{expr: `max by (database) (pgleader_notify_queue_usage_ratio{` + sel + `})`, legend: "{{database}} notification queue"})).
		WithPanel(tablePanel(15, "Active alerts",
			"Every alert the collector raises now, by database, kind, severity, scope and node: the alerts of pgleader status and pgleader top. A database that cannot be read shows only collector_down. Each kind is a section of "+runbooks+" (the anchor is the kind, e.g. #no_leader).",
			24, 7,
			query{expr: `max by (database, alert, severity, scope, node) (pgleader_alert{` + sel + `})`},
			"", "database", "alert", "severity", "scope", "node"))

	// Nodes.
	b = b.WithRow(sdk.NewRowBuilder("Nodes").Id(103)).
		WithPanel(timelinePanel(16, "Nodes up",
			"Each candidate node: up while it runs and is seen; DOWN once it stopped or has not been seen recently; a gap while the database cannot be read. A node DOWN without having stopped cleanly turns stale. A node gone for longer than the exporter's --node-retention (1h by default) leaves the metrics, and its row ends. Runbook: "+runbooks+"#stale_node",
			12, 8, upDown,
			query{expr: `max by (database, node) (pgleader_node_up{` + sel + `})`, legend: "{{database}} {{node}}"})).
		WithPanel(timelinePanel(17, "Supervised commands up (pgleader run)",
			"For nodes run as pgleader run: whether the supervised command runs (up) or not (DOWN: waiting for leadership, backing off after an exit, or stopped). Empty when no node supervises a command; a gap while the database cannot be read.",
			12, 8, upDown,
			query{expr: `max by (database, node, command) (pgleader_node_child_up{` + sel + `})`, legend: "{{database}} {{node}} {{command}}"})).
		WithPanel(timeseriesPanel(18, "Node last seen",
			"Age of each node's last sign of life in the database. It stays around the heartbeat interval; a rising line is a node that crashed, froze or lost the database (stale after 30s). Runbook: "+runbooks+"#stale_node",
			"s", 12,
			query{expr: `max by (database, node) (pgleader_node_last_seen_age_seconds{` + sel + `})`, legend: "{{database}} {{node}}"})).
		WithPanel(timeseriesPanel(25, "Node restarts",
			"How many times each node id was registered again by a new process since it was first registered: a line that keeps rising is a crash loop under a fixed id (pgleader run --restart, systemd, Kubernetes). Nodes with a new id on each start show as new nodes instead. Runbook: "+runbooks+"#stale_node",
			"short", 12,
			query{expr: `max by (database, node) (pgleader_node_restarts{` + sel + `})`, legend: "{{database}} {{node}}"}))

	// Collector.
	b = b.WithRow(sdk.NewRowBuilder("Collector").Id(104)).
		WithPanel(timelinePanel(19, "Collector up over time",
			"Per database, whether the exporter's collector reads it (up) or not (DOWN: cannot connect, or its newest snapshot is stale). While DOWN the other panels of that database show a gap (nothing was read); after a minute it pages. Runbook: "+runbooks+"#collector_down",
			12, 8, upDown,
			query{expr: `max by (database) (pgleader_collector_up{` + sel + `})`, legend: "{{database}}"})).
		WithPanel(timelinePanel(20, "Collector source",
			"Where the collector's picture comes from: logical replication (changes streamed), live (LISTEN/NOTIFY), polling only (notifications are not arriving: changes show a poll interval late), or disconnected.",
			12, 8, valueText([3]string{"3", "logical", "green"}, [3]string{"2", "live", "green"}, [3]string{"1", "polling", "orange"}, [3]string{"0", "disconnected", "red"}),
			query{expr: `max by (database) (pgleader_collector_source{` + sel + `})`, legend: "{{database}}"})).
		WithPanel(timeseriesPanel(21, "Snapshot age and read duration",
			"Snapshot age: how old the collector's picture is at the scrape (above 10s the collector counts as down; it keeps growing through an outage). Read duration: how long its last successful read of the database took; a rising one is a loaded database or lock table.",
			"s", 12,
			query{expr: `max by (database) (pgleader_collector_snapshot_age_seconds{` + sel + `})`, legend: "{{database}} snapshot age"},
			query{expr: `max by (database) (pgleader_collector_poll_duration_seconds{` + sel + `})`, legend: "{{database}} read duration"})).
		WithPanel(timeseriesPanel(22, "Read errors per second",
			"Failed reads of the database per second, summed over the exporters that read it: 0 when healthy. Errors with the collector still up are transient; errors with it down are an outage of its connection (the exporter's log names the cause). Runbook: "+runbooks+"#collector_down",
			"reqps", 12,
			query{expr: `sum by (database) (rate(pgleader_collector_poll_errors_total{` + sel + `}[$__rate_interval]))`, legend: "{{database}} read errors/s"})).
		WithPanel(timeseriesPanel(26, "Reconnects",
			"Times the collectors reconnected to the database in each interval of the graph, each counted once, summed over the exporters that read it: 0 when healthy; one per exporter after an outage or a restart of the database. Runbook: "+runbooks+"#collector_down",
			"short", 12,
			query{expr: `sum by (database) ` + increments(`pgleader_collector_reconnects_total{`+sel+`}`, "$__interval"), legend: "{{database}} reconnects"}).
			DrawStyle(common.GraphDrawStyleBars)).
		WithPanel(timeseriesPanel(23, "Replication slot lag",
			"WAL the server keeps for the collector's permanent replication slot (--slot). It stays small while the collector streams; a lag that grows means nobody reads the slot and pg_wal grows towards a full disk (above 256 MiB for 10 minutes alerts). Empty without a permanent slot; a gap while the database cannot be read. Runbook: "+runbooks+"#slot_lagging",
			"bytes", 24,
			query{expr: `max by (database) (pgleader_collector_slot_lag_bytes{` + sel + `})`, legend: "{{database}}"}))

	return b.Build()
}

// JSON returns the dashboard as the committed file holds it: indented by two
// spaces, with a final newline, HTML characters (<, >, &) left as they are.
func JSON(d sdk.Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return buf.Bytes(), nil
}
