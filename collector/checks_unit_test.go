package collector

import (
	"testing"
	"time"

	"github.com/pgleader/pgleader/protocol"
)

// Flapping counts unplanned changes: a term after a release its holder made
// (resigned, shutdown, handed_over) is planned.
func TestPlannedChanges(t *testing.T) {
	now := time.Now()
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	terms := []Term{
		{Epoch: 1, AcquiredAt: at(20 * time.Minute), EndedBy: protocol.ReasonShutdown},
		{Epoch: 2, AcquiredAt: at(4 * time.Minute), EndedBy: protocol.ReasonCrashed},
		{Epoch: 3, AcquiredAt: at(3 * time.Minute), EndedBy: protocol.ReasonHandedOver},
		{Epoch: 4, AcquiredAt: at(2 * time.Minute), EndedBy: protocol.ReasonShutdown},
		{Epoch: 5, AcquiredAt: at(time.Minute)},
	}
	// Within 5 minutes: epochs 2 (after a shutdown: planned), 3 (after a crash),
	// 4 (after a handover: planned), 5 (after a shutdown: planned).
	if got := plannedChanges(terms, at(5*time.Minute)); got != 3 {
		t.Errorf("plannedChanges = %d, want 3", got)
	}
	if got := plannedChanges(terms, at(150*time.Second)); got != 2 {
		t.Errorf("plannedChanges in 2.5 minutes = %d, want 2", got)
	}
}

// A slow failover alerts, unless the gap was the database's outage, or no
// node but the predecessor campaigned through the gap (the scope was idle: its
// every node stopped, and one started later).
func TestSlowFailoverCheck(t *testing.T) {
	cfg := &Config{}
	cfg.applyDefaults()
	now := time.Now()
	gapStart := now.Add(-time.Minute - 12*time.Second)
	waiting := Node{ID: "b", Scopes: []string{"s"}, StartedAt: gapStart.Add(-time.Hour)}
	late := Node{ID: "b", Scopes: []string{"s"}, StartedAt: gapStart.Add(10 * time.Second)}
	stoppedToo := Node{ID: "c", Scopes: []string{"s"}, StartedAt: gapStart.Add(-time.Hour), StoppedAt: gapStart.Add(time.Second)}
	other := Node{ID: "c", Scopes: []string{"other"}, StartedAt: gapStart.Add(-time.Hour)}
	prevNode := Node{ID: "a", Scopes: []string{"s"}, StartedAt: gapStart.Add(-time.Hour)} // crashed: never stopped
	for _, tc := range []struct {
		prev  Reason
		nodes []Node
		want  bool
	}{
		{protocol.ReasonCrashed, []Node{prevNode, waiting}, true},
		{protocol.ReasonHeartbeatTimeout, []Node{prevNode, waiting}, true},
		{protocol.ReasonShutdown, []Node{prevNode, waiting}, true}, // a slow takeover after a clean stop
		{protocol.ReasonDatabaseFailover, []Node{prevNode, waiting}, false},
		{protocol.ReasonShutdown, []Node{prevNode, late, stoppedToo, other}, false}, // idle until b started
		{protocol.ReasonCrashed, []Node{prevNode, late}, false},
	} {
		open := Term{ID: 2, Scope: "s", Epoch: 2, Holder: "b", AcquiredAt: now.Add(-time.Minute), HandoverGap: 12 * time.Second}
		r := &dbRead{Now: now, Nodes: tc.nodes,
			Terms: []Term{open, {ID: 1, Scope: "s", Epoch: 1, Holder: "a", ReleasedAt: open.AcquiredAt, EndedBy: tc.prev}}}
		row := scopeRow{Name: "s", Epoch: 2, Holder: "b", Latest: &open, LockPIDs: []int{7}}
		sc := &Scope{Name: "s", Leader: "b", LockPIDs: []int{7}}
		f, ok := slowFailover(cfg, r, row, sc)
		if ok != tc.want {
			t.Errorf("predecessor ended %s, nodes %v: alert %v (%q), want %v", tc.prev, tc.nodes, ok, f.alert.Summary, tc.want)
		}
	}
}
