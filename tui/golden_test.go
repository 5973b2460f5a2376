package tui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/pgleader/pgleader/collector"
)

// TestGolden pins whole frames: what a reader sees (escape codes stripped,
// NoColor, a fixed clock). Update with: go test ./tui -run TestGolden -update
func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		snaps []*collector.Snapshot // applied in order
		keys  []string
		sizes [][2]int
		opts  func(*Options)
	}{
		{name: "healthy", snaps: []*collector.Snapshot{healthySnapshot()}, sizes: [][2]int{{80, 24}, {120, 40}, {160, 48}}},
		{name: "trouble", snaps: []*collector.Snapshot{troubleSnapshot()}},
		{name: "disconnected", snaps: []*collector.Snapshot{healthySnapshot(), disconnectedSnapshot()}},
		{name: "help", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"?"}},
		{name: "detail", snaps: []*collector.Snapshot{troubleSnapshot()}, keys: []string{"enter"}},
		{name: "evict_confirm", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"x"}},
		{name: "resign_confirm", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"R"}},
		{name: "handover", snaps: []*collector.Snapshot{handoverSnapshot()}},
		{name: "handover_confirm", snaps: []*collector.Snapshot{handoverSnapshot()}, keys: []string{"down", "O"}},
		{name: "handover_detail", snaps: []*collector.Snapshot{handoverSnapshot()}, keys: []string{"enter"}},
		{name: "node_detail", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"tab", "enter"}},
		{name: "node_detail_down", snaps: []*collector.Snapshot{troubleSnapshot()}, keys: []string{"tab", "j", "enter"}},
		{name: "demo", snaps: []*collector.Snapshot{healthySnapshot()}, sizes: [][2]int{{80, 24}, {120, 40}},
			opts: func(o *Options) {
				o.Title, o.DSN = "pgleader demo", "postgres://postgres@127.0.0.1:54321/pgleader?sslmode=disable"
				o.Faults = &fakeFaults{keys: demoFaults}
			}},
		{name: "demo_help", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"?"}, sizes: [][2]int{{80, 24}, {120, 40}},
			opts: func(o *Options) {
				o.Title, o.DSN = "pgleader demo", "postgres://postgres@127.0.0.1:54321/pgleader?sslmode=disable"
				o.Faults = &fakeFaults{keys: demoFaults}
			}},
		{name: "db_failover", snaps: []*collector.Snapshot{dbFailoverSnapshot()}, keys: []string{"tab", "tab"}, sizes: [][2]int{{100, 30}, {160, 48}}},
		{name: "event_detail", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"shift+tab", "k", "enter"}},
		{name: "events_focused", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"shift+tab", "k"}},
		{name: "idle_detail", snaps: []*collector.Snapshot{handoverSnapshot()}, keys: []string{"end", "enter"}},
		// Every node of billing killed: its open term's holder is silent.
		{name: "dead_holder", snaps: []*collector.Snapshot{deadHolderSnapshot()}, keys: []string{"tab", "tab"}, sizes: [][2]int{{80, 24}, {120, 40}}},
		// A 44.5 s outage: a gap between reports' terms, not time held.
		{name: "outage", snaps: []*collector.Snapshot{outageSnapshot()}, keys: []string{"tab", "tab"}, sizes: [][2]int{{80, 24}, {120, 40}}},
		// Replay: billing's holder silent past its trust window, its term open
		// on record until node-c's claim; the live snapshot waits.
		{name: "replay", snaps: []*collector.Snapshot{healthySnapshot()}, sizes: [][2]int{{80, 24}, {120, 40}},
			opts: func(o *Options) {
				o.ReplayFrom, o.ReplayAt = oneHistory(replayHistory()), t0.Add(-14*time.Minute+2*time.Second)
			}},
		// Replay over two databases whose scope names repeat.
		{name: "replay_fleet", snaps: []*collector.Snapshot{healthySnapshot()}, sizes: [][2]int{{80, 24}, {120, 40}},
			opts: func(o *Options) { o.ReplayFrom, o.ReplayAt = fleetHistories(), t0.Add(-14*time.Minute+2*time.Second) }},
		{name: "replay_detail", snaps: []*collector.Snapshot{healthySnapshot()}, keys: []string{"enter"}, sizes: [][2]int{{120, 40}},
			opts: func(o *Options) {
				o.ReplayFrom, o.ReplayAt = oneHistory(replayHistory()), t0.Add(-14*time.Minute+2*time.Second)
			}},
	}
	for _, tc := range cases {
		sizes := tc.sizes
		if sizes == nil {
			sizes = [][2]int{{80, 24}, {160, 48}}
		}
		for _, sz := range sizes {
			t.Run(tc.name+"/"+itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
				var opts []func(*Options)
				if tc.opts != nil {
					opts = append(opts, tc.opts)
				}
				m, _ := setup(t, nil, opts...)
				for _, s := range tc.snaps {
					m.Update(snapshotMsg{s})
				}
				m.Update(eventsMsg{sampleEvents()})
				m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				keys(m, tc.keys...)
				golden.RequireEqual(t, plain(m.View().Content))
			})
		}
	}
}
