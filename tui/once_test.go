package tui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

func TestRenderOnce(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		var b strings.Builder
		if err := RenderOnce(&b, troubleSnapshot(), sampleEvents(), "text", 100); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if strings.Contains(out, "\x1b") {
			t.Fatal("escape codes in text output")
		}
		for _, l := range strings.Split(out, "\n") {
			if w := textWidth(l); w > 100 {
				t.Fatalf("line %d wide: %q", w, l)
			}
		}
		golden.RequireEqual(t, out)
	})
	t.Run("fleet_alerts", func(t *testing.T) {
		// Scope names repeat across databases: every alert line names its
		// database.
		snap := fleetSnapshot()
		var b strings.Builder
		if err := RenderOnce(&b, snap, nil, "text", 120); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "‼ CRITICAL") || strings.HasPrefix(l, "▲ WARNING") {
				lines = append(lines, l)
			}
		}
		if len(lines) != len(snap.Alerts) || len(lines) < 3 {
			t.Fatalf("%d alert lines for %d alerts:\n%s", len(lines), len(snap.Alerts), b.String())
		}
		for i, l := range lines {
			a := snap.Alerts[i]
			want := a.Database
			if a.Scope != "" {
				want = a.Database + "/" + a.Scope
			}
			if !strings.Contains(l, " "+want) {
				t.Errorf("alert line %q does not name %q", l, want)
			}
		}
	})
	t.Run("text_unlimited", func(t *testing.T) {
		var b strings.Builder
		if err := RenderOnce(&b, troubleSnapshot(), nil, "text", 0); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "(docs/runbooks.md#split_brain)") || !strings.Contains(b.String(), "EVENTS 0\n  none") {
			t.Fatalf("unlimited width cut something:\n%s", b.String())
		}
	})
	t.Run("json", func(t *testing.T) {
		var b strings.Builder
		if err := RenderOnce(&b, troubleSnapshot(), sampleEvents(), "json", 80); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Snapshot struct {
				Seq    uint64 `json:"seq"`
				Scopes []struct {
					Name    string `json:"scope"`
					Verdict string `json:"verdict"`
				} `json:"scopes"`
				Alerts []struct {
					Kind string `json:"alert"`
				} `json:"alerts"`
			} `json:"snapshot"`
			Events []struct {
				Kind string `json:"kind"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
			t.Fatalf("%v:\n%s", err, b.String())
		}
		if doc.Snapshot.Seq != 101 || len(doc.Snapshot.Scopes) != 2 || doc.Snapshot.Scopes[0].Verdict != "SPLIT BRAIN" ||
			len(doc.Snapshot.Alerts) != 3 || len(doc.Events) != 4 || doc.Events[1].Kind != "elected" {
			t.Fatalf("unexpected document: %+v", doc)
		}
		b.Reset()
		if err := RenderOnce(&b, troubleSnapshot(), nil, "json", 0); err != nil || !strings.Contains(b.String(), `"events": []`) {
			t.Fatalf("no events must encode as []: %v\n%s", err, b.String())
		}
	})
	t.Run("errors", func(t *testing.T) {
		var b strings.Builder
		if err := RenderOnce(&b, troubleSnapshot(), nil, "yaml", 80); err == nil {
			t.Fatal("unknown format accepted")
		}
		if err := RenderOnce(&b, nil, nil, "text", 80); err == nil {
			t.Fatal("nil snapshot accepted")
		}
	})
}
