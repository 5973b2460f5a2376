// Package dashboard builds pgleader's Grafana dashboard as code, with the
// Grafana Foundation SDK, over the metrics of package exporter.
//
// The dashboard is committed as JSON (Grafana's dashboard model) in
// exporter/pgleader-dashboard.json, written by `go generate ./exporter/...`
// from Build; TestDashboardJSONUpToDate fails when the two drift apart. Import
// the file in Grafana (Dashboards → New → Import), then pick the Prometheus
// that scrapes the exporter in its Data source selector (it starts on the
// default Prometheus data source).
//
// Variables: datasource (a Prometheus data source) and database, the value of
// the database label every pgleader_* series carries (one exporter may serve
// several databases), from label_values(pgleader_collector_up, database);
// multi-select with All. Every query selects database=~"$database" and keeps
// the database label, so that several selected databases show side by side.
//
// Every panel's query is evaluated by a test against a real Prometheus that
// scrapes an exporter over a live cluster (TestDashboardQueriesLive): each
// returns data, and the fault panels (failovers, fenced writes rejected,
// interference) show the faults the test causes, each counted once. Across a
// stop of a database's server (TestDashboardOutage) each query shows a gap, a
// stat UNKNOWN, or what is true of the collector (down, its snapshot's age) —
// never the last healthy figures.
//
// Counting events per interval: a bar of "Leadership changes", "Fenced writes
// rejected" or "Reconnects" is the rise of its series within the graph's step
// ($__interval, which the windows then tile), from the last sample before the
// window; for the figures every exporter of a database shares, the rise of the
// highest (two exporters see a change in different windows). changes() and
// increase() over $__rate_interval counted each event in every overlapping
// window.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package dashboard

//go:generate go run ./gen -o ../pgleader-dashboard.json
