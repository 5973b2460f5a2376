package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// DefaultListen is the address the exporter listens on unless told otherwise:
// the loopback interface only. A Prometheus on another host needs it widened
// (":9817" or "0.0.0.0:9817"). See the package doc for why this port.
const DefaultListen = "127.0.0.1:9817"

// DefaultStaleAfter is the default Options.StaleAfter.
const DefaultStaleAfter = 10 * time.Second

// SnapshotSource gives the newest snapshot, or nil before the first one.
// *collector.Collector satisfies it.
type SnapshotSource interface {
	Snapshot() *collector.Snapshot
}

// Options configures an Exporter. The zero value is usable.
type Options struct {
	// Now returns the current time; tests set it. Default time.Now.
	Now func() time.Time

	// ConstLabels are labels every series of the Exporter carries, such as
	// DatabaseLabel (Fleet sets it). Their names must not be scope, node,
	// alert, severity or command. Setting them here rather than wrapping the
	// registerer spares a scrape a descriptor per series: over a fleet of ten
	// databases of 1,000 scopes, a third of the scrape's time.
	ConstLabels prometheus.Labels

	// StaleAfter: a snapshot older than this (by its At, against Now) is reported
	// as pgleader_collector_up 0, and its scope, node and lock series are left
	// out, because its figures no longer describe the cluster. Default
	// DefaultStaleAfter (10s); keep it a few times the collector's poll
	// interval.
	StaleAfter time.Duration
}

var _ prometheus.Collector = (*Exporter)(nil)

// Exporter is a prometheus.Collector that renders the newest collector snapshot at
// each scrape. It holds no state of its own besides its options and is safe for
// concurrent scrapes.
type Exporter struct {
	descs      map[*prometheus.Desc]*prometheus.Desc // the package's → with ConstLabels; nil without
	layouts    [][]labelSlot                         // per descSpec.idx: its labels in the text format's order
	src        SnapshotSource
	now        func() time.Time
	staleAfter time.Duration
}

// New returns an Exporter reading src. Register it on a prometheus.Registry and
// serve that registry with Handler.
func New(src SnapshotSource, opts Options) *Exporter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	e := &Exporter{src: src, now: opts.Now, staleAfter: opts.StaleAfter, layouts: layouts(opts.ConstLabels)}
	if len(opts.ConstLabels) > 0 {
		e.descs = make(map[*prometheus.Desc]*prometheus.Desc, len(allDescs))
		for _, d := range allDescs {
			sp := specs[d]
			e.descs[d] = prometheus.NewDesc(sp.name, sp.help, sp.labels, opts.ConstLabels)
		}
	}
	return e
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	specs[d] = &descSpec{name: name, help: help, labels: labels, idx: len(specs)}
	return d
}

// descSpec is what a descriptor was made of, to make it again with constant
// labels (a prometheus.Desc does not tell).
type descSpec struct {
	name, help string
	labels     []string
	idx        int // order of creation: an index for per-descriptor slices
}

// specs holds the spec of every descriptor of the package (written only while
// the package's variables are initialised).
var specs = map[*prometheus.Desc]*descSpec{}

// The descriptors are fixed: the set of metric names and label names never depends
// on the snapshot, only which series are present does.
var (
	scopeEpoch         = desc("pgleader_scope_epoch", "Current epoch (fencing token) of the scope.", "scope")
	scopeHasLeader     = desc("pgleader_scope_has_leader", "1 while the scope has an open term whose advisory lock is held, else 0.", "scope")
	scopeLeader        = desc("pgleader_scope_leader", "1 for the node that currently leads the scope; absent when the scope has no leader.", "scope", "node")
	scopeHeartbeatAge  = desc("pgleader_scope_heartbeat_age_seconds", "Age of the scope's last heartbeat (database time) at the collector's read; absent if never beaten.", "scope")
	scopeTenure        = desc("pgleader_scope_tenure_seconds", "How long the open term has lasted (0 when none).", "scope")
	scopeLeaderless    = desc("pgleader_scope_leaderless_seconds", "How long the scope has had no leader, as observed by the collector (0 while led).", "scope")
	scopeTrustWindow   = desc("pgleader_scope_trust_window_seconds", "Trust window the scope's holder runs with.", "scope")
	scopeFollowers     = desc("pgleader_scope_followers", "Live candidate nodes of the scope other than the leader.", "scope")
	scopeLockHolders   = desc("pgleader_scope_lock_holders", "Backends pg_locks shows holding the scope's advisory lock (normally 1 while led).", "scope")
	scopeLockWaiters   = desc("pgleader_scope_lock_waiters", "Backends waiting for the scope's advisory lock.", "scope")
	scopeForeign       = desc("pgleader_scope_foreign_sessions", "Sessions that hold or wait on the scope's advisory lock without being its candidates (squatters; the interference check).", "scope")
	scopeSplitBrain    = desc("pgleader_scope_split_brain", "1 while the collector's split_brain check fires for the scope, else 0.", "scope")
	scopeStaleLeader   = desc("pgleader_scope_stale_leader", "1 while the collector's stale_leader check fires for the scope, else 0.", "scope")
	scopeHandoverGap   = desc("pgleader_scope_last_handover_gap_seconds", "Time without a leader before the open term began; absent when no term is open or it is the scope's first.", "scope")
	scopeIdle          = desc("pgleader_scope_idle", "1 while the scope is IDLE: no leader and nobody meant to lead (every candidate stopped cleanly, no term left open), else 0.", "scope")
	scopeHandover      = desc("pgleader_scope_handover_pending", "1 while a requested handover (pgleader handover) reserves the scope for its target, else 0.", "scope")
	alertActive        = desc("pgleader_alert", "1 for each alert the collector raises now (the alerts of pgleader status and top: interference, split_brain, stale_leader, …); absent when none.", "alert", "severity", "scope", "node")
	scopesRetired      = desc("pgleader_scopes_retired", "Scopes retired with pgleader scope retire: left out of every other pgleader_scope_* series.")
	fenceRejected      = desc("pgleader_fence_rejected_total", "Fenced writes the database refused (audit kind fence_rejected) since the collector started.", "scope")
	nodeUp             = desc("pgleader_node_up", "1 when the node is live: not stopped and seen recently.", "node")
	nodeLastSeenAge    = desc("pgleader_node_last_seen_age_seconds", "Age of the node's last_seen (database time) at the collector's read.", "node")
	nodeLeader         = desc("pgleader_node_leader", "1 for each scope the node leads.", "node", "scope")
	nodeStale          = desc("pgleader_node_stale", "1 while the collector's stale_node check fires for the node, else 0.", "node")
	nodePriority       = desc("pgleader_node_priority", "Candidate priority of the node: a free scope goes to its live candidate of highest priority; 0 never leads.", "node")
	nodeChildUp        = desc("pgleader_node_child_up", "For a pgleader run node: 1 while its supervised command runs, else 0 (absent for a plain node).", "node", "command")
	nodeChildRestarts  = desc("pgleader_node_child_restarts", "For a pgleader run node: how many times its command was restarted under --restart since the node started.", "node", "command")
	nodeRestarts       = desc("pgleader_node_restarts", "Times the node id was registered again by a new process since it was first registered (a crash loop under a fixed id shows here).", "node")
	nodeFailbackAfter  = desc("pgleader_node_failback_after_seconds", "Failback delay of a preferred node (pgleader node --preferred): it takes its scopes back from a live leader of lower priority once up this long. 0 when the node does not fail back.", "node")
	advisoryLocks      = desc("pgleader_advisory_locks", "Granted advisory locks in the database (all of them, not only pgleader's).")
	advisoryWaiters    = desc("pgleader_advisory_lock_waiters", "Advisory lock requests not granted in the database.")
	lockTableCapacity  = desc("pgleader_lock_table_capacity", "Nominal size of the shared lock table: max_locks_per_transaction * (max_connections + max_prepared_transactions).")
	lockTableUsed      = desc("pgleader_lock_table_used", "Granted locks of the whole server that take an entry of the shared lock table (every database's, advisory or not; fast-path locks excluded).")
	notifyQueueUsage   = desc("pgleader_notify_queue_usage_ratio", "pg_notification_queue_usage(): the fraction of the server's notification queue in use (at 1 every NOTIFY fails, pgleader's claims and releases included).")
	databaseTimeline   = desc("pgleader_database_timeline", "WAL timeline the database writes on; it rises when a standby is promoted (a failover). Absent while unknown (the collector reads a standby).")
	epochFloor         = desc("pgleader_epoch_floor", "Every epoch granted on the current timeline is above this value: (timeline - 1) * 2^40, 0 before any failover. Absent while unknown.")
	collectorUp        = desc("pgleader_collector_up", "1 when the collector's newest snapshot is fresh and the database readable, else 0.")
	collectorSource    = desc("pgleader_collector_source", "Where the collector's picture comes from: 3 logical replication, 2 live (LISTEN), 1 polling only, 0 disconnected.")
	collectorAge       = desc("pgleader_collector_snapshot_age_seconds", "Age of the collector's newest snapshot at the scrape.")
	collectorLastOK    = desc("pgleader_collector_last_success_timestamp_seconds", "Unix time of the collector's last successful read.")
	collectorPollDur   = desc("pgleader_collector_poll_duration_seconds", "Duration of the collector's last successful read.")
	collectorPolls     = desc("pgleader_collector_polls_total", "Reads of the database the collector attempted.")
	collectorPollErrs  = desc("pgleader_collector_poll_errors_total", "Reads of the database that failed.")
	collectorNotifs    = desc("pgleader_collector_notifications_total", "leader_change notifications the collector received.")
	collectorCoalesced = desc("pgleader_collector_notifications_coalesced_total", "leader_change notifications that arrived while an earlier one waited for its read, so cost no read of their own (a storm of forged notifications shows here).")
	collectorReconnect = desc("pgleader_collector_reconnects_total", "Times the collector reconnected to the database.")
	collectorDropped   = desc("pgleader_collector_dropped_events_total", "Collector events slow subscribers missed.")
	collectorSlotLag   = desc("pgleader_collector_slot_lag_bytes", "WAL the server keeps for the collector's permanent replication slot: pg_current_wal_lsn() - confirmed_flush_lsn; absent without a permanent slot.")
	collectorChangeAge = desc("pgleader_collector_last_change_age_seconds", "Age at the scrape of the last transaction the collector's logical replication source received (heartbeats included); absent without the logical source.")
	collectorDecodeErr = desc("pgleader_collector_decode_errors_total", "Logical replication messages the collector could not decode.")
	scrapeDuration     = desc("pgleader_exporter_scrape_duration_seconds", "Time the exporter took to build this scrape's metrics.")
	scrapeSuccess      = desc("pgleader_exporter_scrape_success", "1 when the exporter had a collector snapshot to render, else 0.")
)

var allDescs = []*prometheus.Desc{
	scopeEpoch, scopeHasLeader, scopeLeader, scopeHeartbeatAge, scopeTenure, scopeLeaderless,
	scopeTrustWindow, scopeFollowers, scopeLockHolders, scopeLockWaiters, scopeForeign, scopeSplitBrain,
	scopeStaleLeader, scopeHandoverGap, scopeIdle, scopeHandover, scopesRetired, alertActive, fenceRejected,
	nodeUp, nodeLastSeenAge, nodeLeader, nodeStale, nodePriority, nodeFailbackAfter, nodeRestarts, nodeChildUp, nodeChildRestarts,
	advisoryLocks, advisoryWaiters, lockTableCapacity, lockTableUsed, notifyQueueUsage, databaseTimeline, epochFloor,
	collectorUp, collectorSource, collectorAge, collectorLastOK, collectorPollDur, collectorPolls,
	collectorPollErrs, collectorNotifs, collectorCoalesced, collectorReconnect, collectorDropped,
	collectorSlotLag, collectorChangeAge, collectorDecodeErr,
	scrapeDuration, scrapeSuccess,
}

// Describe sends the descriptors of every metric the Exporter can emit.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- e.desc(d)
	}
}

// SourceValue is the value of pgleader_collector_source for a collector source:
// 3 logical, 2 live, 1 polling, 0 disconnected (and for anything unknown), so that
// higher is better and `< 2` means "notifications are not arriving".
func SourceValue(s collector.Source) float64 {
	switch s {
	case collector.SourceLogical:
		return 3
	case collector.SourceLive:
		return 2
	case collector.SourcePolling:
		return 1
	}
	return 0
}

// Collect renders the newest snapshot. With no snapshot it emits only
// pgleader_collector_up 0 and the scrape metrics; with a snapshot that is not
// current (pgleader_collector_up 0) the collector's health and its
// collector_down alert, none of the figures it read from the database (see the
// package doc).
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.emit(chanSink{e, ch})
}

// emit sends every series of the newest snapshot to ch.
func (e *Exporter) emit(ch sink) {
	began := time.Now()
	snap := e.src.Snapshot()
	ok := 0.0
	if snap == nil {
		e.gauge(ch, collectorUp, 0)
	} else {
		ok = 1
		e.collectSnapshot(ch, snap)
	}
	e.gauge(ch, scrapeSuccess, ok)
	e.gauge(ch, scrapeDuration, time.Since(began).Seconds())
}

// flags are the alert gauges of one scope or node.
type flags struct{ splitBrain, staleLeader, staleNode bool }

func (e *Exporter) collectSnapshot(ch sink, s *collector.Snapshot) {
	h := s.Health
	age := e.now().Sub(s.At)
	up := !s.At.IsZero() && age <= e.staleAfter && h.Source != collector.SourceDisconnected
	if up {
		e.collectState(ch, s)
	} else {
		// The snapshot is the last good read, re-published: what it says of the
		// database is not known now (package doc). Only the outage itself is.
		for _, a := range s.Alerts {
			if a.Kind == collector.AlertCollectorDown {
				e.gauge(ch, alertActive, 1, string(a.Kind), string(a.Severity), a.Scope, a.Node)
				break
			}
		}
	}

	e.gauge(ch, collectorUp, b2f(up))
	e.gauge(ch, collectorSource, SourceValue(h.Source))
	if !s.At.IsZero() {
		e.gauge(ch, collectorAge, max(age, 0).Seconds())
	}
	if !h.LastPoll.IsZero() {
		e.gauge(ch, collectorLastOK, float64(h.LastPoll.UnixNano())/1e9)
	}
	e.gauge(ch, collectorPollDur, h.PollDuration.Seconds())
	e.counter(ch, collectorPolls, float64(h.Polls))
	e.counter(ch, collectorPollErrs, float64(h.PollErrors))
	e.counter(ch, collectorNotifs, float64(h.Notifications))
	e.counter(ch, collectorCoalesced, float64(h.NotificationsCoalesced))
	e.counter(ch, collectorReconnect, float64(h.Reconnects))
	e.counter(ch, collectorDropped, float64(h.DroppedEvents))
	if up && h.Slot != "" && h.SlotLagBytes >= 0 {
		// Only a permanent slot reports a lag (a temporary one ends with its
		// stream); the lag is read from the database, so it is unknown while
		// the database is not read.
		e.gauge(ch, collectorSlotLag, float64(h.SlotLagBytes))
	}
	if !h.LastChange.IsZero() {
		e.gauge(ch, collectorChangeAge, max(e.now().Sub(h.LastChange), 0).Seconds())
	}
	e.counter(ch, collectorDecodeErr, float64(h.DecodeErrors))
}

// collectState sends the series read from the database: scopes, nodes,
// alerts, locks. Only for a snapshot that is current (collectSnapshot).
func (e *Exporter) collectState(ch sink, s *collector.Snapshot) {
	scopeFlags := map[string]*flags{}
	nodeFlags := map[string]*flags{}
	flag := func(m map[string]*flags, key string) *flags {
		f := m[key]
		if f == nil {
			f = &flags{}
			m[key] = f
		}
		return f
	}
	active := map[string]bool{} // alert keys emitted: a repeated series is a scrape error
	note := func(a collector.Alert) {
		if k := a.Key(); !active[k] {
			active[k] = true
			e.gauge(ch, alertActive, 1, string(a.Kind), string(a.Severity), a.Scope, a.Node)
		}
		switch a.Kind {
		case collector.AlertSplitBrain:
			flag(scopeFlags, a.Scope).splitBrain = true
		case collector.AlertStaleLeader:
			flag(scopeFlags, a.Scope).staleLeader = true
		case collector.AlertStaleNode:
			flag(nodeFlags, a.Node).staleNode = true
		}
	}
	for _, a := range s.Alerts {
		note(a)
	}

	known := make(map[string]bool, len(s.Scopes))
	for i := range s.Scopes {
		sc := &s.Scopes[i]
		known[sc.Name] = true
		for _, a := range sc.Alerts {
			if a.Scope == "" {
				a.Scope = sc.Name
			}
			note(a)
		}
		f := flag(scopeFlags, sc.Name)
		name := sc.Name
		e.gauge(ch, scopeEpoch, float64(sc.Epoch), name)
		e.gauge(ch, scopeHasLeader, b2f(sc.HasLeader()), name)
		if sc.HasLeader() {
			e.gauge(ch, scopeLeader, 1, name, sc.Leader)
		}
		if !sc.LastHeartbeat.IsZero() {
			e.gauge(ch, scopeHeartbeatAge, sc.HeartbeatAge.Seconds(), name)
		}
		e.gauge(ch, scopeTenure, sc.Tenure.Seconds(), name)
		e.gauge(ch, scopeLeaderless, sc.LeaderlessFor.Seconds(), name)
		e.gauge(ch, scopeTrustWindow, sc.Timing.TrustWindow.Seconds(), name)
		e.gauge(ch, scopeFollowers, float64(len(sc.Followers)), name)
		e.gauge(ch, scopeLockHolders, float64(len(sc.LockPIDs)), name)
		e.gauge(ch, scopeLockWaiters, float64(sc.Waiters), name)
		e.gauge(ch, scopeForeign, float64(len(sc.Interference)), name)
		e.gauge(ch, scopeSplitBrain, b2f(f.splitBrain), name)
		e.gauge(ch, scopeStaleLeader, b2f(f.staleLeader), name)
		if sc.OpenTerm != nil && sc.OpenTerm.HandoverGap > 0 {
			// A scope's first term has no predecessor, so no gap: the database
			// records none (NULL), which the collector reads as 0. Any real gap
			// is above 0 (the claim commits after the release it follows).
			e.gauge(ch, scopeHandoverGap, sc.OpenTerm.HandoverGap.Seconds(), name)
		}
		// The no-leader rule fires only for scopes that are not idle.
		e.gauge(ch, scopeIdle, b2f(sc.Verdict == collector.VerdictIdle), name)
		e.gauge(ch, scopeHandover, b2f(sc.HandoverTo != ""), name)
		// Every known scope gets its counter, 0 included, so that increase() sees
		// the first rejection.
		e.counter(ch, fenceRejected, float64(s.FenceRejected[name]), name)
	}
	for name, n := range s.FenceRejected {
		if !known[name] {
			e.counter(ch, fenceRejected, float64(n), name)
		}
	}
	e.gauge(ch, scopesRetired, float64(s.Retired))

	led := map[string]bool{} // of one node: a repeated series is a scrape error
	for i := range s.Nodes {
		n := &s.Nodes[i]
		e.gauge(ch, nodeUp, b2f(n.Live), n.ID)
		e.gauge(ch, nodeLastSeenAge, n.LastSeenAge.Seconds(), n.ID)
		clear(led)
		for _, scope := range n.Leads {
			if !led[scope] {
				led[scope] = true
				e.gauge(ch, nodeLeader, 1, n.ID, scope)
			}
		}
		e.gauge(ch, nodeStale, b2f(nodeFlags[n.ID] != nil && nodeFlags[n.ID].staleNode), n.ID)
		e.gauge(ch, nodePriority, float64(n.Priority), n.ID)
		e.gauge(ch, nodeFailbackAfter, n.FailbackAfter.Seconds(), n.ID)
		e.gauge(ch, nodeRestarts, float64(n.Restarts), n.ID)
		if sv := n.Supervisor; sv != nil && n.StoppedAt.IsZero() {
			e.gauge(ch, nodeChildUp, b2f(sv.PID > 0 && (sv.State == "running" || sv.State == "draining")), n.ID, sv.Command)
			e.gauge(ch, nodeChildRestarts, float64(sv.Restarts), n.ID, sv.Command)
		}
	}

	e.gauge(ch, advisoryLocks, float64(s.Locks.Advisory))
	e.gauge(ch, advisoryWaiters, float64(s.Locks.Waiting))
	if s.Locks.Capacity > 0 {
		// Absent rather than 0 when unknown: the lock-pressure rule divides by it.
		e.gauge(ch, lockTableCapacity, float64(s.Locks.Capacity))
	}
	e.gauge(ch, lockTableUsed, float64(s.Locks.Used))
	e.gauge(ch, notifyQueueUsage, s.Locks.NotifyQueue)
	if s.Timeline > 0 {
		e.gauge(ch, databaseTimeline, float64(s.Timeline))
		e.gauge(ch, epochFloor, float64(s.EpochFloor))
	}
}

func (e *Exporter) gauge(ch sink, d *prometheus.Desc, v float64, labels ...string) {
	ch.add(d, prometheus.GaugeValue, v, labelValues(labels))
}

func (e *Exporter) counter(ch sink, d *prometheus.Desc, v float64, labels ...string) {
	ch.add(d, prometheus.CounterValue, v, labelValues(labels))
}

// sink receives the series of a scrape: d is the package's descriptor (without
// the Exporter's constant labels), values its variable labels' values, made safe.
type sink interface {
	add(d *prometheus.Desc, t prometheus.ValueType, v float64, values []string)
}

// chanSink is the sink of Collect: constant metrics for a registry.
type chanSink struct {
	e  *Exporter
	ch chan<- prometheus.Metric
}

func (s chanSink) add(d *prometheus.Desc, t prometheus.ValueType, v float64, values []string) {
	s.ch <- prometheus.MustNewConstMetric(s.e.desc(d), t, v, values...)
}

// desc is the Exporter's descriptor of the package's d: d itself, or d with
// Options.ConstLabels.
func (e *Exporter) desc(d *prometheus.Desc) *prometheus.Desc {
	if e.descs == nil {
		return d
	}
	return e.descs[d]
}

// labelValues makes scope names and node ids safe as label values, in place.
// Whoever can write the database chooses them, and the text format escapes only
// backslash, double quote and line feed: an ESC would reach whoever reads the
// scrape in a terminal (curl, promtool), and a byte that is not UTF-8 would make
// MustNewConstMetric panic. termsafe.String shows both as escapes. It does not
// escape backslashes, so a name holding ESC and one holding a literal `\x1b`
// would share a label value; the registry then refuses the second series, and
// the handler (ContinueOnError) serves the scrape without it.
func labelValues(ls []string) []string {
	for i, l := range ls {
		ls[i] = termsafe.String(l)
	}
	return ls
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
