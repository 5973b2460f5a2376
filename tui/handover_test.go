package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// TestIdleIsNotTrouble: an IDLE scope is counted in the header but never named
// among the scopes in trouble, the problems filter hides it, and retired
// scopes are counted after the verdicts.
func TestIdleIsNotTrouble(t *testing.T) {
	s := thousandScopes()
	for _, i := range []int{20, 700} {
		sc := &s.Scopes[i]
		s.Terms = slices.DeleteFunc(s.Terms, func(t collector.Term) bool { return t.Scope == sc.Name })
		n := &s.Nodes[i%len(s.Nodes)]
		n.Leads = slices.DeleteFunc(n.Leads, func(l string) bool { return l == sc.Name })
		sc.Leader, sc.LeaderHost, sc.HolderPID, sc.LockPIDs, sc.OpenTerm, sc.Followers = "", "", 0, nil, nil, nil
		sc.LeaderlessFor = time.Hour
		sc.Verdict = collector.VerdictIdle
	}
	s.Retired = 5
	m, _ := setup(t, s)
	for _, w := range []int{120, 250} {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 40})
		if got, want := headerVerdicts(m), "996 ✔ OK · 2 · IDLE · 2 ✖ NO LEADER · 5 retired │ ✖ scope-0011  ✖ scope-0500"; got != want {
			t.Fatalf("%d columns: header\n got %q\nwant %q", w, got, want)
		}
	}
	if got, want := strings.TrimRight(plain(m.verdictLine(72)), " \n"), "996 ✔ OK · 2 · IDLE · 2 ✖ NO LEADER · 5 retired │ ✖ scope-0011  +1 more"; got != want {
		t.Fatalf("72 columns: header %q, want %q", got, want)
	}

	// Idle scopes sort after the OK ones, and the problems filter drops them.
	if got := scopeKeys(m); got[len(got)-2] != "scope-0020" || got[len(got)-1] != "scope-0700" {
		t.Fatalf("last rows %v, want the idle scopes", got[len(got)-2:])
	}
	keys(m, "p")
	if got := scopeKeys(m); !slices.Equal(got, []string{"scope-0011", "scope-0500"}) {
		t.Fatalf("problems only: %v", got)
	}

	// Without a leader, without trouble: the leader cell is muted, not bad.
	c := scopeCells(&s.Scopes[20])
	if c[scVerdict].text != "· IDLE" || c[scVerdict].tone != toneMuted || c[scLeader].text != "— for 1h00m" || c[scLeader].tone != toneMuted ||
		c[scFollowers].tone != toneMuted {
		t.Fatalf("idle scope cells %+v", c)
	}

	// A few scopes: listed, IDLE last, then the retired count.
	m, _ = setup(t, handoverSnapshot())
	if got, want := headerVerdicts(m), "✔ OK billing   ✔ OK reports   · IDLE archive   2 retired"; got != want {
		t.Fatalf("listed: %q, want %q", got, want)
	}
	// Everything retired: the header says so rather than "no scopes yet".
	s = healthySnapshot()
	s.Scopes, s.Retired = nil, 3
	m, _ = setup(t, s)
	if got := headerVerdicts(m); got != "no scopes in view: 3 retired" {
		t.Fatalf("all retired: %q", got)
	}
}

// TestPriorityShown: the nodes table shows each node's priority and marks the
// nodes that cannot be handed a scope, and the preferred ones (they fail back);
// followers rank as a handover picks them.
func TestPriorityShown(t *testing.T) {
	s := handoverSnapshot()
	for i := range s.Nodes {
		if s.Nodes[i].ID == "node-c" {
			s.Nodes[i].FailbackAfter = 30 * time.Second
		}
	}
	m, _ := setup(t, s)
	m.ensureRows()
	cells := map[string]cell{}
	for _, r := range m.nodes.rows {
		cells[r.key] = r.cells[ndPriority]
	}
	for id, want := range map[string]cell{
		"node-a": {text: "1"}, "node-c": {text: "2 preferred"},
		"node-d": {text: "0 never leads", tone: toneMuted},
		"node-e": {text: "1", tone: toneMuted}, // stopped: its state column says it, not its priority
	} {
		if cells[id] != want {
			t.Errorf("%s: priority cell %+v, want %+v", id, cells[id], want)
		}
	}
	var ids []string
	for _, f := range m.rankedFollowers("", []string{"node-d", "node-b", "node-e", "node-c", "node-x"}) {
		ids = append(ids, f.id)
	}
	if want := []string{"node-c", "node-b", "node-d", "node-e", "node-x"}; !slices.Equal(ids, want) {
		t.Fatalf("ranked followers %v, want %v", ids, want)
	}
	// Sorting by priority puts the highest first.
	keys(m, "tab")
	for range len(nodeSorts) - 1 {
		keys(m, "s")
	}
	if !strings.Contains(m.status, "sorted by priority") || m.nodes.rows[0].key != "node-c" {
		t.Fatalf("sort by priority: %q, first %s", m.status, m.nodes.rows[0].key)
	}
}

// TestHandoverShown: a pending handover shows in the scope's row and detail; a
// term handed over names its successor.
func TestHandoverShown(t *testing.T) {
	s := handoverSnapshot()
	m, _ := setup(t, s)
	b, _ := s.Scope("billing")
	if c := scopeCells(&b)[scLeader]; c.text != "node-a → node-c" || c.tone != toneWarn {
		t.Fatalf("leader cell %+v", c)
	}
	b.Leader = ""
	if c := scopeCells(&b)[scLeader]; c.text != "— → node-c" {
		t.Fatalf("leaderless, reserved: leader cell %+v", c)
	}
	keys(m, "enter")
	if v := screen(m); !strings.Contains(v, "handover    to node-c · reserved until 03:12:08 (8.0s left)") ||
		!strings.Contains(v, "followers   node-c (2), node-b (1), node-d (0: never leads)") {
		t.Fatalf("detail:\n%s", v)
	}
	var ended string
	for _, r := range m.terms.rows {
		if r.key == "reports\x006" {
			ended = r.cells[tmEnded].text
		}
	}
	if ended != "handed_over → node-b" {
		t.Fatalf("ended by %q", ended)
	}
}
