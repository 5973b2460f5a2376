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

// zeroWhenNone makes a count that is absent when nothing fires (pgleader_alert
// has no series then) a 0 per database that the collector serves, so that a
// stat reads 0 rather than "No data" on a healthy database.
func zeroWhenNone(expr string) string {
	return fmt.Sprintf(`(%s) or (max by (database) (pgleader_collector_up{%s}) * 0)`, expr, sel)
}

// statPanel shows one figure per database; faultColor colours it from 1 on.
func statPanel(id uint32, title, description string, q query, faultColor string) *stat.PanelBuilder {
	q.instant = true
	return panel(stat.NewPanelBuilder(), id, title, description, 4, 4, q).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
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

// Build returns pgleader's dashboard.
func Build() (sdk.Dashboard, error) {
	upDown := valueText([3]string{"1", "up", "green"}, [3]string{"0", "DOWN", "red"})
	b := sdk.NewDashboardBuilder(Title).
		Uid(UID).
		Description("pgleader: leadership per scope, failovers, heartbeats, the collector's checks, fenced writes and collector health, per database. Built by exporter/dashboard (Go); do not edit the JSON by hand.").
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
		// another panel can be read against the failover that caused it.
		Annotation(sdk.NewAnnotationQueryBuilder().
			Name(LeadershipChangesAnnotation).
			Datasource(datasource).
			Expr(`max by (database, scope) (changes(pgleader_scope_epoch{` + sel + `}[1m])) > 0`).
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
			"1 when the exporter's collector reads the database and its snapshot is fresh. DOWN: every other panel of that database is blind (figures frozen or missing). Runbook: "+runbooks+"#collector_down",
			query{expr: `max by (database) (pgleader_collector_up{` + sel + `})`, legend: "{{database}}"},
			"").Mappings(upDown).Thresholds(thresholds("red", "green"))).
		WithPanel(statPanel(2, "Scopes without a leader",
			"Scopes that have no leader and are not IDLE (IDLE: every candidate stopped cleanly, nobody is meant to lead). Above 0 their singleton work is not being done; the alert fires after 10s. Runbook: "+runbooks+"#no_leader",
			query{expr: `sum by (database) (max by (database, scope) ((1 - pgleader_scope_has_leader{` + sel + `}) * (1 - pgleader_scope_idle{` + sel + `})))`, legend: "{{database}}"},
			"red")).
		WithPanel(statPanel(3, "Alerts firing",
			"Alerts the collector raises now (the same as pgleader status and pgleader top): the Active alerts table below names them. Each kind has its section in "+runbooks,
			query{expr: zeroWhenNone(`count by (database) (max by (database, alert, scope, node) (pgleader_alert{` + sel + `}))`), legend: "{{database}}"},
			"orange")).
		WithPanel(statPanel(4, "Split brain / stale leaders",
			"Scopes where the collector's split_brain or stale_leader check fires. split_brain: the lock holder and the recorded holder disagree, or the epoch went backwards; stale_leader (a zombie): the lock is held but its holder stopped heartbeating. Both page. Runbooks: "+runbooks+"#split_brain and "+runbooks+"#stale_leader",
			query{expr: `sum by (database) (max by (database, scope) (pgleader_scope_split_brain{` + sel + `})) + sum by (database) (max by (database, scope) (pgleader_scope_stale_leader{` + sel + `}))`, legend: "{{database}}"},
			"red")).
		WithPanel(statPanel(5, "Fenced writes rejected in range",
			"Fenced writes the database refused over the dashboard's time range: a former leader acted after losing leadership and its epoch stopped it. Fencing worked; find the zombie (the Active alerts table names the node). Runbook: "+runbooks+"#fence_rejected",
			query{expr: `sum by (database) (max by (database, scope) (increase(pgleader_fence_rejected_total{` + sel + `}[$__range])))`, legend: "{{database}}"},
			"orange")).
		WithPanel(statPanel(6, "Foreign sessions on scope locks",
			"Sessions that hold or wait on a scope's advisory lock without being its candidates (squatters). Above 0 leadership of those scopes is blocked or will pass to that session. pgleader status names the pid, role and client. Runbook: "+runbooks+"#interference",
			query{expr: `sum by (database) (max by (database, scope) (pgleader_scope_foreign_sessions{` + sel + `}))`, legend: "{{database}}"},
			"red"))

	// Leadership: who leads, changes, how long failovers took, heartbeats.
	b = b.WithRow(sdk.NewRowBuilder("Leadership").Id(101)).
		WithPanel(timelinePanel(7, "Leader per scope",
			"Who led each scope over time: one line per database, scope and node, coloured while that node leads. A gap with no node coloured is a time without a leader (see Failover duration); a node change is a failover or handover (pgleader history --scope SCOPE tells why).",
			24, 9, valueText([3]string{"1", "leader", "green"}),
			query{expr: `max by (database, scope, node) (pgleader_scope_leader{` + sel + `})`, legend: "{{database}} {{scope}}: {{node}}"})).
		WithPanel(timeseriesPanel(8, "Leadership changes (failovers and handovers)",
			"Epoch changes per scope: every grant raises the epoch by one, so each bar is a new term. A steady stream is flapping (more than 6 in 5 minutes alerts). Runbook: "+runbooks+"#flapping",
			"short", 12,
			query{expr: `max by (database, scope) (changes(pgleader_scope_epoch{` + sel + `}[$__rate_interval]))`, legend: "{{database}} {{scope}}"}).
			DrawStyle(common.GraphDrawStyleBars)).
		WithPanel(timeseriesPanel(9, "Failover duration",
			"Handover gap: how long the scope was without a leader before its current term began (the last failover's duration; above 5s alerts as slow_failover). Leaderless: how long a scope has had no leader right now (0 while led). Runbooks: "+runbooks+"#slow_failover and "+runbooks+"#no_leader",
			"s", 12,
			query{expr: `max by (database, scope) (pgleader_scope_last_handover_gap_seconds{` + sel + `})`, legend: "{{database}} {{scope}} handover gap"},
			query{expr: `max by (database, scope) (pgleader_scope_leaderless_seconds{` + sel + `})`, legend: "{{database}} {{scope}} leaderless"})).
		WithPanel(timeseriesPanel(10, "Heartbeat age vs trust window",
			"Age of each scope's last heartbeat beside the trust window its leader runs with. The age stays well below the window while the leader is healthy; above it the leader's gate is closed, and above window + 1s the stale_leader check fires (a frozen or cut-off leader still holds the lock). Runbook: "+runbooks+"#stale_leader",
			"s", 12,
			query{expr: `max by (database, scope) (pgleader_scope_heartbeat_age_seconds{` + sel + `})`, legend: "{{database}} {{scope}} heartbeat age"},
			query{expr: `max by (database, scope) (pgleader_scope_trust_window_seconds{` + sel + `})`, legend: "{{database}} {{scope}} trust window"})).
		WithPanel(timeseriesPanel(11, "Epoch per scope",
			"The current epoch (fencing token) of each scope. It only grows; a write fenced with an older epoch is refused. A jump of 2^40 or more follows a database failover (epoch_floor_raised). Runbook: "+runbooks+"#epoch_floor_raised",
			"none", 12,
			query{expr: `max by (database, scope) (pgleader_scope_epoch{` + sel + `})`, legend: "{{database}} {{scope}}"}))

	// Checks: the collector's alerts and the faults fencing stopped.
	b = b.WithRow(sdk.NewRowBuilder("Checks").Id(102)).
		WithPanel(timelinePanel(12, "Split brain, stale leader, stale node",
			"The collector's safety checks over time, 0 (ok) or 1 (firing) per scope or node. split_brain and stale_leader page at once; a stale node (crashed, frozen or cut off without stopping cleanly, unseen for 30s) warns after a minute. Runbooks: "+runbooks+"#split_brain, #stale_leader, #stale_node",
			24, 8, valueText([3]string{"0", "ok", "green"}, [3]string{"1", "FIRING", "red"}),
			query{expr: `max by (database, scope) (pgleader_scope_split_brain{` + sel + `})`, legend: "{{database}} {{scope}} split brain"},
			query{expr: `max by (database, scope) (pgleader_scope_stale_leader{` + sel + `})`, legend: "{{database}} {{scope}} stale leader"},
			query{expr: `max by (database, node) (pgleader_node_stale{` + sel + `})`, legend: "{{database}} {{node}} stale node"})).
		WithPanel(timeseriesPanel(13, "Fenced writes rejected",
			"Fenced writes the database refused per scope: a former leader (a zombie) acted under an old epoch and the fence stopped it. Each one is a fault that fencing contained; repeated ones mean a process keeps acting after losing leadership. Runbook: "+runbooks+"#fence_rejected",
			"short", 12,
			query{expr: `max by (database, scope) (increase(pgleader_fence_rejected_total{` + sel + `}[$__rate_interval]))`, legend: "{{database}} {{scope}}"}).
			DrawStyle(common.GraphDrawStyleBars)).
		WithPanel(timeseriesPanel(14, "Interference: foreign sessions on scope locks",
			"Sessions holding or waiting on a scope's advisory lock that are not its candidates (a squatter, or someone testing with pg_advisory_lock in psql). While above 0 the scope cannot change hands normally; after 15s it alerts. pgleader status names the session. Runbook: "+runbooks+"#interference",
			"short", 12,
			query{expr: `max by (database, scope) (pgleader_scope_foreign_sessions{` + sel + `})`, legend: "{{database}} {{scope}}"})).
		WithPanel(panel(table.NewPanelBuilder(), 15, "Active alerts",
			"Every alert the collector raises now, by database, kind, severity, scope and node: the alerts of pgleader status and pgleader top. Each kind is a section of "+runbooks+" (the anchor is the kind, e.g. #no_leader).",
			24, 7,
			query{expr: `max by (database, alert, severity, scope, node) (pgleader_alert{` + sel + `})`, instant: true, table: true}).
			Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"})).
			Transformations([]sdk.DataTransformerConfig{{Id: "organize", Options: map[string]any{
				"excludeByName": map[string]any{"Time": true, "Value": true},
				"indexByName":   map[string]any{"database": 0, "alert": 1, "severity": 2, "scope": 3, "node": 4},
			}}}))

	// Nodes.
	b = b.WithRow(sdk.NewRowBuilder("Nodes").Id(103)).
		WithPanel(timelinePanel(16, "Nodes up",
			"Each candidate node: up while it runs and is seen; DOWN once it stopped or has not been seen recently. A node DOWN without having stopped cleanly turns stale. Runbook: "+runbooks+"#stale_node",
			12, 8, upDown,
			query{expr: `max by (database, node) (pgleader_node_up{` + sel + `})`, legend: "{{database}} {{node}}"})).
		WithPanel(timelinePanel(17, "Supervised commands up (pgleader run)",
			"For nodes run as pgleader run: whether the supervised command runs (up) or not (DOWN: waiting for leadership, backing off after an exit, or stopped). Empty when no node supervises a command.",
			12, 8, upDown,
			query{expr: `max by (database, node, command) (pgleader_node_child_up{` + sel + `})`, legend: "{{database}} {{node}} {{command}}"})).
		WithPanel(timeseriesPanel(18, "Node last seen",
			"Age of each node's last sign of life in the database. It stays around the heartbeat interval; a rising line is a node that crashed, froze or lost the database (stale after 30s). Runbook: "+runbooks+"#stale_node",
			"s", 24,
			query{expr: `max by (database, node) (pgleader_node_last_seen_age_seconds{` + sel + `})`, legend: "{{database}} {{node}}"}))

	// Collector.
	b = b.WithRow(sdk.NewRowBuilder("Collector").Id(104)).
		WithPanel(timelinePanel(19, "Collector up over time",
			"Per database, whether the exporter's collector reads it (up) or not (DOWN: cannot connect, or its newest snapshot is stale). While DOWN the other panels of that database show old or no figures; after a minute it pages. Runbook: "+runbooks+"#collector_down",
			12, 8, upDown,
			query{expr: `max by (database) (pgleader_collector_up{` + sel + `})`, legend: "{{database}}"})).
		WithPanel(timelinePanel(20, "Collector source",
			"Where the collector's picture comes from: logical replication (changes streamed), live (LISTEN/NOTIFY), polling only (notifications are not arriving: changes show a poll interval late), or disconnected.",
			12, 8, valueText([3]string{"3", "logical", "green"}, [3]string{"2", "live", "green"}, [3]string{"1", "polling", "orange"}, [3]string{"0", "disconnected", "red"}),
			query{expr: `max by (database) (pgleader_collector_source{` + sel + `})`, legend: "{{database}}"})).
		WithPanel(timeseriesPanel(21, "Snapshot age and read duration",
			"Snapshot age: how old the collector's picture is at the scrape (above 10s the collector counts as down). Read duration: how long its last read of the database took; a rising one is a loaded database or lock table.",
			"s", 12,
			query{expr: `max by (database) (pgleader_collector_snapshot_age_seconds{` + sel + `})`, legend: "{{database}} snapshot age"},
			query{expr: `max by (database) (pgleader_collector_poll_duration_seconds{` + sel + `})`, legend: "{{database}} read duration"})).
		WithPanel(timeseriesPanel(22, "Read errors and reconnects",
			"Failed reads of the database per second, and reconnects: 0 when healthy. Errors with the collector still up are transient; errors with it down are an outage of its connection (the exporter's log names the cause). Runbook: "+runbooks+"#collector_down",
			"short", 12,
			query{expr: `sum by (database) (rate(pgleader_collector_poll_errors_total{` + sel + `}[$__rate_interval]))`, legend: "{{database}} read errors/s"},
			query{expr: `sum by (database) (increase(pgleader_collector_reconnects_total{` + sel + `}[$__rate_interval]))`, legend: "{{database}} reconnects"})).
		WithPanel(timeseriesPanel(23, "Replication slot lag",
			"WAL the server keeps for the collector's permanent replication slot (--slot). It stays small while the collector streams; a lag that grows means nobody reads the slot and pg_wal grows towards a full disk (above 256 MiB for 10 minutes alerts). Empty without a permanent slot. Runbook: "+runbooks+"#slot_lagging",
			"bytes", 12,
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
