package tui

import (
	"testing"

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
		{name: "db_failover", snaps: []*collector.Snapshot{dbFailoverSnapshot()}, keys: []string{"tab", "tab"}, sizes: [][2]int{{100, 30}, {160, 48}}},
		{name: "idle_detail", snaps: []*collector.Snapshot{handoverSnapshot()}, keys: []string{"end", "enter"}},
	}
	for _, tc := range cases {
		sizes := tc.sizes
		if sizes == nil {
			sizes = [][2]int{{80, 24}, {160, 48}}
		}
		for _, sz := range sizes {
			t.Run(tc.name+"/"+itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
				m, _ := setup(t, nil)
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
