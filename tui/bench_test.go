package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

func benchModel(b *testing.B) *Model {
	m := New(newFakeFeed(bigSnapshot(100, 300)), Options{Now: fixedNow})
	b.Cleanup(m.stop)
	for i := range 500 {
		m.events.add(collector.Event{Seq: uint64(i), At: t0.Add(time.Duration(i) * time.Second), Kind: collector.EventElected,
			Scope: fmt.Sprintf("scope-%03d", i%100), Node: fmt.Sprintf("node-%03d", i%300), Epoch: int64(i)})
	}
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	m.View()
	return m
}

// BenchmarkView: one frame of 100 scopes and 300 nodes at 160×48, colour on.
func BenchmarkView(b *testing.B) {
	m := benchModel(b)
	b.ReportAllocs()
	for b.Loop() {
		m.View()
	}
}

// BenchmarkSnapshotAndView: a new snapshot arrives (index, filter, sort, rows)
// and is drawn.
func BenchmarkSnapshotAndView(b *testing.B) {
	m := benchModel(b)
	snaps := []*collector.Snapshot{bigSnapshot(100, 300), bigSnapshot(100, 300)}
	snaps[1].Seq = 2
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Update(snapshotMsg{snaps[i%2]})
		m.View()
		i++
	}
}
