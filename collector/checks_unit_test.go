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

// A slow failover alerts, unless the gap was the database's outage.
func TestSlowFailoverCheck(t *testing.T) {
	cfg := &Config{}
	cfg.applyDefaults()
	now := time.Now()
	for _, tc := range []struct {
		prev Reason
		want bool
	}{{protocol.ReasonCrashed, true}, {protocol.ReasonHeartbeatTimeout, true}, {protocol.ReasonDatabaseFailover, false}} {
		open := Term{ID: 2, Scope: "s", Epoch: 2, Holder: "b", AcquiredAt: now.Add(-time.Minute), HandoverGap: 12 * time.Second}
		r := &dbRead{Now: now, Terms: []Term{open, {ID: 1, Scope: "s", Epoch: 1, Holder: "a", ReleasedAt: open.AcquiredAt, EndedBy: tc.prev}}}
		row := scopeRow{Name: "s", Epoch: 2, Holder: "b", Latest: &open, LockPIDs: []int{7}}
		sc := &Scope{Name: "s", Leader: "b", LockPIDs: []int{7}}
		f, ok := slowFailover(cfg, r, row, sc)
		if ok != tc.want {
			t.Errorf("predecessor ended %s: alert %v (%q), want %v", tc.prev, ok, f.alert.Summary, tc.want)
		}
	}
}
