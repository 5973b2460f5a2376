package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestHistoryHandedOver: a term handed over names its successor in the table
// (after its reason), in the TSV (a last column, handed_to) and in the JSON
// (handed_to); other terms leave it empty.
func TestHistoryHandedOver(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	terms := []collector.Term{
		{Scope: "billing", Epoch: 3, Holder: "node-3", AcquiredAt: t0, HeldFor: time.Minute},
		{Scope: "billing", Epoch: 2, Holder: "node-1", AcquiredAt: t0.Add(-time.Hour), ReleasedAt: t0,
			EndedBy: collector.Reason("handed_over"), HandedTo: "node-3", HeldFor: time.Hour},
		{Scope: "billing", Epoch: 1, Holder: "node-2", AcquiredAt: t0.Add(-2 * time.Hour), ReleasedAt: t0.Add(-time.Hour),
			EndedBy: collector.Reason("resigned"), HeldFor: time.Hour},
	}
	render := func(t *testing.T, format string) string {
		t.Helper()
		var b bytes.Buffer
		if err := writeTerms(&b, terms, format); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	t.Run("Table", func(t *testing.T) {
		out := render(t, cli.FormatTable)
		if !regexp.MustCompile(`(?m)^billing\s+2\s+node-1\s.*\shanded_over → node-3$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^billing\s+1\s+node-2\s.*\sresigned$`).MatchString(out) {
			t.Fatalf("table:\n%s", out)
		}
	})
	t.Run("TSV", func(t *testing.T) {
		lines := strings.Split(strings.TrimSuffix(render(t, cli.FormatTSV), "\n"), "\n")
		if !strings.HasSuffix(lines[0], "\tended_by\thandover_gap_s\thanded_to\trun_key\trun_exit\tlast_sign\tsilent\tchild_exit") {
			t.Fatalf("tsv header %q", lines[0])
		}
		for i, want := range []string{"\topen\t0.000\t\t\t\t\tfalse\t", "\thanded_over\t0.000\tnode-3\t\t\t\tfalse\t", "\tresigned\t0.000\t\t\t\t\tfalse\t"} {
			if !strings.HasSuffix(lines[1+i], want) {
				t.Errorf("tsv row %d %q, want …%q", i, lines[1+i], want)
			}
		}
	})
	t.Run("JSON", func(t *testing.T) {
		var back []map[string]any
		if err := json.Unmarshal([]byte(render(t, cli.FormatJSON)), &back); err != nil {
			t.Fatal(err)
		}
		if back[1]["handed_to"] != "node-3" || back[1]["ended_by"] != "handed_over" {
			t.Fatalf("json term 2: %v", back[1])
		}
		if _, ok := back[2]["handed_to"]; ok {
			t.Fatalf("json term 1 has a handed_to: %v", back[2])
		}
	})
}

// TestHistoryTruth: an open term whose holder is silent reads "holder silent
// since" its last sign of life, never "(leading)", held until that sign; a
// term a database outage ended is held until its holder's last heartbeat.
// The TSV adds last_sign and silent as its last columns (after target over
// named targets), the JSON carries last_sign and silent.
func TestHistoryTruth(t *testing.T) {
	sign := time.Date(2026, 3, 1, 21, 53, 58, 0, time.Local)
	terms := []collector.Term{
		{Scope: "billing", Epoch: 4, Holder: "node-2", AcquiredAt: sign.Add(-8 * time.Second), HeldFor: 8 * time.Second,
			LastSign: sign, Silent: true, HandoverGap: 44500 * time.Millisecond},
		{Scope: "billing", Epoch: 3, Holder: "node-1", AcquiredAt: sign.Add(-2 * time.Minute), ReleasedAt: sign.Add(-8 * time.Second),
			EndedBy: collector.Reason("database_failover"), LastSign: sign.Add(-52500 * time.Millisecond), HeldFor: 67500 * time.Millisecond},
	}
	var b bytes.Buffer
	if err := writeTerms(&b, terms, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !regexp.MustCompile(`(?m)^billing\s+4\s+node-2\s+—\s+44\.50s\s+\S+ \S+\s+8\.00s\s+holder silent since 21:53:58$`).MatchString(out) ||
		strings.Contains(out, "leading") || !regexp.MustCompile(`(?m)^billing\s+3\s.*\s1m07s\s+database_failover$`).MatchString(out) {
		t.Fatalf("table:\n%s", out)
	}
	b.Reset()
	if err := writeTargetTerms(&b, terms, []string{"orders", "orders"}, cli.FormatTSV); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !strings.HasSuffix(lines[0], "\trun_exit\ttarget\tlast_sign\tsilent\tchild_exit") ||
		!strings.HasSuffix(lines[1], "\topen\t44.500\t\t\t\torders\t"+sign.UTC().Format(time.RFC3339Nano)+"\ttrue\t") ||
		!strings.Contains(lines[2], "\t67.500\tdatabase_failover\t") || !strings.HasSuffix(lines[2], "\tfalse\t") {
		t.Fatalf("tsv:\n%s", b.String())
	}
	b.Reset()
	if err := writeTerms(&b, terms, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"scope", "epoch", "holder", "acquired_at", "handover_gap", "held_for"} {
		if _, ok := back[0][f]; !ok {
			t.Errorf("json term lacks %q: %v", f, back[0])
		}
	}
	if back[0]["silent"] != true || back[0]["last_sign"] == nil || back[1]["last_sign"] == nil {
		t.Fatalf("json: %v", back)
	}
	if _, ok := back[1]["silent"]; ok {
		t.Errorf("json: a closed term says silent: %v", back[1])
	}
}

// TestHistoryDeadHolders: against real nodes, killed one after the other.
// The first holder's term, closed by its successor, is held until its last
// heartbeat (its last_sign, before its release); the second's stays open on
// record with nobody left to close it: "holder silent since", never
// "(leading)", in the table, silent with its last_sign in the JSON and TSV.
func TestHistoryDeadHolders(t *testing.T) {
	pgtest.Slow(t)
	dsn, c := startNodes(t, "billing", "n1", "n2")
	leader := func() string {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
		// Not TrimSpace: the row ends in tabs while it has no follower and no alert.
		if lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); r.code == 0 && len(lines) == 2 {
			if f := strings.Split(lines[1], "\t"); len(f) == 8 && f[1] == "OK" && f[6] != "" {
				return f[2]
			}
		}
		return ""
	}
	var first string
	pgtest.WaitEvery(t, "a leader with a follower", 20*time.Second, 100*time.Millisecond, func() bool { first = leader(); return first != "" })
	if _, err := c.Node(first).Kill(); err != nil {
		t.Fatal(err)
	}
	second := map[string]string{"n1": "n2", "n2": "n1"}[first]
	pgtest.WaitEvery(t, "the takeover", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "history", "--dsn", dsn, "-o", "tsv")
		return strings.Count(r.stdout, "\n") == 3 && strings.Contains(r.stdout, "\t"+second+"\t")
	})
	if _, err := c.Node(second).Kill(); err != nil {
		t.Fatal(err)
	}
	var terms []collector.Term
	pgtest.WaitEvery(t, "the second holder silent", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "history", "--dsn", dsn, "-o", "json")
		terms = nil
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &terms) == nil && len(terms) == 2 && terms[0].Silent
	})
	open, closed := terms[0], terms[1]
	if !open.Open() || open.Holder != second || open.LastSign.IsZero() || open.LastSign.Before(open.AcquiredAt) ||
		open.HeldFor != open.LastSign.Sub(open.AcquiredAt) {
		t.Errorf("the open term: %+v; want silent, held until its last sign", open)
	}
	if closed.Holder != first || closed.LastSign.IsZero() || closed.LastSign.After(closed.ReleasedAt) ||
		closed.HeldFor != closed.LastSign.Sub(closed.AcquiredAt) || closed.HeldFor+open.HandoverGap != open.AcquiredAt.Sub(closed.AcquiredAt) {
		t.Errorf("the closed term: %+v (next gap %v); want held until its last heartbeat, held + gap = the time between the starts",
			closed, open.HandoverGap)
	}
	r := pgleader(t, nil, "history", "--dsn", dsn)
	if r.code != 0 || strings.Contains(r.stdout, "leading") || !strings.Contains(r.stdout, "holder silent since "+open.LastSign.Local().Format("15:04:05")) {
		t.Errorf("history: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "history", "--dsn", dsn, "-o", "tsv")
	if lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); len(lines) != 3 || !strings.HasSuffix(lines[1], "\t"+open.LastSign.UTC().Format(time.RFC3339Nano)+"\ttrue\t") ||
		!strings.HasSuffix(lines[2], "\tfalse\t") {
		t.Errorf("history -o tsv:\n%s", r.stdout)
	}
}
