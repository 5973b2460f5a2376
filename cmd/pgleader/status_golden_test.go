package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
)

// everyVerdictSnapshot: twelve scopes over three nodes holding every verdict
// the collector gives, a pending handover, a retired count and a stopped node.
func everyVerdictSnapshot() *collector.Snapshot {
	s := scaleSnapshot(12, 3, 3, 8)
	s.Scopes[1].Verdict = collector.VerdictDegraded
	s.Scopes[5].Verdict = collector.VerdictSplitBrain
	s.Scopes[10].Verdict = collector.VerdictDegraded
	idle := &s.Scopes[6]
	idle.Leader, idle.LeaderHost, idle.LockPIDs, idle.Followers, idle.LeaderlessFor = "", "", nil, nil, time.Hour
	idle.Verdict = collector.VerdictIdle
	s.Scopes[0].HandoverTo, s.Scopes[0].HandoverDeadline = "node-02", s.DBTime.Add(8*time.Second)
	s.Nodes[1].Priority = 1
	s.Nodes = append(s.Nodes, collector.Node{ID: "node-09", Priority: 1, StoppedAt: s.DBTime.Add(-time.Hour), State: collector.NodeStopped})
	s.Retired, s.Timeline, s.EpochFloor = 2, 3, 1<<32
	return s
}

// TestStatusGolden pins status's output byte for byte on a fixed snapshot:
// -o json is a contract other tools parse (docs/design.md §5), the table and
// the TSV what operators and scripts read. Update with:
// go test ./cmd/pgleader -run TestStatusGolden -update
func TestStatusGolden(t *testing.T) {
	for _, format := range []string{cli.FormatJSON, cli.FormatTable, cli.FormatTSV} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if v := writeStatus(&b, everyVerdictSnapshot(), nil, format); v != collector.VerdictSplitBrain {
				t.Fatalf("worst verdict %q", v)
			}
			golden.RequireEqual(t, b.Bytes())
		})
	}
}

// TestStatusDoorbells: status names the running nodes whose doorbell cannot
// ring, one line per reason, and leaves out stopped nodes and nodes of scopes
// not asked for.
func TestStatusDoorbells(t *testing.T) {
	const super = "the node's login postgres is a superuser"
	nodes := []collector.Node{
		{ID: "a", Scopes: []string{"s"}, DoorbellUnringable: super},
		{ID: "b", Scopes: []string{"s"}},
		{ID: "c", Scopes: []string{"s"}, DoorbellUnringable: super},
		{ID: "d", Scopes: []string{"other"}, DoorbellUnringable: super},
		{ID: "e", Scopes: []string{"s"}, DoorbellUnringable: "no grant", StoppedAt: time.Unix(1, 0)},
	}
	var b strings.Builder
	writeDoorbells(&b, nodes, map[string]bool{"s": true}, true)
	want := "doorbell cannot ring: a,c (wake-ups come from heartbeats, within one interval): " + super + "\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	writeDoorbells(&b, nodes, nil, false)
	if !strings.Contains(b.String(), "a,c,d (") || strings.Contains(b.String(), "no grant") {
		t.Fatalf("every scope: %q", b.String())
	}
}
