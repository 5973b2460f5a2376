package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/cli"
)

// scaleSnapshot: scopes scopes led in turn by nodes nodes, every node a
// candidate for every scope; the scopes named in noLeader have no leader.
func scaleSnapshot(scopes, nodes int, noLeader ...int) *collector.Snapshot {
	t0 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	s := &collector.Snapshot{Seq: 1, At: t0, DBTime: t0, Alerts: []collector.Alert{},
		Health: collector.Health{Source: collector.SourceLive, Database: "app @ db:5432"}}
	var names []string
	for i := range scopes {
		names = append(names, fmt.Sprintf("scope-%04d", i))
	}
	for k := range nodes {
		s.Nodes = append(s.Nodes, collector.Node{ID: fmt.Sprintf("node-%02d", k), Hostname: fmt.Sprintf("host-%02d", k),
			Scopes: names, Live: true})
	}
	for i, name := range names {
		leader := s.Nodes[i%nodes].ID
		var followers []string
		for k := 1; k < nodes; k++ {
			followers = append(followers, s.Nodes[(i+k)%nodes].ID)
		}
		s.Scopes = append(s.Scopes, collector.Scope{Name: name, Epoch: 1, Leader: leader, LeaderHost: "host",
			LockPIDs: []int{1000 + i}, Tenure: time.Minute, HeartbeatAge: 200 * time.Millisecond,
			Followers: followers, Verdict: collector.VerdictOK})
	}
	for _, i := range noLeader {
		sc := &s.Scopes[i]
		sc.Leader, sc.LeaderHost, sc.LockPIDs, sc.LeaderlessFor = "", "", nil, 42*time.Second
		sc.Verdict = collector.VerdictNoLeader
		a := collector.Alert{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: sc.Name,
			Summary: "no leader for 42s", Hint: "check the candidates", Runbook: "docs/runbooks.md#no_leader"}
		sc.Alerts = []collector.Alert{a}
		s.Alerts = append(s.Alerts, a)
	}
	return s
}

// TestStatusAtScale: at 1,000 scopes the table opens with the verdict counts
// and names the scopes not OK; JSON only gains verdict_counts.
func TestStatusAtScale(t *testing.T) {
	snap := scaleSnapshot(1000, 10, 11, 500)

	t.Run("Table", func(t *testing.T) {
		var b bytes.Buffer
		if v := writeStatus(&b, snap, nil, cli.FormatTable); v != collector.VerdictNoLeader {
			t.Fatalf("worst verdict %q", v)
		}
		lines := strings.Split(b.String(), "\n")
		want := []string{"1000 scopes: 998 ✔ OK · 2 ✖ NO LEADER", "not OK: ✖ scope-0011  ✖ scope-0500", ""}
		for i, w := range want {
			if lines[i] != w {
				t.Fatalf("line %d: %q, want %q\n%s", i, lines[i], w, strings.Join(lines[:5], "\n"))
			}
		}
		if !strings.HasPrefix(lines[3], "SCOPE ") || !strings.HasPrefix(lines[4], "scope-0000 ") || !strings.HasPrefix(lines[1003], "scope-0999 ") {
			t.Fatalf("table rows: %q … %q", lines[3:5], lines[1003])
		}
	})
	t.Run("Filtered", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap, []string{"scope-0500", "scope-0001"}, cli.FormatTable)
		if first, _, _ := strings.Cut(b.String(), "\n"); first != "2 of 1000 scopes: 1 ✔ OK · 1 ✖ NO LEADER" {
			t.Fatalf("first line %q", first)
		}
	})
	t.Run("ManyNotOK", func(t *testing.T) {
		var bad []int
		for i := 0; i < 1000; i += 40 {
			bad = append(bad, i)
		}
		s := scaleSnapshot(1000, 10, bad...)
		s.Scopes[999].Verdict = collector.VerdictSplitBrain
		var b bytes.Buffer
		writeStatus(&b, s, nil, cli.FormatTable)
		lines := strings.Split(b.String(), "\n")
		if lines[0] != "1000 scopes: 974 ✔ OK · 1 ‼ SPLIT BRAIN · 25 ✖ NO LEADER" {
			t.Fatalf("counts %q", lines[0])
		}
		if want := "not OK: ‼ scope-0999  ✖ scope-0000  ✖ scope-0040"; !strings.HasPrefix(lines[1], want) || !strings.HasSuffix(lines[1], "  +16 more") {
			t.Fatalf("not OK line %q", lines[1])
		}
	})
	t.Run("JSON", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap, nil, cli.FormatJSON)
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"database", "db_time", "verdict", "scopes", "nodes", "alerts", "health", "verdict_counts"} {
			if _, ok := doc[k]; !ok {
				t.Errorf("no %q in the JSON document", k)
			}
		}
		var counts map[string]int
		if err := json.Unmarshal(doc["verdict_counts"], &counts); err != nil || len(counts) != 2 || counts["OK"] != 998 || counts["NO LEADER"] != 2 {
			t.Fatalf("verdict_counts %s (%v)", doc["verdict_counts"], err)
		}
	})
	t.Run("TSV", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap, nil, cli.FormatTSV)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 1001 || !strings.HasPrefix(lines[0], "scope\tstate\t") || !strings.HasPrefix(lines[12], "scope-0011\tNO LEADER\t\t") {
			t.Fatalf("tsv: %d lines, %q, %q", len(lines), lines[0], lines[12])
		}
	})
}

// BenchmarkWriteStatus: one table of 1,000 scopes over 10 nodes (a frame of
// status --watch).
func BenchmarkWriteStatus(b *testing.B) {
	snap := scaleSnapshot(1000, 10, 11, 500)
	for _, format := range []string{cli.FormatTable, cli.FormatJSON, cli.FormatTSV} {
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				writeStatus(io.Discard, snap, nil, format)
			}
		})
	}
}
