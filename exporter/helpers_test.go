package exporter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// t0 is the collector time of the test snapshots.
var t0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// The exporter's production source.
var _ exporter.SnapshotSource = (*collector.Collector)(nil)

// staticSource serves one fixed snapshot (nil included).
type staticSource struct{ snap *collector.Snapshot }

func (s staticSource) Snapshot() *collector.Snapshot { return s.snap }

// newRegistry returns a registry holding an Exporter over snap, scraped at now.
func newRegistry(t testing.TB, snap *collector.Snapshot, now time.Time) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exporter.New(staticSource{snap}, exporter.Options{Now: func() time.Time { return now }}))
	return reg
}

// synthetic builds a snapshot of a healthy cluster: scopes scopes, nodes nodes,
// every scope led by one node and followed by two others.
func synthetic(scopes, nodes int) *collector.Snapshot {
	s := &collector.Snapshot{
		Seq: 42, At: t0, DBTime: t0,
		Locks:    collector.LockStats{Advisory: scopes * 3, Used: scopes * 3, Capacity: 6400, NotifyQueue: 0.0001},
		Timeline: 2, EpochFloor: 1 << 40,
		FenceRejected: map[string]uint64{},
		Health: collector.Health{
			Source: collector.SourceLogical, Database: "app @ db:5432", LastPoll: t0,
			PollDuration: 3 * time.Millisecond, Polls: 1000, Transactions: 5000,
			Slot: "pgleader_collector_1", SlotLagBytes: 1 << 20, LastChange: t0.Add(-200 * time.Millisecond),
		},
	}
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond,
		TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	for i := range nodes {
		s.Nodes = append(s.Nodes, collector.Node{
			ID: fmt.Sprintf("node-%03d", i), Hostname: fmt.Sprintf("host-%03d", i), OSPID: 1000 + i,
			StartedAt: t0.Add(-time.Hour), LastSeen: t0, LastSeenAge: 300 * time.Millisecond,
			Timing: timing, Live: true, Priority: 1 + i%2,
		})
	}
	// One node is pgleader run, supervising a command.
	s.Nodes[0].Supervisor = &collector.Supervised{Command: "worker", State: "running", PID: 5000, Restarts: 0}
	for i := range scopes {
		name := fmt.Sprintf("scope-%03d", i)
		leader, f1, f2 := &s.Nodes[i%nodes], &s.Nodes[(i+1)%nodes], &s.Nodes[(i+2)%nodes]
		leader.Leads = append(leader.Leads, name)
		for _, n := range []*collector.Node{leader, f1, f2} {
			n.Scopes = append(n.Scopes, name)
		}
		term := &collector.Term{ID: int64(i + 1), Scope: name, Epoch: int64(i + 1), Holder: leader.ID,
			AcquiredAt: t0.Add(-time.Minute), HandoverGap: time.Second, HeldFor: time.Minute}
		s.Scopes = append(s.Scopes, collector.Scope{
			Name: name, LockKey: int64(i) * 7919, Epoch: int64(i + 1), Leader: leader.ID,
			HolderPID: 5000 + i, LockPIDs: []int{5000 + i}, Waiters: 2,
			AcquiredAt: term.AcquiredAt, Tenure: time.Minute,
			LastHeartbeat: t0.Add(-200 * time.Millisecond), HeartbeatAge: 200 * time.Millisecond,
			Timing: timing, Followers: []string{f1.ID, f2.ID}, OpenTerm: term,
			Verdict: collector.VerdictOK,
		})
		s.FenceRejected[name] = uint64(i % 3)
		s.Terms = append(s.Terms, *term)
	}
	return s
}

// metricInfo is the help and type of each exporter metric: the contract the
// comparisons below check names, help texts and types against.
var metricInfo = map[string][2]string{
	"pgleader_scope_epoch":                              {"gauge", "Current epoch (fencing token) of the scope."},
	"pgleader_scope_has_leader":                         {"gauge", "1 while the scope has an open term whose advisory lock is held, else 0."},
	"pgleader_scope_leader":                             {"gauge", "1 for the node that currently leads the scope; absent when the scope has no leader."},
	"pgleader_scope_heartbeat_age_seconds":              {"gauge", "Age of the scope's last heartbeat (database time) at the collector's read; absent if never beaten."},
	"pgleader_scope_tenure_seconds":                     {"gauge", "How long the open term has lasted (0 when none)."},
	"pgleader_scope_leaderless_seconds":                 {"gauge", "How long the scope has had no leader, as observed by the collector (0 while led)."},
	"pgleader_scope_trust_window_seconds":               {"gauge", "Trust window the scope's holder runs with."},
	"pgleader_scope_followers":                          {"gauge", "Live candidate nodes of the scope other than the leader."},
	"pgleader_scope_lock_holders":                       {"gauge", "Backends pg_locks shows holding the scope's advisory lock (normally 1 while led)."},
	"pgleader_scope_lock_waiters":                       {"gauge", "Backends waiting for the scope's advisory lock."},
	"pgleader_scope_split_brain":                        {"gauge", "1 while the collector's split_brain check fires for the scope, else 0."},
	"pgleader_scope_stale_leader":                       {"gauge", "1 while the collector's stale_leader check fires for the scope, else 0."},
	"pgleader_scope_last_handover_gap_seconds":          {"gauge", "Time without a leader before the open term began; absent when no term is open or it is the scope's first."},
	"pgleader_scope_idle":                               {"gauge", "1 while the scope is IDLE: no leader and nobody meant to lead (every candidate stopped cleanly, no term left open), else 0."},
	"pgleader_scope_handover_pending":                   {"gauge", "1 while a requested handover (pgleader handover) reserves the scope for its target, else 0."},
	"pgleader_alert":                                    {"gauge", "1 for each alert the collector raises now (the alerts of pgleader status and top: interference, split_brain, stale_leader, …); absent when none."},
	"pgleader_scopes_retired":                           {"gauge", "Scopes retired with pgleader scope retire: left out of every other pgleader_scope_* series."},
	"pgleader_fence_rejected_total":                     {"counter", "Fenced writes the database refused (audit kind fence_rejected) since the collector started."},
	"pgleader_node_up":                                  {"gauge", "1 when the node is live: not stopped and seen recently."},
	"pgleader_node_last_seen_age_seconds":               {"gauge", "Age of the node's last_seen (database time) at the collector's read."},
	"pgleader_node_leader":                              {"gauge", "1 for each scope the node leads."},
	"pgleader_node_stale":                               {"gauge", "1 while the collector's stale_node check fires for the node, else 0."},
	"pgleader_node_priority":                            {"gauge", "Candidate priority of the node: a free scope goes to its live candidate of highest priority; 0 never leads."},
	"pgleader_node_failback_after_seconds":              {"gauge", "Failback delay of a preferred node (pgleader node --preferred): it takes its scopes back from a live leader of lower priority once up this long. 0 when the node does not fail back."},
	"pgleader_node_restarts":                            {"gauge", "Times the node id was registered again by a new process since it was first registered (a crash loop under a fixed id shows here)."},
	"pgleader_advisory_locks":                           {"gauge", "Granted advisory locks in the database (all of them, not only pgleader's)."},
	"pgleader_advisory_lock_waiters":                    {"gauge", "Advisory lock requests not granted in the database."},
	"pgleader_lock_table_capacity":                      {"gauge", "Nominal size of the shared lock table: max_locks_per_transaction * (max_connections + max_prepared_transactions)."},
	"pgleader_scope_foreign_sessions":                   {"gauge", "Sessions that hold or wait on the scope's advisory lock without being its candidates (squatters; the interference check)."},
	"pgleader_lock_table_used":                          {"gauge", "Granted locks of the whole server that take an entry of the shared lock table (every database's, advisory or not; fast-path locks excluded)."},
	"pgleader_notify_queue_usage_ratio":                 {"gauge", "pg_notification_queue_usage(): the fraction of the server's notification queue in use (at 1 every NOTIFY fails, pgleader's claims and releases included)."},
	"pgleader_database_timeline":                        {"gauge", "WAL timeline the database writes on; it rises when a standby is promoted (a failover). Absent while unknown (the collector reads a standby)."},
	"pgleader_epoch_floor":                              {"gauge", "Every epoch granted on the current timeline is above this value: (timeline - 1) * 2^40, 0 before any failover. Absent while unknown."},
	"pgleader_collector_up":                             {"gauge", "1 when the collector's newest snapshot is fresh and the database readable, else 0."},
	"pgleader_collector_source":                         {"gauge", "Where the collector's picture comes from: 3 logical replication, 2 live (LISTEN), 1 polling only, 0 disconnected."},
	"pgleader_collector_snapshot_age_seconds":           {"gauge", "Age of the collector's newest snapshot at the scrape."},
	"pgleader_collector_last_success_timestamp_seconds": {"gauge", "Unix time of the collector's last successful read."},
	"pgleader_collector_poll_duration_seconds":          {"gauge", "Duration of the collector's last successful read."},
	"pgleader_collector_polls_total":                    {"counter", "Reads of the database the collector attempted."},
	"pgleader_collector_poll_errors_total":              {"counter", "Reads of the database that failed."},
	"pgleader_collector_notifications_total":            {"counter", "leader_change notifications the collector received."},
	"pgleader_collector_notifications_coalesced_total":  {"counter", "leader_change notifications that arrived while an earlier one waited for its read, so cost no read of their own (a storm of forged notifications shows here)."},
	"pgleader_collector_reconnects_total":               {"counter", "Times the collector reconnected to the database."},
	"pgleader_collector_dropped_events_total":           {"counter", "Collector events slow subscribers missed."},
	"pgleader_collector_slot_lag_bytes":                 {"gauge", "WAL the server keeps for the collector's permanent replication slot: pg_current_wal_lsn() - confirmed_flush_lsn; absent without a permanent slot."},
	"pgleader_collector_last_change_age_seconds":        {"gauge", "Age at the scrape of the last transaction the collector's logical replication source received (heartbeats included); absent without the logical source."},
	"pgleader_collector_decode_errors_total":            {"counter", "Logical replication messages the collector could not decode."},
	"pgleader_node_child_up":                            {"gauge", "For a pgleader run node: 1 while its supervised command runs, else 0 (absent for a plain node)."},
	"pgleader_node_child_restarts":                      {"gauge", "For a pgleader run node: how many times its command was restarted under --restart since the node started."},
	"pgleader_exporter_scrape_duration_seconds":         {"gauge", "Time the exporter took to build this scrape's metrics."},
	"pgleader_exporter_scrape_success":                  {"gauge", "1 when the exporter had a collector snapshot to render, else 0."},
}

// deterministic lists every metric name except the scrape duration (a timing).
func deterministic() []string {
	var names []string
	for n := range metricInfo {
		if n != "pgleader_exporter_scrape_duration_seconds" {
			names = append(names, n)
		}
	}
	return names
}

// exposition turns sample lines into the text format by adding each family's
// HELP and TYPE from metricInfo. Samples of one family must be adjacent.
func exposition(t testing.TB, samples string) string {
	t.Helper()
	var b strings.Builder
	last := ""
	for line := range strings.SplitSeq(strings.TrimSpace(samples), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if name != last {
			info, ok := metricInfo[name]
			if !ok {
				t.Fatalf("unknown metric %q in expected samples", name)
			}
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, info[1], name, info[0])
			last = name
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
