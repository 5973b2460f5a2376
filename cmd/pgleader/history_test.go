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
		if !regexp.MustCompile(`(?m)^billing\s+2\s+node-1\s.*\shanded_over → node-3\s`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^billing\s+1\s+node-2\s.*\sresigned\s+\S+$`).MatchString(out) {
			t.Fatalf("table:\n%s", out)
		}
	})
	t.Run("TSV", func(t *testing.T) {
		lines := strings.Split(strings.TrimSuffix(render(t, cli.FormatTSV), "\n"), "\n")
		if !strings.HasSuffix(lines[0], "\tended_by\thandover_gap_s\thanded_to\trun_key\trun_exit\tchild_exit") {
			t.Fatalf("tsv header %q", lines[0])
		}
		for i, want := range []string{"\topen\t0.000\t\t\t\t", "\thanded_over\t0.000\tnode-3\t\t\t", "\tresigned\t0.000\t\t\t\t"} {
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
