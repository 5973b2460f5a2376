package tui

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

func TestFilter(t *testing.T) {
	m, _ := setup(t, threeScopes())

	keys(m, "/")
	if !filterOpen(m) {
		t.Fatal("/ does not open the filter")
	}
	typed(m, "rep")
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports"}) {
		t.Fatalf("filter rep: scopes %v", got)
	}
	if !strings.Contains(screen(m), "filter: rep") {
		t.Error("the filter line is not shown while typing")
	}
	keys(m, "backspace", "backspace", "backspace")
	typed(m, "NODE-B") // matches the leader of reports and followers of billing, case-insensitively
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("filter node-b: scopes %v", got)
	}
	keys(m, "backspace")
	keys(m, "enter")
	if filterOpen(m) || m.filter != "NODE-" {
		t.Fatalf("enter keeps the filter: filtering=%v filter=%q", filterOpen(m), m.filter)
	}
	if !strings.Contains(screen(m), "filter “NODE-”") {
		t.Error("the kept filter is not shown in the status line")
	}
	keys(m, "esc")
	if m.filter != "" || len(scopeKeys(m)) != 3 {
		t.Fatalf("esc does not clear the filter: %q %v", m.filter, scopeKeys(m))
	}

	// Nodes and events filter by the same substring.
	keys(m, "/")
	typed(m, "node-c")
	keys(m, "enter")
	m.ensureRows()
	if len(m.nodes.rows) != 1 || m.nodes.rows[0].key != "node-c" {
		t.Fatalf("nodes under filter node-c: %v", m.nodes.rows)
	}
}

func TestProblemsOnly(t *testing.T) {
	s := troubleSnapshot()
	ok := s.Scopes[0]
	ok.Name, ok.Verdict, ok.Alerts = "cron", collector.VerdictOK, nil
	s.Scopes = append(s.Scopes, ok)
	m, _ := setup(t, s)

	if got := scopeKeys(m); len(got) != 3 {
		t.Fatalf("scopes %v", got)
	}
	keys(m, "p")
	if got := scopeKeys(m); !slices.Equal(got, []string{"billing", "reports"}) {
		t.Fatalf("problems only: %v", got)
	}
	if got := m.nodes.rows; len(got) != 1 || got[0].key != "node-b" {
		t.Fatalf("problems only, nodes: %v (want the stale node-b)", got)
	}
	if !strings.Contains(screen(m), "problems only") {
		t.Error("the problems-only mode is not shown")
	}
	keys(m, "p")
	if got := scopeKeys(m); len(got) != 3 {
		t.Fatalf("p again: %v", got)
	}
}

func TestSort(t *testing.T) {
	m, _ := setup(t, threeScopes())
	// Default: worst verdict first, then name.
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("default sort: %v", got)
	}
	m.snap.Scopes[1].Verdict = collector.VerdictNoLeader // billing
	m.invalidate()
	if got := scopeKeys(m); !slices.Equal(got, []string{"billing", "archive", "reports"}) {
		t.Fatalf("verdict sort: %v", got)
	}
	keys(m, "s") // name
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("name sort: %v", got)
	}
	keys(m, "S") // name, descending
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports", "billing", "archive"}) {
		t.Fatalf("name sort reversed: %v", got)
	}
	if !strings.Contains(screen(m), "SCOPE↓") {
		t.Error("the sorted column is not marked")
	}
	keys(m, "s", "s") // leader, epoch
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports", "archive", "billing"}) {
		t.Fatalf("epoch sort: %v (epochs 7, 42, 42)", got)
	}

	// s on the nodes pane sorts the nodes.
	keys(m, "tab", "s") // state: down first
	m.snap.Nodes[2].Live, m.snap.Nodes[2].State = false, collector.NodeDown
	m.invalidate()
	m.ensureRows()
	if m.nodes.rows[0].key != "node-c" {
		t.Fatalf("node state sort: first %s, want the down node-c", m.nodes.rows[0].key)
	}
}

func TestCursorKeepsScope(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	keys(m, "down")
	if got := m.scopes.selected(); got != "reports" {
		t.Fatalf("selected %q", got)
	}
	// A new snapshot adds scopes before it and reorders the rest.
	next := threeScopes()
	extra := next.Scopes[1]
	extra.Name, extra.Verdict = "accounts", collector.VerdictNoLeader
	next.Scopes = append(next.Scopes, extra)
	m.Update(snapshotMsg{next})
	if got := scopeKeys(m); !slices.Equal(got, []string{"accounts", "archive", "billing", "reports"}) {
		t.Fatalf("rows %v", got)
	}
	if got := m.scopes.selected(); got != "reports" {
		t.Fatalf("after refresh the cursor is on %q, want reports", got)
	}
	if !regexp.MustCompile(`(?m)^▸ reports `).MatchString(screen(m)) {
		t.Error("the cursor marker is not on the reports row")
	}
	// The selected row disappears: the cursor stays at its position.
	gone := threeScopes()
	gone.Scopes = gone.Scopes[:2] // archive, billing
	m.Update(snapshotMsg{gone})
	if got := m.selectedScope(); got != "billing" {
		t.Fatalf("row gone: cursor on %q, want billing (the last row)", got)
	}
}

func TestPanes(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	var got []pane
	for range 4 {
		keys(m, "tab")
		got = append(got, m.focus)
	}
	if want := []pane{paneNodes, paneTerms, paneEvents, paneScopes}; !slices.Equal(got, want) {
		t.Fatalf("tab order %v", got)
	}
	keys(m, "shift+tab")
	if m.focus != paneEvents {
		t.Fatalf("shift+tab: %v", m.focus)
	}
	// Compact layout: the terms pane replaces the nodes pane while focused.
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if s := screen(m); strings.Contains(s, "TERMS") || !strings.Contains(s, "NODES") {
		t.Fatal("compact layout should show nodes, not terms")
	}
	keys(m, "shift+tab")
	if s := screen(m); !strings.Contains(s, "TERMS") || strings.Contains(s, "NODES") {
		t.Fatal("compact layout should show terms while they have the focus")
	}
	// Enter on a term opens its scope.
	keys(m, "down", "down", "down", "enter")
	if scopeDetail(m) != "reports" {
		t.Fatalf("enter on the 4th term opened %q", scopeDetail(m))
	}
}

// TestVimKeys: j and k move like ↓ and ↑ in every pane and scroll the
// detail view, and type where text is typed (the filter line, the help
// search).
func TestVimKeys(t *testing.T) {
	m, _ := setup(t, threeScopes())
	m.Update(eventsMsg{sampleEvents()})
	for _, p := range []pane{paneScopes, paneNodes, paneTerms} {
		m.focus = p
		tb := m.focusedTable()
		keys(m, "j")
		if tb.cursor != 1 {
			t.Errorf("%s: j moves the cursor to %d, want 1", p, tb.cursor)
		}
		keys(m, "k")
		if tb.cursor != 0 {
			t.Errorf("%s: k moves the cursor to %d, want 0", p, tb.cursor)
		}
	}
	m.focus = paneEvents
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for range 10 {
		m.events.add(sampleEvents()...)
	}
	screen(m)
	keys(m, "k")
	if m.events.follow {
		t.Error("events: k does not scroll up")
	}

	m.focus = paneScopes
	keys(m, "enter", "j")
	if scopeDetail(m) == "" || m.mode.scroll != 1 {
		t.Errorf("detail: j scrolls to %d (detail %q), want 1", m.mode.scroll, scopeDetail(m))
	}
	keys(m, "esc", "/", "j", "k")
	if m.filter != "jk" {
		t.Errorf("filter line: j k typed %q", m.filter)
	}
	keys(m, "esc", "?", "j")
	if m.mode.helpScroll != 1 {
		t.Errorf("help: j scrolls to %d, want 1", m.mode.helpScroll)
	}
	keys(m, "/", "k")
	if m.mode.query != "k" {
		t.Errorf("help search: k typed %q", m.mode.query)
	}
}

// TestEmptyStateNamesFilters: a pane the filter, problems only or one
// database leave empty says so — what hides its rows and how to show them —
// instead of "no scopes", which reads as an empty cluster.
func TestEmptyStateNamesFilters(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		m, _ := setup(t, healthySnapshot())
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		m.Update(eventsMsg{sampleEvents()})
		keys(m, "/", "z", "z", "enter")
		s := screen(m)
		for _, want := range []string{"none of the 2 scopes match: filter “zz” (esc clears)", "no events match: filter “zz” (esc clears)"} {
			if !strings.Contains(s, want) {
				t.Errorf("%dx%d: filtered to nothing, the screen lacks %q:\n%s", sz[0], sz[1], want, s)
			}
		}
		keys(m, "esc", "p")
		if s := screen(m); !strings.Contains(s, "none of the 2 scopes match: problems only (p shows all)") || strings.Contains(s, "  no scopes") {
			t.Errorf("%dx%d: problems only on a healthy cluster:\n%s", sz[0], sz[1], s)
		}
	}
	m, _ := setup(t, &collector.Snapshot{Seq: 1, At: t0, DBTime: t0, Health: health()})
	if s := screen(m); !strings.Contains(s, "  no scopes") {
		t.Errorf("an empty cluster:\n%s", s)
	}
}
