package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/protocol"
)

// replaySnapshot is billing at 03:12:04.250 UTC, 2.25 s after its holder's
// last heartbeat (W 1.5 s): no leader, the term still open on record; reports
// led; node-a restarted later, so its state then is unknown.
func replaySnapshot() *collector.Snapshot {
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := day.Add(3*time.Hour + 12*time.Minute + 4250*time.Millisecond)
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	lastHB := at.Add(-2250 * time.Millisecond)
	claim := lastHB.Add(3 * time.Second)
	node := func(id string, registered time.Time) collector.HistoryNode {
		return collector.HistoryNode{Node: collector.Node{ID: id, Hostname: "host-" + id[len(id)-1:], StartedAt: day,
			LastSeen: at.Add(14 * time.Minute), Scopes: []string{"billing", "reports"}, Timing: timing, Priority: 1, Mode: "lock"},
			Registered: registered}
	}
	h := replay.New(collector.HistoryRows{
		From: at.Add(-time.Hour), To: at.Add(14 * time.Minute), DBNow: at.Add(14 * time.Minute), Earliest: day,
		Scopes: []collector.HistoryScope{
			{Name: "billing", LockKey: 1, Mode: "lock", Epoch: 42, Holder: "node-c", Timing: timing, First: day},
			{Name: "reports", LockKey: 2, Mode: "lock", Epoch: 7, Holder: "node-b", Timing: timing, First: day},
		},
		Terms: []collector.Term{
			{ID: 1, Scope: "billing", Epoch: 41, Holder: "node-a", Hostname: "host-a", HolderPID: 4241, AcquiredAt: at.Add(-20 * time.Minute),
				ReleasedAt: claim, EndedBy: protocol.ReasonCrashed},
			{ID: 2, Scope: "reports", Epoch: 7, Holder: "node-b", Hostname: "host-b", HolderPID: 5151, AcquiredAt: at.Add(-30 * time.Minute)},
			{ID: 3, Scope: "billing", Epoch: 42, Holder: "node-c", Hostname: "host-c", HolderPID: 4242, AcquiredAt: claim, HandoverGap: 3 * time.Second},
		},
		Nodes: []collector.HistoryNode{node("node-a", claim.Add(time.Minute)), node("node-b", day), node("node-c", day)},
	})
	s := h.At(at)
	s.Health.Database = "app @ db:5432"
	return s
}

// TestStatusReplayGolden pins status --at: the REPLAY line, the table with
// n/a where nothing was recorded, and the replay object of -o json (added to
// the status contract, nothing renamed). Update with:
// go test ./cmd/pgleader -run TestStatusReplayGolden -update
func TestStatusReplayGolden(t *testing.T) {
	for _, format := range []string{cli.FormatJSON, cli.FormatTable, cli.FormatTSV} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			s := replaySnapshot()
			if format == cli.FormatTable {
				writeReplayHead(&b, s.Replay)
			}
			if v := writeStatus(&b, s, nil, format); v != collector.VerdictNoLeader {
				t.Fatalf("worst verdict %q", v)
			}
			golden.RequireEqual(t, b.Bytes())
		})
	}
}
