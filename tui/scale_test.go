package tui

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// thousandScopes: 1,000 scopes, every one of 10 nodes a candidate for each;
// scope-0011 and scope-0500 have no leader, the rest are OK.
func thousandScopes() *collector.Snapshot {
	s := bigCluster{scopes: 1000, nodes: 10, candidates: 10}.snapshot()
	for _, i := range []int{11, 500} {
		sc := &s.Scopes[i]
		s.Terms = slices.DeleteFunc(s.Terms, func(t collector.Term) bool { return t.Scope == sc.Name })
		n := &s.Nodes[i%len(s.Nodes)]
		n.Leads = slices.DeleteFunc(n.Leads, func(l string) bool { return l == sc.Name })
		sc.Leader, sc.LeaderHost, sc.HolderPID, sc.LockPIDs, sc.OpenTerm = "", "", 0, nil, nil
		sc.Verdict = collector.VerdictNoLeader
		sc.Alerts = []collector.Alert{{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: sc.Name,
			Summary: "no leader for 42s with 9 live candidates", Hint: "check the candidates' logs", Runbook: "docs/runbooks.md#no_leader"}}
		s.Alerts = append(s.Alerts, sc.Alerts...)
	}
	return s
}

// headerVerdicts returns the header's verdict line as a reader sees it.
func headerVerdicts(m *Model) string {
	return strings.TrimRight(strings.Split(screen(m), "\n")[1], " ")
}

var (
	scopeName = regexp.MustCompile(`scope-\d{4}`)
	moreTail  = regexp.MustCompile(`  \+(\d+) more$`)
)

func TestHeaderCountsAtScale(t *testing.T) {
	m, _ := setup(t, thousandScopes())
	for _, w := range []int{120, 160, 250} {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 40})
		if got, want := headerVerdicts(m), "998 ✔ OK · 2 ✖ NO LEADER │ ✖ scope-0011  ✖ scope-0500"; got != want {
			t.Fatalf("%d columns: header\n got %q\nwant %q", w, got, want)
		}
	}

	// Narrow: the counts stay, the names go before they would be cut.
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	if got := headerVerdicts(m); got != "998 ✔ OK · 2 ✖ NO LEADER │ ✖ scope-0011  ✖ scope-0500" {
		t.Fatalf("60 columns: header %q", got)
	}
	for w, want := range map[int]string{
		50: "998 ✔ OK · 2 ✖ NO LEADER │ ✖ scope-0011  +1 more",
		40: "998 ✔ OK · 2 ✖ NO LEADER",
	} {
		if got := strings.TrimRight(plain(m.verdictLine(w)), " \n"); got != want {
			t.Fatalf("%d columns: header %q, want %q", w, got, want)
		}
	}
}

// TestHeaderManyInTrouble: more scopes in trouble than fit are named worst
// first and the rest counted; an OK scope is never named.
func TestHeaderManyInTrouble(t *testing.T) {
	s := bigCluster{scopes: 1000, nodes: 10, candidates: 10, troubled: true}.snapshot()
	s.Scopes[42].Verdict = collector.VerdictSplitBrain
	trouble := map[string]collector.Verdict{}
	counts := map[collector.Verdict]int{}
	for _, sc := range s.Scopes {
		counts[sc.Verdict]++
		if sc.Verdict != collector.VerdictOK {
			trouble[sc.Name] = sc.Verdict
		}
	}
	m, _ := setup(t, s)
	for _, w := range []int{80, 120, 250} {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 40})
		line := headerVerdicts(m)
		want := fmt.Sprintf("%d ✔ OK · 1 ‼ SPLIT BRAIN · %d ✖ NO LEADER · %d ▲ DEGRADED │ ‼ scope-0042  ✖ scope-0011",
			counts[collector.VerdictOK], counts[collector.VerdictNoLeader], counts[collector.VerdictDegraded])
		if !strings.HasPrefix(line, want) && w >= 120 {
			t.Fatalf("%d columns: header\n got %q\nwant %q…", w, line, want)
		}
		if textWidth(line) > w {
			t.Fatalf("%d columns: header %d wide", w, textWidth(line))
		}
		named := scopeName.FindAllString(line, -1)
		for _, n := range named {
			if _, ok := trouble[n]; !ok {
				t.Fatalf("%d columns: the header names %s, which is OK: %q", w, n, line)
			}
		}
		if len(named) == 0 {
			continue
		}
		var more int
		tail := moreTail.FindStringSubmatch(line)
		if tail == nil {
			t.Fatalf("%d columns: no +N more at the end of %q", w, line)
		}
		fmt.Sscan(tail[1], &more)
		if len(named)+more != len(trouble) {
			t.Fatalf("%d columns: %d named + %d more, want %d in trouble: %q", w, len(named), more, len(trouble), line)
		}
	}
}

// TestHeaderListOrCounts: a handful of scopes that fit are listed one by one;
// too wide for the terminal, or more than verdictListMax, they are counted.
func TestHeaderListOrCounts(t *testing.T) {
	m, _ := setup(t, troubleSnapshot())
	if got := headerVerdicts(m); got != "‼ SPLIT BRAIN billing   ✖ NO LEADER reports" {
		t.Fatalf("two scopes: %q", got)
	}
	m, _ = setup(t, healthySnapshot())
	if got := headerVerdicts(m); got != "✔ OK billing   ✔ OK reports" {
		t.Fatalf("two healthy scopes: %q", got)
	}

	// Too wide: long names at 60 columns.
	s := troubleSnapshot()
	s.Scopes[0].Name, s.Scopes[1].Name = "billing-eu-west", "reports-monthly-eu"
	m, _ = setup(t, s)
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	if got := headerVerdicts(m); got != "1 ‼ SPLIT BRAIN · 1 ✖ NO LEADER │ ‼ billing-eu-west  +1 more" {
		t.Fatalf("60 columns: %q", got)
	}

	// More than verdictListMax scopes, short enough to fit: counted all the same.
	s = bigCluster{scopes: verdictListMax + 1, nodes: 3, candidates: 3}.snapshot()
	for i := range s.Scopes {
		s.Scopes[i].Name = fmt.Sprintf("s%02d", i) // 17 × "✔ OK s00" fit in 250 columns
	}
	m, _ = setup(t, s)
	m.Update(tea.WindowSizeMsg{Width: 250, Height: 40})
	if got, want := headerVerdicts(m), fmt.Sprintf("%d ✔ OK", verdictListMax+1); got != want {
		t.Fatalf("%d scopes: %q, want %q", verdictListMax+1, got, want)
	}
	s.Scopes = s.Scopes[:verdictListMax]
	m, _ = setup(t, s)
	m.Update(tea.WindowSizeMsg{Width: 250, Height: 40})
	if got := headerVerdicts(m); !strings.HasPrefix(got, "✔ OK s00   ✔ OK s01   ✔ OK s02") {
		t.Fatalf("%d scopes: %q", verdictListMax, got)
	}
}

// TestTablesAtScale: paging, filtering and problems-only over 1,000 scopes
// and 10 nodes.
func TestTablesAtScale(t *testing.T) {
	m, _ := setup(t, thousandScopes())
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	view := screen(m)
	page := m.scopes.height
	if page < 5 || page >= 1000 {
		t.Fatalf("scopes pane shows %d rows", page)
	}
	if !strings.Contains(view, fmt.Sprintf("1–%d of 1000", page)) {
		t.Fatalf("no scroll hint for the first %d of 1000:\n%s", page, view)
	}
	// Worst first: the two without a leader lead the table.
	if got := scopeKeys(m)[:3]; !slices.Equal(got, []string{"scope-0011", "scope-0500", "scope-0000"}) {
		t.Fatalf("first rows %v", got)
	}

	// PgDn shows the next page whole, the cursor keeping its place.
	keys(m, "down", "pgdown")
	screen(m)
	if m.scopes.cursor != 1+page || m.scopes.offset != page {
		t.Fatalf("pgdown: cursor %d offset %d, want %d %d", m.scopes.cursor, m.scopes.offset, 1+page, page)
	}
	if !strings.Contains(screen(m), fmt.Sprintf("%d–%d of 1000", page+1, 2*page)) {
		t.Fatal("pgdown: the scroll hint does not follow")
	}
	keys(m, "pgup")
	if m.scopes.cursor != 1 || m.scopes.offset != 0 {
		t.Fatalf("pgup: cursor %d offset %d", m.scopes.cursor, m.scopes.offset)
	}
	keys(m, "end")
	if got := m.scopes.selected(); got != "scope-0999" {
		t.Fatalf("end: %s", got)
	}
	if !regexp.MustCompile(`(?m)^▸ scope-0999 `).MatchString(screen(m)) {
		t.Fatal("end: the last row is not on screen")
	}
	keys(m, "pgdown") // at the end: stays
	if got := m.scopes.selected(); got != "scope-0999" {
		t.Fatalf("pgdown at the end: %s", got)
	}
	keys(m, "home")
	if got := m.scopes.selected(); got != "scope-0011" {
		t.Fatalf("home: %s", got)
	}

	// The nodes table pages too.
	keys(m, "tab", "pgdown")
	if np := m.nodes.height; np < 2 || m.nodes.cursor != min(np, 9) {
		t.Fatalf("nodes pgdown: cursor %d, %d rows shown", m.nodes.cursor, np)
	}
	keys(m, "end")
	if got := m.nodes.selected(); got != "node-009" {
		t.Fatalf("nodes end: %s", got)
	}
	keys(m, "shift+tab")

	// Filter: a substring of scope names.
	keys(m, "/")
	typed(m, "scope-05")
	keys(m, "enter")
	if got := scopeKeys(m); len(got) != 100 || got[0] != "scope-0500" {
		t.Fatalf("filter scope-05: %d scopes, first %v", len(got), got[:min(len(got), 3)])
	}
	if !strings.Contains(screen(m), "SCOPES 100/1000") {
		t.Fatal("the filtered count is not shown")
	}
	keys(m, "esc")

	// Problems only: the two scopes in trouble; the nodes are all well.
	keys(m, "p")
	if got := scopeKeys(m); !slices.Equal(got, []string{"scope-0011", "scope-0500"}) {
		t.Fatalf("problems only: %v", got)
	}
	if len(m.nodes.rows) != 0 {
		t.Fatalf("problems only: %d nodes, want none", len(m.nodes.rows))
	}
	if !strings.Contains(screen(m), "SCOPES 2/1000") {
		t.Fatal("the problems-only count is not shown")
	}
}

// TestRolesAtScale: a node of a thousand scopes shows what it leads as a
// count, within the ROLES column.
func TestRolesAtScale(t *testing.T) {
	s := thousandScopes()
	n := s.Nodes[3]
	got := rolesText(&n)
	if want := "leads 100 of 1000: scope-0003 scope-0013 "; !strings.HasPrefix(got, want) {
		t.Fatalf("roles %q, want %q…", got, want)
	}
	if len(got) > nodeColumns[ndRoles].max+len(" scope-0000") {
		t.Fatalf("roles built past the column: %d bytes", len(got))
	}
	// A few scopes: the list, as before.
	h := healthySnapshot()
	if got := rolesText(&h.Nodes[0]); got != "billing:L reports:F" {
		t.Fatalf("roles %q", got)
	}
}
