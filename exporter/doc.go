// Package exporter turns pgleader's state into Prometheus metrics, in two places.
//
// # The cluster view: Exporter
//
// Exporter is a prometheus.Collector over collector snapshots: at each scrape it
// takes the newest *collector.Snapshot from its SnapshotSource (a
// *collector.Collector) and emits constant metrics from it. It never touches the
// database, so a scrape costs what encoding the snapshot costs (≈ a few
// milliseconds for 100 scopes and 300 nodes; BenchmarkScrape). Every figure is the
// value at the snapshot's read, in database time for ages and durations; a
// collector that stops producing snapshots shows as pgleader_collector_up 0 once
// the newest snapshot is older than Options.StaleAfter.
//
// # Unknown is not served as known
//
// While the collector cannot read the database it re-publishes its last good
// snapshot. Its figures describe the past: served as they are, Prometheus stored
// a leader, live nodes and a heartbeat 0.2 s old for every second of an outage,
// and every panel (and every postmortem read from them) showed a healthy
// cluster. So while pgleader_collector_up is 0 — the collector is disconnected,
// or its newest snapshot is older than Options.StaleAfter — the Exporter serves
// nothing it read from the database: no pgleader_scope_*, pgleader_node_*,
// pgleader_fence_rejected_total, lock, notification queue, timeline, epoch
// floor or slot lag series, and of pgleader_alert only collector_down. At the
// next scrape Prometheus marks the missing series stale: every panel of that
// database shows a gap, and no rule judges a figure nobody read. What is true
// now stays: pgleader_collector_up 0, the snapshot's age (it keeps growing), the
// time of the last successful read, the collector's counters and the
// collector_down alert.
//
// The other choice was to keep serving what stays true, ages growing from the
// last known timestamps (heartbeats, last_seen). It was not taken: an age alone
// does not say whether a scope has a leader or a node is up (those series would
// need a gap anyway), and every age compared with a threshold would cross it
// during any outage longer than a trust window, so each scope and node would
// page as stale on top of collector_down, for a fault of the collector's
// connection. One rule for every series is simpler to read: unknown is absent.
// A fleet judges each database alone: one that cannot be read leaves its own
// gap, and the others are served as usual.
//
// # A fleet: Fleet
//
// Fleet serves several databases from one process (pgleader exporter
// --all-targets): an Exporter per database, registered with the constant label
// database="NAME" (DatabaseLabel), so that every pgleader_* series below also
// carries database, and the rules and dashboards aggregate per database. Each
// database has its own collector: a scrape renders each one's newest snapshot and
// never waits on a database, and pgleader_collector_up{database} is 0 for one
// that is not read (without its other series: see above) while the others are
// served as usual. Fleet.Handler adds
// /probe?target=NAME (one database only: the multi-target pattern of
// blackbox_exporter, for Prometheus-side fan-out). The lone database of
// pgleader exporter --dsn is a fleet of one, named after its database name.
//
// Metrics (labels are database, scope and node only, so cardinality follows the
// fleet's size and nothing else; database is left out of the list below). A
// node that stopped, or has not been seen, for longer than the collector's
// Config.NodeRetention (pgleader exporter --node-retention, default 1h) leaves
// the snapshot and with it every pgleader_node_* series: a node restarted under
// a new id each time does not add series for good.
//
//	pgleader_scope_epoch{scope}                       gauge   current epoch (the fencing token)
//	pgleader_scope_has_leader{scope}                  gauge   1 while a term is open and its lock is held
//	pgleader_scope_leader{scope,node}                 gauge   1 for the current leader; absent when none
//	pgleader_scope_heartbeat_age_seconds{scope}       gauge   age of leader_state.last_heartbeat (absent if never)
//	pgleader_scope_tenure_seconds{scope}              gauge   age of the open term (0 when none)
//	pgleader_scope_leaderless_seconds{scope}          gauge   how long the scope has had no leader (0 while led)
//	pgleader_scope_trust_window_seconds{scope}        gauge   the holder's trust window W
//	pgleader_scope_followers{scope}                   gauge   live candidates other than the leader
//	pgleader_scope_lock_holders{scope}                gauge   backends holding the scope's advisory lock (1 normally)
//	pgleader_scope_lock_waiters{scope}                gauge   backends waiting for it
//	pgleader_scope_foreign_sessions{scope}            gauge   sessions on the scope's lock that are not its candidates (squatters)
//	pgleader_scope_split_brain{scope}                 gauge   1 while the collector's split_brain check fires
//	pgleader_scope_stale_leader{scope}                gauge   1 while the stale_leader check fires
//	pgleader_scope_last_handover_gap_seconds{scope}   gauge   leaderless gap before the open term (absent when none is open, or for a first term: no gap, not 0)
//	pgleader_scope_idle{scope}                        gauge   1 while IDLE: no leader, and nobody meant to lead
//	pgleader_scope_handover_pending{scope}            gauge   1 while a requested handover reserves the scope
//	pgleader_scopes_retired                           gauge   scopes retired (pgleader scope retire); they have no other series
//	pgleader_alert{alert,severity,scope,node}         gauge   1 per alert the collector raises now (status and top show the same); absent when none
//	pgleader_fence_rejected_total{scope}              counter fenced writes the database refused
//	pgleader_node_up{node}                            gauge   1 when the node is live (not stopped, seen recently)
//	pgleader_node_last_seen_age_seconds{node}         gauge   age of nodes.last_seen
//	pgleader_node_leader{node,scope}                  gauge   1 per scope the node leads
//	pgleader_node_stale{node}                         gauge   1 while the stale_node check fires
//	pgleader_node_priority{node}                      gauge   candidate priority (a free scope goes to the highest; 0 never leads)
//	pgleader_node_failback_after_seconds{node}        gauge   a preferred node's failback delay (--preferred); 0: no failback
//	pgleader_node_restarts{node}                      gauge   times the node id was registered again by a new process (a crash loop shows)
//	pgleader_node_child_up{node,command}              gauge   pgleader run: 1 while its command runs (absent for a plain node)
//	pgleader_node_child_restarts{node,command}        gauge   pgleader run: restarts of its command under --restart
//	pgleader_advisory_locks                           gauge   granted advisory locks in the database
//	pgleader_advisory_lock_waiters                    gauge   advisory lock requests not granted
//	pgleader_lock_table_capacity                      gauge   shared lock table size (absent when unknown)
//	pgleader_lock_table_used                          gauge   the whole server's locks in the shared lock table
//	pgleader_notify_queue_usage_ratio                 gauge   fraction of the server's notification queue in use
//	pgleader_database_timeline                        gauge   WAL timeline the database writes on (a promotion raises it; absent while unknown)
//	pgleader_epoch_floor                              gauge   every epoch of the current timeline is above it: (timeline − 1)·2^40
//	pgleader_collector_up                             gauge   1 when the snapshot is fresh and the database readable; while 0, only pgleader_collector_*, pgleader_exporter_* and pgleader_alert{alert="collector_down"} are served
//	pgleader_collector_source                         gauge   3 logical, 2 live, 1 polling, 0 disconnected
//	pgleader_collector_snapshot_age_seconds           gauge   age of the newest snapshot at the scrape
//	pgleader_collector_last_success_timestamp_seconds gauge   last successful read (Unix time)
//	pgleader_collector_poll_duration_seconds          gauge   duration of the last successful read
//	pgleader_collector_polls_total                    counter
//	pgleader_collector_poll_errors_total              counter
//	pgleader_collector_notifications_total            counter leader_change notifications received
//	pgleader_collector_notifications_coalesced_total  counter notifications folded into a pending read (a storm shows here)
//	pgleader_collector_reconnects_total               counter
//	pgleader_collector_dropped_events_total           counter events slow subscribers missed
//	pgleader_collector_slot_lag_bytes                 gauge   WAL a permanent slot retains (absent without one)
//	pgleader_collector_last_change_age_seconds        gauge   age of the logical stream's last transaction (absent without)
//	pgleader_collector_decode_errors_total            counter logical replication messages not decoded
//	pgleader_exporter_scrape_duration_seconds         gauge   time this collection took
//	pgleader_exporter_scrape_success                  gauge   1 when a snapshot was available
//
// The 0/1 alert gauges and pgleader_alert mirror the collector's own checks, so
// that Prometheus, pgleader status and pgleader top agree: the rules in
// rules/pgleader.rules.yml read pgleader_alert{alert="KIND"} where a check needs
// more than the gauges carry (flapping, slow_failover, no_follower,
// unbound_leader), and recompute the others on the collector's default
// thresholds (collector.DefaultConfig).
//
// Handler serves /metrics, /healthz, /readyz and a small index; Ready is its
// readiness check over a collector. No endpoint shows how the collector connects:
// /readyz answers "not ready: no snapshot yet" or "not ready: database
// unreachable", and the error behind it, which names the user, database, host
// and port, goes to the log once per change.
//
// DefaultListen is 127.0.0.1:9817: loopback only, so that a host's exporter is
// not open to its whole network by default. A Prometheus on another host needs
// the address widened (`pgleader exporter --listen :9817`, or 0.0.0.0:9817, or
// one interface's address). The Prometheus project's exporter port range
// (9100–9999, the "Default port allocations" wiki page) has been fully allocated
// since 2023, so no unclaimed port is left in it; 9817 avoids postgres_exporter's
// 9187, which usually runs next to pgleader, and the Prometheus server's own
// 9090–9094. Change it when it collides with something on the host.
//
// The Grafana dashboard over these metrics, pgleader-dashboard.json in this
// directory, is built by package exporter/dashboard (go generate ./exporter/...).
//
// # The node view
//
// A service that embeds the election engine exports its own view (whether this
// process leads, its epochs, losses by reason, heartbeat round trips) with package
// election/electionprom, which depends on the engine and client_golang only; this
// package, which reads the whole database through the collector, is for the
// cluster view.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package exporter
