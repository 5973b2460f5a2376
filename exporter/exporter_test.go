package exporter_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

var timing = collector.Timing{HeartbeatInterval: 500 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond,
	TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}

func health(src collector.Source) collector.Health {
	return collector.Health{Source: src, Database: "app @ db:5432", LastPoll: t0,
		PollDuration: 4 * time.Millisecond, Polls: 120, PollErrors: 1, Notifications: 30, NotificationsCoalesced: 12, Reconnects: 1}
}

// ledCluster: two scopes, each led by one of two nodes.
func ledCluster() *collector.Snapshot {
	return &collector.Snapshot{
		Seq: 7, At: t0, DBTime: t0,
		Scopes: []collector.Scope{
			{Name: "billing", Epoch: 7, Leader: "node-a", HolderPID: 101, LockPIDs: []int{101}, Waiters: 1,
				AcquiredAt: t0.Add(-90 * time.Second), Tenure: 90 * time.Second,
				LastHeartbeat: t0.Add(-250 * time.Millisecond), HeartbeatAge: 250 * time.Millisecond,
				Timing: timing, Followers: []string{"node-b"}, Verdict: collector.VerdictOK,
				OpenTerm: &collector.Term{Scope: "billing", Epoch: 7, Holder: "node-a", HandoverGap: 1200 * time.Millisecond}},
			{Name: "reports", Epoch: 3, Leader: "node-b", HolderPID: 102, LockPIDs: []int{102}, Waiters: 1,
				AcquiredAt: t0.Add(-10 * time.Second), Tenure: 10 * time.Second,
				LastHeartbeat: t0.Add(-100 * time.Millisecond), HeartbeatAge: 100 * time.Millisecond,
				Timing: timing, Followers: []string{"node-a"}, Verdict: collector.VerdictOK,
				OpenTerm: &collector.Term{Scope: "reports", Epoch: 3, Holder: "node-b", HandoverGap: 500 * time.Millisecond}},
		},
		Nodes: []collector.Node{
			{ID: "node-a", LastSeenAge: 400 * time.Millisecond, Scopes: []string{"billing", "reports"}, Leads: []string{"billing"}, Live: true, Priority: 2, FailbackAfter: 30 * time.Second},
			{ID: "node-b", LastSeenAge: 300 * time.Millisecond, Scopes: []string{"billing", "reports"}, Leads: []string{"reports"}, Live: true, Priority: 1, Restarts: 3,
				Supervisor: &collector.Supervised{Command: "worker", State: "running", PID: 4242, Restarts: 1}},
		},
		Locks:         collector.LockStats{Advisory: 2, Waiting: 2, Used: 40, Capacity: 6400, NotifyQueue: 0.001},
		Timeline:      1,
		FenceRejected: map[string]uint64{"billing": 2},
		Health:        health(collector.SourceLive),
	}
}

const ledClusterMetrics = `
pgleader_scope_epoch{scope="billing"} 7
pgleader_scope_epoch{scope="reports"} 3
pgleader_scope_has_leader{scope="billing"} 1
pgleader_scope_has_leader{scope="reports"} 1
pgleader_scope_leader{node="node-a",scope="billing"} 1
pgleader_scope_leader{node="node-b",scope="reports"} 1
pgleader_scope_heartbeat_age_seconds{scope="billing"} 0.25
pgleader_scope_heartbeat_age_seconds{scope="reports"} 0.1
pgleader_scope_tenure_seconds{scope="billing"} 90
pgleader_scope_tenure_seconds{scope="reports"} 10
pgleader_scope_leaderless_seconds{scope="billing"} 0
pgleader_scope_leaderless_seconds{scope="reports"} 0
pgleader_scope_trust_window_seconds{scope="billing"} 1.5
pgleader_scope_trust_window_seconds{scope="reports"} 1.5
pgleader_scope_followers{scope="billing"} 1
pgleader_scope_followers{scope="reports"} 1
pgleader_scope_lock_holders{scope="billing"} 1
pgleader_scope_lock_holders{scope="reports"} 1
pgleader_scope_lock_waiters{scope="billing"} 1
pgleader_scope_lock_waiters{scope="reports"} 1
pgleader_scope_foreign_sessions{scope="billing"} 0
pgleader_scope_foreign_sessions{scope="reports"} 0
pgleader_scope_split_brain{scope="billing"} 0
pgleader_scope_split_brain{scope="reports"} 0
pgleader_scope_stale_leader{scope="billing"} 0
pgleader_scope_stale_leader{scope="reports"} 0
pgleader_scope_last_handover_gap_seconds{scope="billing"} 1.2
pgleader_scope_last_handover_gap_seconds{scope="reports"} 0.5
pgleader_scope_idle{scope="billing"} 0
pgleader_scope_idle{scope="reports"} 0
pgleader_scope_handover_pending{scope="billing"} 0
pgleader_scope_handover_pending{scope="reports"} 0
pgleader_scopes_retired 0
pgleader_fence_rejected_total{scope="billing"} 2
pgleader_fence_rejected_total{scope="reports"} 0
pgleader_node_up{node="node-a"} 1
pgleader_node_up{node="node-b"} 1
pgleader_node_last_seen_age_seconds{node="node-a"} 0.4
pgleader_node_last_seen_age_seconds{node="node-b"} 0.3
pgleader_node_leader{node="node-a",scope="billing"} 1
pgleader_node_leader{node="node-b",scope="reports"} 1
pgleader_node_stale{node="node-a"} 0
pgleader_node_stale{node="node-b"} 0
pgleader_node_priority{node="node-a"} 2
pgleader_node_priority{node="node-b"} 1
pgleader_node_failback_after_seconds{node="node-a"} 30
pgleader_node_failback_after_seconds{node="node-b"} 0
pgleader_node_restarts{node="node-a"} 0
pgleader_node_restarts{node="node-b"} 3
pgleader_node_child_up{command="worker",node="node-b"} 1
pgleader_node_child_restarts{command="worker",node="node-b"} 1
pgleader_advisory_locks 2
pgleader_advisory_lock_waiters 2
pgleader_lock_table_capacity 6400
pgleader_lock_table_used 40
pgleader_notify_queue_usage_ratio 0.001
pgleader_database_timeline 1
pgleader_epoch_floor 0
pgleader_collector_up 1
pgleader_collector_source 2
pgleader_collector_snapshot_age_seconds 2
pgleader_collector_last_success_timestamp_seconds 1.7723736e+09
pgleader_collector_poll_duration_seconds 0.004
pgleader_collector_polls_total 120
pgleader_collector_poll_errors_total 1
pgleader_collector_notifications_total 30
pgleader_collector_notifications_coalesced_total 12
pgleader_collector_reconnects_total 1
pgleader_collector_dropped_events_total 0
pgleader_collector_decode_errors_total 0
pgleader_exporter_scrape_success 1
`

func TestExporter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		snap func() *collector.Snapshot
		now  time.Time
		want string
	}{
		{
			name: "LeaderPresent",
			snap: ledCluster,
			now:  t0.Add(2 * time.Second),
			want: ledClusterMetrics,
		},
		{
			name: "NoLeader",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Scopes = s.Scopes[:1]
				s.Scopes[0] = collector.Scope{Name: "billing", Epoch: 7, Waiters: 2,
					LastHeartbeat: t0.Add(-13 * time.Second), HeartbeatAge: 13 * time.Second,
					ReleasedAt: t0.Add(-12 * time.Second), LeaderlessFor: 12 * time.Second, Timing: timing,
					Followers: []string{"node-a", "node-b"}, Verdict: collector.VerdictNoLeader,
					Alerts: []collector.Alert{{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: "billing"}}}
				s.Alerts = s.Scopes[0].Alerts
				s.Nodes[0].Leads, s.Nodes[1].Leads = nil, nil
				s.Locks = collector.LockStats{Advisory: 0, Waiting: 2, Capacity: 6400}
				return s
			},
			now: t0.Add(2 * time.Second),
			want: `
pgleader_scope_epoch{scope="billing"} 7
pgleader_scope_has_leader{scope="billing"} 0
pgleader_scope_heartbeat_age_seconds{scope="billing"} 13
pgleader_scope_tenure_seconds{scope="billing"} 0
pgleader_scope_leaderless_seconds{scope="billing"} 12
pgleader_scope_trust_window_seconds{scope="billing"} 1.5
pgleader_scope_followers{scope="billing"} 2
pgleader_scope_lock_holders{scope="billing"} 0
pgleader_scope_lock_waiters{scope="billing"} 2
pgleader_scope_foreign_sessions{scope="billing"} 0
pgleader_scope_split_brain{scope="billing"} 0
pgleader_scope_stale_leader{scope="billing"} 0
pgleader_scope_idle{scope="billing"} 0
pgleader_scope_handover_pending{scope="billing"} 0
pgleader_scopes_retired 0
pgleader_alert{alert="no_leader",node="",scope="billing",severity="critical"} 1
pgleader_fence_rejected_total{scope="billing"} 2
pgleader_node_up{node="node-a"} 1
pgleader_node_up{node="node-b"} 1
pgleader_node_last_seen_age_seconds{node="node-a"} 0.4
pgleader_node_last_seen_age_seconds{node="node-b"} 0.3
pgleader_node_stale{node="node-a"} 0
pgleader_node_stale{node="node-b"} 0
pgleader_node_priority{node="node-a"} 2
pgleader_node_priority{node="node-b"} 1
pgleader_node_failback_after_seconds{node="node-a"} 30
pgleader_node_failback_after_seconds{node="node-b"} 0
pgleader_node_restarts{node="node-a"} 0
pgleader_node_restarts{node="node-b"} 3
pgleader_node_child_up{command="worker",node="node-b"} 1
pgleader_node_child_restarts{command="worker",node="node-b"} 1
pgleader_advisory_locks 0
pgleader_advisory_lock_waiters 2
pgleader_lock_table_capacity 6400
pgleader_lock_table_used 0
pgleader_notify_queue_usage_ratio 0
pgleader_database_timeline 1
pgleader_epoch_floor 0
pgleader_collector_up 1
pgleader_collector_source 2
pgleader_collector_snapshot_age_seconds 2
pgleader_collector_last_success_timestamp_seconds 1.7723736e+09
pgleader_collector_poll_duration_seconds 0.004
pgleader_collector_polls_total 120
pgleader_collector_poll_errors_total 1
pgleader_collector_notifications_total 30
pgleader_collector_notifications_coalesced_total 12
pgleader_collector_reconnects_total 1
pgleader_collector_dropped_events_total 0
pgleader_collector_decode_errors_total 0
pgleader_exporter_scrape_success 1
`,
		},
		{
			// billing: led, a handover to node-b pending; reports: IDLE (its
			// candidates stopped cleanly, nothing open); three scopes retired;
			// node-c campaigns with priority 0 (never leads).
			name: "IdleHandoverRetired",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Retired = 3
				b := &s.Scopes[0]
				b.HandoverTo, b.HandoverDeadline = "node-b", t0.Add(8*time.Second)
				b.Followers = []string{"node-b", "node-c"}
				s.Scopes[1] = collector.Scope{Name: "reports", Epoch: 3, ReleasedAt: t0.Add(-time.Hour),
					LeaderlessFor: time.Hour, Verdict: collector.VerdictIdle}
				s.Nodes[1].Leads = nil
				s.Nodes[1].Scopes = []string{"billing"}
				s.Nodes = append(s.Nodes, collector.Node{ID: "node-c", LastSeenAge: 200 * time.Millisecond,
					Scopes: []string{"billing"}, Live: true, Priority: 0})
				s.FenceRejected = map[string]uint64{}
				return s
			},
			now: t0.Add(2 * time.Second),
			want: `
pgleader_scope_epoch{scope="billing"} 7
pgleader_scope_epoch{scope="reports"} 3
pgleader_scope_has_leader{scope="billing"} 1
pgleader_scope_has_leader{scope="reports"} 0
pgleader_scope_leader{node="node-a",scope="billing"} 1
pgleader_scope_heartbeat_age_seconds{scope="billing"} 0.25
pgleader_scope_tenure_seconds{scope="billing"} 90
pgleader_scope_tenure_seconds{scope="reports"} 0
pgleader_scope_leaderless_seconds{scope="billing"} 0
pgleader_scope_leaderless_seconds{scope="reports"} 3600
pgleader_scope_trust_window_seconds{scope="billing"} 1.5
pgleader_scope_trust_window_seconds{scope="reports"} 0
pgleader_scope_followers{scope="billing"} 2
pgleader_scope_followers{scope="reports"} 0
pgleader_scope_lock_holders{scope="billing"} 1
pgleader_scope_lock_holders{scope="reports"} 0
pgleader_scope_lock_waiters{scope="billing"} 1
pgleader_scope_lock_waiters{scope="reports"} 0
pgleader_scope_foreign_sessions{scope="billing"} 0
pgleader_scope_foreign_sessions{scope="reports"} 0
pgleader_scope_split_brain{scope="billing"} 0
pgleader_scope_split_brain{scope="reports"} 0
pgleader_scope_stale_leader{scope="billing"} 0
pgleader_scope_stale_leader{scope="reports"} 0
pgleader_scope_last_handover_gap_seconds{scope="billing"} 1.2
pgleader_scope_idle{scope="billing"} 0
pgleader_scope_idle{scope="reports"} 1
pgleader_scope_handover_pending{scope="billing"} 1
pgleader_scope_handover_pending{scope="reports"} 0
pgleader_scopes_retired 3
pgleader_fence_rejected_total{scope="billing"} 0
pgleader_fence_rejected_total{scope="reports"} 0
pgleader_node_up{node="node-a"} 1
pgleader_node_up{node="node-b"} 1
pgleader_node_up{node="node-c"} 1
pgleader_node_last_seen_age_seconds{node="node-a"} 0.4
pgleader_node_last_seen_age_seconds{node="node-b"} 0.3
pgleader_node_last_seen_age_seconds{node="node-c"} 0.2
pgleader_node_leader{node="node-a",scope="billing"} 1
pgleader_node_stale{node="node-a"} 0
pgleader_node_stale{node="node-b"} 0
pgleader_node_stale{node="node-c"} 0
pgleader_node_priority{node="node-a"} 2
pgleader_node_priority{node="node-b"} 1
pgleader_node_priority{node="node-c"} 0
pgleader_node_failback_after_seconds{node="node-a"} 30
pgleader_node_failback_after_seconds{node="node-b"} 0
pgleader_node_failback_after_seconds{node="node-c"} 0
pgleader_node_restarts{node="node-a"} 0
pgleader_node_restarts{node="node-b"} 3
pgleader_node_restarts{node="node-c"} 0
pgleader_node_child_up{command="worker",node="node-b"} 1
pgleader_node_child_restarts{command="worker",node="node-b"} 1
pgleader_advisory_locks 2
pgleader_advisory_lock_waiters 2
pgleader_lock_table_capacity 6400
pgleader_lock_table_used 40
pgleader_notify_queue_usage_ratio 0.001
pgleader_database_timeline 1
pgleader_epoch_floor 0
pgleader_collector_up 1
pgleader_collector_source 2
pgleader_collector_snapshot_age_seconds 2
pgleader_collector_last_success_timestamp_seconds 1.7723736e+09
pgleader_collector_poll_duration_seconds 0.004
pgleader_collector_polls_total 120
pgleader_collector_poll_errors_total 1
pgleader_collector_notifications_total 30
pgleader_collector_notifications_coalesced_total 12
pgleader_collector_reconnects_total 1
pgleader_collector_dropped_events_total 0
pgleader_collector_decode_errors_total 0
pgleader_exporter_scrape_success 1
`,
		},
		{
			// billing: two backends hold the lock; reports: its leader's heartbeat
			// stopped while the lock is held; node-c: gone without a clean stop. An
			// unknown lock table capacity leaves the gauge out (the rule divides by it).
			name: "SplitBrainAndStale",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Scopes[0].LockPIDs = []int{101, 202}
				s.Scopes[0].Verdict = collector.VerdictSplitBrain
				s.Scopes[1].HeartbeatAge = 9 * time.Second
				s.Scopes[1].Verdict = collector.VerdictDegraded
				s.Scopes[1].Alerts = []collector.Alert{{Kind: collector.AlertStaleLeader, Severity: collector.SeverityCritical}}
				s.Nodes = append(s.Nodes, collector.Node{ID: "node-c", LastSeenAge: 40 * time.Second, Scopes: []string{"billing"}})
				s.Alerts = []collector.Alert{
					{Kind: collector.AlertSplitBrain, Severity: collector.SeverityCritical, Scope: "billing"},
					{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: "node-c"},
					{Kind: collector.AlertInterference, Severity: collector.SeverityCritical, Scope: "reports"},
				}
				s.Locks.Capacity = 0
				return s
			},
			now: t0.Add(2 * time.Second),
			want: strings.NewReplacer(
				`pgleader_scope_lock_holders{scope="billing"} 1`, `pgleader_scope_lock_holders{scope="billing"} 2`,
				`pgleader_scope_split_brain{scope="billing"} 0`, `pgleader_scope_split_brain{scope="billing"} 1`,
				`pgleader_scope_heartbeat_age_seconds{scope="reports"} 0.1`, `pgleader_scope_heartbeat_age_seconds{scope="reports"} 9`,
				`pgleader_scope_stale_leader{scope="reports"} 0`, `pgleader_scope_stale_leader{scope="reports"} 1`,
				"pgleader_node_up{node=\"node-b\"} 1\n", "pgleader_node_up{node=\"node-b\"} 1\npgleader_node_up{node=\"node-c\"} 0\n",
				"pgleader_node_last_seen_age_seconds{node=\"node-b\"} 0.3\n", "pgleader_node_last_seen_age_seconds{node=\"node-b\"} 0.3\npgleader_node_last_seen_age_seconds{node=\"node-c\"} 40\n",
				"pgleader_node_stale{node=\"node-b\"} 0\n", "pgleader_node_stale{node=\"node-b\"} 0\npgleader_node_stale{node=\"node-c\"} 1\n",
				"pgleader_node_priority{node=\"node-b\"} 1\n", "pgleader_node_priority{node=\"node-b\"} 1\npgleader_node_priority{node=\"node-c\"} 0\n",
				"pgleader_node_failback_after_seconds{node=\"node-b\"} 0\n", "pgleader_node_failback_after_seconds{node=\"node-b\"} 0\npgleader_node_failback_after_seconds{node=\"node-c\"} 0\n",
				"pgleader_node_restarts{node=\"node-b\"} 3\n", "pgleader_node_restarts{node=\"node-b\"} 3\npgleader_node_restarts{node=\"node-c\"} 0\n",
				"pgleader_lock_table_capacity 6400\n", "",
				"pgleader_scopes_retired 0\n", "pgleader_scopes_retired 0\n"+
					`pgleader_alert{alert="split_brain",node="",scope="billing",severity="critical"} 1`+"\n"+
					`pgleader_alert{alert="stale_node",node="node-c",scope="",severity="warning"} 1`+"\n"+
					`pgleader_alert{alert="interference",node="",scope="reports",severity="critical"} 1`+"\n"+
					`pgleader_alert{alert="stale_leader",node="",scope="reports",severity="critical"} 1`+"\n",
			).Replace(ledClusterMetrics),
		},
		{
			// reports' term is its first: no predecessor, no gap (not a gap of 0).
			name: "FirstTerm",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Scopes[1].OpenTerm.HandoverGap = 0
				return s
			},
			now: t0.Add(2 * time.Second),
			want: strings.Replace(ledClusterMetrics,
				"pgleader_scope_last_handover_gap_seconds{scope=\"reports\"} 0.5\n", "", 1),
		},
		{
			// The newest snapshot is older than StaleAfter (a read that hangs):
			// what it says of the database is no longer known, so none of it is
			// served; the collector's own health is.
			name: "StaleSnapshot",
			snap: ledCluster,
			now:  t0.Add(11 * time.Second), // Options.StaleAfter defaults to 10s
			want: `
pgleader_collector_up 0
pgleader_collector_source 2
pgleader_collector_snapshot_age_seconds 11
pgleader_collector_last_success_timestamp_seconds 1.7723736e+09
pgleader_collector_poll_duration_seconds 0.004
pgleader_collector_polls_total 120
pgleader_collector_poll_errors_total 1
pgleader_collector_notifications_total 30
pgleader_collector_notifications_coalesced_total 12
pgleader_collector_reconnects_total 1
pgleader_collector_dropped_events_total 0
pgleader_collector_decode_errors_total 0
pgleader_exporter_scrape_success 1
`,
		},
		{
			// The collector cannot read the database: it re-publishes its last
			// good snapshot with collector_down. Only the outage is served: the
			// alert that says so, the age of the stream's last change (true
			// now); not the scopes, nodes, other alerts, locks, the timeline
			// nor the slot's lag, which are read from the database.
			name: "Disconnected",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Health.Source = collector.SourceDisconnected
				s.Health.Slot, s.Health.SlotLagBytes = "pgleader_collector_1", 300<<20
				s.Health.LastChange = t0.Add(-500 * time.Millisecond)
				s.Timeline, s.EpochFloor = 2, 1<<40
				s.Alerts = []collector.Alert{
					{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical},
					{Kind: collector.AlertFlapping, Severity: collector.SeverityWarning, Scope: "billing"},
				}
				s.Scopes[0].Alerts = s.Alerts[1:]
				return s
			},
			now: t0.Add(2 * time.Second),
			want: `
pgleader_alert{alert="collector_down",node="",scope="",severity="critical"} 1
pgleader_collector_up 0
pgleader_collector_source 0
pgleader_collector_snapshot_age_seconds 2
pgleader_collector_last_success_timestamp_seconds 1.7723736e+09
pgleader_collector_poll_duration_seconds 0.004
pgleader_collector_polls_total 120
pgleader_collector_poll_errors_total 1
pgleader_collector_notifications_total 30
pgleader_collector_notifications_coalesced_total 12
pgleader_collector_reconnects_total 1
pgleader_collector_dropped_events_total 0
pgleader_collector_last_change_age_seconds 2.5
pgleader_collector_decode_errors_total 0
pgleader_exporter_scrape_success 1
`,
		},
		{
			// A permanent slot: its lag and the age of the stream's last change.
			name: "LogicalPermanentSlot",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Health.Source = collector.SourceLogical
				s.Health.Slot, s.Health.SlotLagBytes = "pgleader_collector_1", 300<<20
				s.Health.LastChange, s.Health.Transactions, s.Health.DecodeErrors = t0.Add(-500*time.Millisecond), 900, 2
				return s
			},
			now: t0.Add(2 * time.Second),
			want: strings.NewReplacer(
				"pgleader_collector_source 2", "pgleader_collector_source 3",
				"pgleader_collector_decode_errors_total 0\n", `pgleader_collector_decode_errors_total 2
pgleader_collector_slot_lag_bytes 3.145728e+08
pgleader_collector_last_change_age_seconds 2.5
`,
			).Replace(ledClusterMetrics),
		},
		{
			// A temporary slot has no lag worth a metric (it ends with its stream);
			// before the first change there is no age.
			name: "LogicalTemporarySlot",
			snap: func() *collector.Snapshot {
				s := ledCluster()
				s.Health.Source = collector.SourceLogical
				s.Health.Slot, s.Health.SlotLagBytes = "pgleader_tmp_0123456789ab", -1
				return s
			},
			now:  t0.Add(2 * time.Second),
			want: strings.NewReplacer("pgleader_collector_source 2", "pgleader_collector_source 3").Replace(ledClusterMetrics),
		},
		{
			name: "NilSnapshot",
			snap: func() *collector.Snapshot { return nil },
			now:  t0,
			want: `
pgleader_collector_up 0
pgleader_exporter_scrape_success 0
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp := exporter.New(staticSource{tt.snap()}, exporter.Options{Now: func() time.Time { return tt.now }})
			if err := testutil.CollectAndCompare(exp, strings.NewReader(exposition(t, tt.want)), deterministic()...); err != nil {
				t.Error(err)
			}
			if n := testutil.CollectAndCount(exp, "pgleader_exporter_scrape_duration_seconds"); n != 1 {
				t.Errorf("%d scrape duration samples, want 1", n)
			}
			if n := testutil.CollectAndCount(exp); tt.snap() == nil && n != 3 {
				t.Errorf("%d samples without a snapshot, want 3 (collector_up and the scrape metrics)", n)
			}
			problems, err := testutil.CollectAndLint(exp)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// Everything a scrape can emit is described, and the description is the same
// whatever the snapshot (a pedantic registry checks both).
func TestExporterPedantic(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, synthetic(10, 5), t0)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestSourceValue(t *testing.T) {
	t.Parallel()
	for src, want := range map[collector.Source]float64{
		collector.SourceLogical: 3, collector.SourceLive: 2, collector.SourcePolling: 1,
		collector.SourceDisconnected: 0, "": 0, "carrier-pigeon": 0,
	} {
		if got := exporter.SourceValue(src); got != want {
			t.Errorf("SourceValue(%q) = %v, want %v", src, got, want)
		}
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	var notReady error = exporter.ErrNoSnapshot
	ready := func() error { return notReady }
	h := exporter.Handler(newRegistry(t, ledCluster(), t0), ready)

	t.Run("Metrics", func(t *testing.T) {
		code, body := get(t, h, "/metrics")
		if code != http.StatusOK || !strings.Contains(body, "\npgleader_collector_up 1\n") ||
			!strings.Contains(body, `pgleader_scope_leader{node="node-a",scope="billing"} 1`) {
			t.Errorf("/metrics: %d\n%s", code, body)
		}
	})
	t.Run("Healthz", func(t *testing.T) {
		if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz: %d %q", code, body)
		}
	})
	t.Run("Index", func(t *testing.T) {
		code, body := get(t, h, "/")
		if code != http.StatusOK || !strings.Contains(body, "/metrics") || !strings.Contains(body, "/readyz") {
			t.Errorf("/: %d %q", code, body)
		}
		if code, _ := get(t, h, "/nothing-here"); code != http.StatusNotFound {
			t.Errorf("/nothing-here: %d, want 404", code)
		}
	})
	t.Run("Readyz", func(t *testing.T) {
		// Not parallel with the others: it flips ready's answer.
		if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no snapshot yet") {
			t.Errorf("/readyz while not ready: %d %q", code, body)
		}
		notReady = nil
		if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/readyz when ready: %d %q", code, body)
		}
		if code, _ := get(t, exporter.Handler(newRegistry(t, nil, t0), nil), "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz with a nil ready func: %d, want 200", code)
		}
	})
}

// BenchmarkScrape measures a whole /metrics request (collect + encode): for
// many nodes with few scopes each (100 scopes, 300 nodes), and for few nodes
// running many scopes each (1,000 scopes, 10 nodes).
func BenchmarkScrape(b *testing.B) {
	for _, c := range []struct{ scopes, nodes int }{{100, 300}, {1000, 10}} {
		b.Run(fmt.Sprintf("%d_scopes_%d_nodes", c.scopes, c.nodes), func(b *testing.B) {
			h := exporter.Handler(newRegistry(b, synthetic(c.scopes, c.nodes), t0), nil)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
