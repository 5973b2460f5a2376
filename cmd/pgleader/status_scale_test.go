package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
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
			Scopes: names, Live: true, State: collector.NodeLive})
	}
	for i, name := range names {
		leader := s.Nodes[i%nodes].ID
		var followers []string
		for k := 1; k < nodes; k++ {
			followers = append(followers, s.Nodes[(i+k)%nodes].ID)
		}
		s.Scopes = append(s.Scopes, collector.Scope{Name: name, Epoch: 1, Leader: leader, LeaderHost: "host", LeaderLive: true,
			LockPIDs: []int{1000 + i}, Tenure: time.Minute, HeartbeatAge: 200 * time.Millisecond,
			Followers: followers, Verdict: collector.VerdictOK})
	}
	for _, i := range noLeader {
		sc := &s.Scopes[i]
		sc.Leader, sc.LeaderHost, sc.LockPIDs, sc.LeaderLive, sc.LeaderlessFor = "", "", nil, false, 42*time.Second
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

// TestStatusIdleAndPriority: an IDLE scope is counted, never named as not OK,
// and exits 0 like OK; retired scopes are counted; a pending handover shows
// as the leader's target; the nodes show their priority (0 never leads); the
// JSON only gains fields (retired, nodes[].priority, scopes[].handover_to).
func TestStatusIdleAndPriority(t *testing.T) {
	snap := func() *collector.Snapshot {
		s := scaleSnapshot(4, 3, 1)
		idle := &s.Scopes[2]
		idle.Leader, idle.LeaderHost, idle.LockPIDs, idle.Followers, idle.LeaderlessFor = "", "", nil, nil, time.Hour
		idle.Verdict = collector.VerdictIdle
		s.Scopes[0].HandoverTo, s.Scopes[0].HandoverDeadline = "node-02", s.DBTime.Add(8*time.Second)
		s.Nodes[0].Priority, s.Nodes[0].Leads = 2, []string{"scope-0000", "scope-0003"}
		s.Nodes[1].Priority = 0
		s.Nodes[2].Priority = 1
		s.Nodes = append(s.Nodes, collector.Node{ID: "node-09", Priority: 1, StoppedAt: s.DBTime.Add(-time.Hour), State: collector.NodeStopped})
		s.Retired = 3
		return s
	}

	t.Run("Table", func(t *testing.T) {
		var b bytes.Buffer
		if v := writeStatus(&b, snap(), nil, cli.FormatTable); v != collector.VerdictNoLeader {
			t.Fatalf("worst verdict %q", v)
		}
		out := b.String()
		lines := strings.Split(out, "\n")
		if want := "4 scopes: 2 ✔ OK · 1 · IDLE · 1 ✖ NO LEADER · 3 retired"; lines[0] != want {
			t.Fatalf("counts %q, want %q", lines[0], want)
		}
		if want := "not OK: ✖ scope-0001"; lines[1] != want {
			t.Fatalf("not OK line %q, want %q", lines[1], want)
		}
		for _, re := range []string{
			`(?m)^scope-0000\s+✔ OK\s+node-00@host → node-02\s+1\s`,
			`(?m)^scope-0002\s+· IDLE\s+—\s`,
			`(?m)^NODE\s+HOST\s+STATE\s+PRIORITY\s+LEADS$`,
			`(?m)^node-00\s+host-00\s+● live\s+2\s+scope-0000,scope-0003$`,
			`(?m)^node-01\s+host-01\s+● live\s+0 \(never leads\)\s+—$`,
			`(?m)^1 node stopped \(not shown; -o json lists them\)$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("no line matches %s:\n%s", re, out)
			}
		}
	})
	t.Run("Filtered", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap(), []string{"scope-0002"}, cli.FormatTable)
		if first, _, _ := strings.Cut(b.String(), "\n"); first != "1 of 4 scopes: 1 · IDLE" {
			t.Fatalf("first line %q", first)
		}
		if strings.Contains(b.String(), "not OK") {
			t.Fatalf("an IDLE scope listed as not OK:\n%s", b.String())
		}
	})
	t.Run("ExitCode", func(t *testing.T) {
		s := snap()
		s.Scopes = slices.DeleteFunc(s.Scopes, func(sc collector.Scope) bool { return sc.Verdict == collector.VerdictNoLeader })
		if v := writeStatus(io.Discard, s, nil, cli.FormatTable); v != collector.VerdictOK || statusExit(v) != nil {
			t.Fatalf("OK and IDLE scopes: worst %q, exit %v", v, statusExit(v))
		}
		if err := statusExit(collector.VerdictIdle); err != nil {
			t.Fatalf("IDLE exits %v", err)
		}
	})
	t.Run("AllRetired", func(t *testing.T) {
		s := snap()
		s.Scopes = nil
		var b bytes.Buffer
		if v := writeStatus(&b, s, nil, cli.FormatTable); v != collector.VerdictOK || b.String() != "no scopes in view: 3 scopes retired (pgleader history still lists their terms)\n" {
			t.Fatalf("%q: %q", v, b.String())
		}
		b.Reset()
		writeStatus(&b, s, []string{"old"}, cli.FormatTable)
		if !strings.Contains(b.String(), "no such scope: old (no node has campaigned for it yet, or it was retired)") {
			t.Fatalf("missing scope: %q", b.String())
		}
	})
	t.Run("JSON", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap(), nil, cli.FormatJSON)
		var doc struct {
			Verdict       string         `json:"verdict"`
			VerdictCounts map[string]int `json:"verdict_counts"`
			Retired       *int           `json:"retired"`
			Scopes        []struct {
				Scope      string `json:"scope"`
				Verdict    string `json:"verdict"`
				HandoverTo string `json:"handover_to"`
			} `json:"scopes"`
			Nodes []struct {
				Node     string `json:"node"`
				Priority *int   `json:"priority"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Retired == nil || *doc.Retired != 3 || doc.VerdictCounts["IDLE"] != 1 || doc.Verdict != "NO LEADER" {
			t.Fatalf("retired %v, counts %v, verdict %q", doc.Retired, doc.VerdictCounts, doc.Verdict)
		}
		if doc.Scopes[0].HandoverTo != "node-02" || doc.Scopes[2].Verdict != "IDLE" {
			t.Fatalf("scopes %+v", doc.Scopes)
		}
		if len(doc.Nodes) != 4 || doc.Nodes[1].Priority == nil || *doc.Nodes[1].Priority != 0 || *doc.Nodes[0].Priority != 2 {
			t.Fatalf("nodes %+v", doc.Nodes)
		}
	})
}
