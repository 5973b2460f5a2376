package tui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// benchClusters are the clusters the benchmarks draw: many nodes with few
// scopes each, and few nodes that all campaign for a thousand scopes.
var benchClusters = []struct {
	name string
	c    bigCluster
}{
	{"100_scopes_300_nodes", bigCluster{scopes: 100, nodes: 300, candidates: 3, troubled: true}},
	{"1000_scopes_10_nodes", bigCluster{scopes: 1000, nodes: 10, candidates: 10, troubled: true}},
}

func benchModel(b *testing.B, c bigCluster) *Model {
	m := New(newFakeFeed(c.snapshot()), Options{Now: fixedNow})
	b.Cleanup(m.stop)
	for i := range 500 {
		m.events.add(collector.Event{Seq: uint64(i), At: t0.Add(time.Duration(i) * time.Second), Kind: collector.EventElected,
			Scope: m.snap.Scopes[i%len(m.snap.Scopes)].Name, Node: m.snap.Nodes[i%len(m.snap.Nodes)].ID, Epoch: int64(i)})
	}
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	m.View()
	return m
}

// BenchmarkView: one frame at 160×48, colour on.
func BenchmarkView(b *testing.B) {
	for _, bc := range benchClusters {
		b.Run(bc.name, func(b *testing.B) {
			m := benchModel(b, bc.c)
			b.ReportAllocs()
			for b.Loop() {
				m.View()
			}
		})
	}
}

// BenchmarkSnapshotAndView: a new snapshot arrives (index, filter, sort, rows)
// and is drawn.
func BenchmarkSnapshotAndView(b *testing.B) {
	for _, bc := range benchClusters {
		b.Run(bc.name, func(b *testing.B) {
			m := benchModel(b, bc.c)
			snaps := []*collector.Snapshot{bc.c.snapshot(), bc.c.snapshot()}
			snaps[1].Seq = 2
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m.Update(snapshotMsg{snaps[i%2]})
				m.View()
				i++
			}
		})
	}
}

// BenchmarkFilterKey: one key typed into the / filter (the rows are rebuilt)
// and the frame drawn.
func BenchmarkFilterKey(b *testing.B) {
	for _, bc := range benchClusters {
		b.Run(bc.name, func(b *testing.B) {
			m := benchModel(b, bc.c)
			keys(m, "/")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					typed(m, "7")
				} else {
					keys(m, "backspace")
				}
				m.View()
				i++
			}
		})
	}
}

// BenchmarkPageDown: PgDn through the scopes table, the frame drawn each time.
func BenchmarkPageDown(b *testing.B) {
	for _, bc := range benchClusters {
		b.Run(bc.name, func(b *testing.B) {
			m := benchModel(b, bc.c)
			b.ReportAllocs()
			for b.Loop() {
				if m.scopes.cursor == len(m.scopes.rows)-1 {
					keys(m, "home")
				}
				keys(m, "pgdown")
				m.View()
			}
		})
	}
}
