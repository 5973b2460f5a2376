package tui

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
)

// faultSizes are the terminals the fault frames are pinned at: the smallest
// common one (compact layout) and a full one.
var faultSizes = [][2]int{{80, 24}, {120, 40}}

// TestGoldenFaults renders the dashboard at every moment of every fault
// (faults_moments_test.go) and checks, pane by pane, what the on-call reader
// must be told there; the frames themselves are pinned in
// testdata/TestGoldenFaults. Update with:
// go test ./tui -run 'TestGolden|TestRenderOnce' -update
func TestGoldenFaults(t *testing.T) {
	for _, fault := range slices.Sorted(mapKeys(faultMoments)) {
		for _, moment := range []string{"during", "after", "settled"} {
			fm := faultMoments[fault][moment]()
			checks := faultChecks[fault][moment]
			if len(checks) == 0 {
				t.Fatalf("%s/%s: no checks", fault, moment)
			}
			for _, sz := range faultSizes {
				t.Run(fault+"/"+moment+"/"+itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
					f := renderFault(t, fm, sz[0], sz[1])
					for _, c := range checks {
						c.check(t, f)
					}
					golden.RequireEqual(t, f.text)
				})
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func renderFault(t *testing.T, fm faultMoment, w, h int) *frame {
	t.Helper()
	m, _ := setup(t, nil)
	for _, s := range fm.snaps {
		m.Update(snapshotMsg{s})
	}
	m.Update(eventsMsg{fm.events})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return newFrame(m)
}

// frame is one rendered screen, cut into its parts the way a reader sees
// them: the header (title, verdicts, alert banner), the panes by title, the
// footer.
type frame struct {
	m     *Model
	text  string
	lines []string
	// panes maps a pane's title word to its lines, title first.
	panes  map[string][]string
	header []string
	footer []string
}

var paneTitle = regexp.MustCompile(`^(▸ |  )(SCOPES|NODES|TERMS|EVENTS)\b`)

func newFrame(m *Model) *frame {
	text := plain(m.View().Content)
	f := &frame{m: m, text: text, lines: strings.Split(strings.TrimSuffix(text, "\n"), "\n"), panes: map[string][]string{}}
	for len(f.lines) < m.height {
		f.lines = append(f.lines, "")
	}
	end := len(f.lines) - len(m.footerLines(m.width))
	f.footer = f.lines[end:]
	cur := ""
	for _, l := range f.lines[:end] {
		if g := paneTitle.FindStringSubmatch(l); g != nil {
			cur = g[2] // the title line is the pane's first: it says STALE, the legend
		}
		if cur == "" {
			f.header = append(f.header, l)
		} else {
			f.panes[cur] = append(f.panes[cur], l)
		}
	}
	return f
}

// tableOf returns the pane's table, the column titles and the pane's lines
// from the table's header line on.
func (f *frame) tableOf(t *testing.T, pane string) (*table, []string) {
	t.Helper()
	lines, ok := f.panes[pane]
	if !ok {
		t.Fatalf("no %s pane on screen:\n%s", pane, f.text)
	}
	var tbl *table
	var first string
	switch pane {
	case "SCOPES":
		tbl, first = f.m.scopes, "SCOPE"
	case "NODES":
		tbl, first = f.m.nodes, "NODE"
	case "TERMS":
		tbl, first = f.m.terms, "EPOCH"
	default:
		t.Fatalf("%s is not a table", pane)
	}
	for i, l := range lines[1:] {
		i++
		if strings.HasPrefix(strings.TrimSpace(l), first) {
			return tbl, lines[i:]
		}
	}
	t.Fatalf("%s pane has no table header:\n%s", pane, f.text)
	return nil, nil
}

// cells cuts a table line into its visible cells by the table's own column
// widths at this width, keyed by column title. The header line must cut into
// the titles, or the cut is wrong and the test says so.
func (f *frame) cells(t *testing.T, tbl *table, header, line string) map[string]string {
	t.Helper()
	ws, sep := tbl.widths(f.m.width, 2)
	out := map[string]string{}
	x := 2
	for j, c := range tbl.cols {
		if ws[j] < 0 {
			continue
		}
		h := strings.TrimRight(strings.TrimSpace(ansi.Cut(header, x, x+ws[j])), "↑↓")
		if h != c.title && !(strings.HasPrefix(c.title, h) && strings.HasSuffix(h, "…")) {
			t.Fatalf("column %q cut as %q: the frame's layout is not the table's\n%s", c.title, h, f.text)
		}
		out[c.title] = strings.TrimSpace(ansi.Cut(line, x, x+ws[j]))
		x += ws[j] + sep
	}
	return out
}

// row returns the cells of the table row whose cells match key (column
// title → text), failing when no row on screen does.
func (f *frame) row(t *testing.T, pane string, key map[string]string) map[string]string {
	t.Helper()
	tbl, lines := f.tableOf(t, pane)
	for _, l := range lines[1:] {
		c := f.cells(t, tbl, lines[0], l)
		match := true
		for k, v := range key {
			if c[k] != v {
				match = false
			}
		}
		if match {
			return c
		}
	}
	t.Fatalf("%s pane has no row %v:\n%s", pane, key, f.text)
	return nil
}

// faultCheck is one thing the frame must say: in a pane (SCOPES, NODES,
// TERMS, EVENTS, or HEADER and FOOTER), in a row of its table (key: column
// title → cell text) and a column of it, or in the pane as a whole. full:
// the check is for the full layout only (the compact one shows the terms
// pane only while it has the focus).
type faultCheck struct {
	pane string
	key  map[string]string
	col  string
	has  []string // each must be in the text
	not  []string // none may be
	is   *string  // the cell is exactly this
	full bool
}

func (c faultCheck) check(t *testing.T, f *frame) {
	t.Helper()
	if c.full && f.m.compact() {
		return
	}
	var text, where string
	switch {
	case c.key != nil:
		cells := f.row(t, c.pane, c.key)
		where = c.pane + " row " + mapText(c.key)
		if c.col != "" {
			cell, ok := cells[c.col]
			if !ok {
				t.Errorf("%s: column %s is not on screen:\n%s", where, c.col, f.text)
				return
			}
			text, where = cell, where+" column "+c.col
		} else {
			for _, col := range f.row(t, c.pane, c.key) {
				text += col + " │ "
			}
		}
	case c.pane == "HEADER":
		text, where = strings.Join(f.header, "\n"), "header"
	case c.pane == "FOOTER":
		text, where = strings.Join(f.footer, "\n"), "footer"
	default:
		lines, ok := f.panes[c.pane]
		if !ok {
			t.Errorf("no %s pane on screen:\n%s", c.pane, f.text)
			return
		}
		text, where = strings.Join(lines, "\n"), c.pane+" pane"
	}
	if c.is != nil && text != *c.is {
		t.Errorf("%s is %q, want %q:\n%s", where, text, *c.is, f.text)
	}
	for _, s := range c.has {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q (it says %q):\n%s", where, s, text, f.text)
		}
	}
	for _, s := range c.not {
		if strings.Contains(text, s) {
			t.Errorf("%s says %q, which is false here (%q):\n%s", where, s, text, f.text)
		}
	}
}

func mapText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(mapKeys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// Check constructors.

func scopeCell(scope, col string, has ...string) faultCheck {
	return faultCheck{pane: "SCOPES", key: map[string]string{"SCOPE": scope}, col: col, has: has}
}

func scopeCellIs(scope, col, is string) faultCheck {
	return faultCheck{pane: "SCOPES", key: map[string]string{"SCOPE": scope}, col: col, is: &is}
}

func nodeState(id, is string) faultCheck {
	return faultCheck{pane: "NODES", key: map[string]string{"NODE": id}, col: "STATE", is: &is}
}

// notFollower: the scope's FOLLOWERS cell counts n and does not name id.
func notFollower(scope, id string, n string) faultCheck {
	return faultCheck{pane: "SCOPES", key: map[string]string{"SCOPE": scope}, col: "FOLLOWERS", has: []string{n}, not: []string{id}}
}

func termEnded(scope, epoch, ended string) faultCheck {
	return faultCheck{pane: "TERMS", key: map[string]string{"SCOPE": scope, "EPOCH": epoch}, col: "ENDED BY", is: &ended, full: true}
}

func paneHas(pane string, has ...string) faultCheck { return faultCheck{pane: pane, has: has} }

func paneNot(pane string, not ...string) faultCheck { return faultCheck{pane: pane, not: not} }

// faultChecks say, per fault and moment, what the frame must tell.
var faultChecks = map[string]map[string][]faultCheck{
	"kill9": {
		"during": {
			// The dead node's session is gone: it is down, not live, and no
			// scope counts it as a follower.
			nodeState("node-1", "✖ down"),
			{pane: "NODES", key: map[string]string{"NODE": "node-1"}, col: "ROLES", has: []string{"follows none"}, not: []string{":F"}},
			notFollower("ledger", "node-1", "1:"),
			// Its scopes have no leader: the leader on record is the one who
			// was, and for how long there has been none; no tenure ticks.
			scopeCell("billing", "LEADER", "✖ was node-1"),
			{pane: "SCOPES", key: map[string]string{"SCOPE": "billing"}, col: "LEADER", has: []string{"none for 45ms"}, full: true},
			scopeCellIs("billing", "VERDICT", "✖ NO LEADER"),
			scopeCellIs("billing", "TENURE", "—"),
			scopeCellIs("billing", "HB AGE", "—"),
			scopeCell("reports", "LEADER", "✖ was node-1"),
			paneHas("HEADER", "✖ NO LEADER billing", "✖ NO LEADER reports"),
			paneHas("EVENTS", "kill -9 node-1", "node left"),
		},
		"after": {
			nodeState("node-1", "✖ down"),
			scopeCellIs("billing", "LEADER", "node-3"),
			scopeCellIs("billing", "EPOCH", "43"),
			scopeCellIs("billing", "VERDICT", "✔ OK"),
			notFollower("billing", "node-1", "1:"),
			scopeCellIs("reports", "LEADER", "node-2"),
			scopeCellIs("reports", "FOLLOWERS", "none"),
			scopeCell("reports", "ALERTS", "no_follower"),
			scopeCellIs("reports", "VERDICT", "▲ DEGRADED"),
			termEnded("billing", "42", "crashed"),
			termEnded("reports", "7", "crashed"),
			termEnded("billing", "43", "(leading)"),
			paneHas("HEADER", "no_follower"),
			paneHas("EVENTS", "billing epoch 42 of node-1 ended (crashed)", "node-3 leads billing at epoch 43"),
		},
		"settled": {
			nodeState("node-1", "✖ down"),
			{pane: "NODES", key: map[string]string{"NODE": "node-1"}, col: "SEEN", has: []string{"45s"}},
			notFollower("billing", "node-1", "1:"),
			scopeCell("reports", "ALERTS", "no_follower"),
			termEnded("billing", "42", "crashed"),
			paneHas("HEADER", "no_follower"),
			{pane: "HEADER", has: []string{"stale_node"}, full: true},
		},
	},
	"freeze": {
		"during": {
			// Frozen past its trust window: late, its gates closed, not a
			// follower; the server still holds its lock, so it is still the
			// leader on record, late, its scopes degraded.
			nodeState("node-1", "◐ late"),
			{pane: "NODES", key: map[string]string{"NODE": "node-1"}, col: "ROLES", has: []string{"billing:L"}, not: []string{":F"}},
			{pane: "NODES", key: map[string]string{"NODE": "node-1"}, col: "ROLES", has: []string{"follows none"}, full: true},
			notFollower("ledger", "node-1", "1:"),
			scopeCellIs("billing", "LEADER", "node-1"),
			scopeCellIs("billing", "VERDICT", "▲ DEGRADED"),
			scopeCellIs("billing", "HB AGE", "1.8s"),
			paneHas("EVENTS", "SIGSTOP node-1", "heartbeat late"),
		},
		"after": {
			nodeState("node-1", "✖ down"),
			scopeCellIs("billing", "LEADER", "node-3"),
			scopeCellIs("billing", "EPOCH", "43"),
			scopeCell("reports", "ALERTS", "no_follower"),
			termEnded("billing", "42", "heartbeat_timeout"),
			{pane: "EVENTS", has: []string{"billing epoch 42 of node-1 ended (heartbeat_timeout)"}, full: true},
		},
		"settled": {
			nodeState("node-1", "● live"),
			scopeCellIs("reports", "FOLLOWERS", "1: node-1"),
			scopeCellIs("reports", "VERDICT", "✔ OK"),
			termEnded("billing", "42", "heartbeat_timeout"),
			paneHas("EVENTS", "came back"),
			paneNot("HEADER", "no_follower"),
		},
	},
	"hung_link": {
		"during": {
			nodeState("node-1", "◐ late"),
			notFollower("billing", "node-1", "2:"),
			scopeCellIs("billing", "LEADER", "node-1"),
			scopeCellIs("billing", "VERDICT", "▲ DEGRADED"),
			scopeCellIs("billing", "HB AGE", "1.8s"),
		},
		"after": {
			nodeState("node-1", "✖ down"),
			scopeCellIs("billing", "LEADER", "node-3"),
			termEnded("billing", "42", "lost_connection"),
			termEnded("reports", "7", "lost_connection"),
			{pane: "EVENTS", has: []string{"billing epoch 42 of node-1 ended (lost_connection)"}, full: true},
		},
		"settled": {
			nodeState("node-1", "● live"),
			termEnded("billing", "42", "lost_connection"),
			paneHas("EVENTS", "healed the database link of node-1"),
		},
	},
	"pg_restart": {
		"during": {
			// Nothing can be read: the last good data stays, marked stale, and
			// the footer says why.
			paneHas("FOOTER", "✖ DISCONNECTED", "showing the last good data",
				"the database system is shutting down (SQLSTATE 57P03)"),
			paneHas("SCOPES", "STALE"),
			scopeCellIs("billing", "LEADER", "node-1"),
		},
		"after": {
			paneNot("FOOTER", "DISCONNECTED"),
			nodeState("node-1", "✖ down"),
			scopeCellIs("billing", "LEADER", "node-2"),
			scopeCellIs("billing", "EPOCH", "43"),
			scopeCellIs("ledger", "EPOCH", "20"),
			termEnded("billing", "42", "database_failover"),
			termEnded("ledger", "19", "database_failover"),
			{pane: "EVENTS", has: []string{"billing epoch 42 of node-1 ended (database_failover)"}, full: true},
		},
		"settled": {
			nodeState("node-1", "● live"),
			termEnded("billing", "42", "database_failover"),
			paneNot("HEADER", "no_follower"),
		},
	},
	"db_failover_standby": {
		"during": {
			paneHas("FOOTER", "✖ DISCONNECTED", "connection refused"),
			paneHas("HEADER", "collector_down"),
			paneHas("NODES", "STALE"),
		},
		"after": {
			// The new timeline's epochs read as timeline and term.
			scopeCellIs("billing", "EPOCH", "t2·1"),
			scopeCellIs("ledger", "EPOCH", "t2·1"),
			scopeCellIs("ledger", "LEADER", "node-3"),
			termEnded("billing", "42", "database_failover"),
			termEnded("billing", "t2·1", "(leading)"),
			{pane: "TERMS", has: []string{"⇄ db failover", "⇄"}, full: true},
			paneHas("EVENTS", "leads billing at epoch t2·1"),
			{pane: "EVENTS", has: []string{"⇄ db failover", "WAL timeline 1 → 2"}, full: true},
			paneHas("HEADER", "10.0.0.6:5432"),
			nodeState("node-1", "✖ down"),
		},
		"settled": {
			scopeCellIs("billing", "EPOCH", "t2·1"),
			{pane: "TERMS", has: []string{"⇄ db failover"}, full: true},
			nodeState("node-1", "● live"),
		},
	},
	"resign": {
		"during": {
			scopeCellIs("billing", "LEADER", "—"),
			scopeCellIs("billing", "VERDICT", "✖ NO LEADER"),
			nodeState("node-1", "● live"),
			paneHas("EVENTS", "resign asked", "resigned"),
		},
		"after": {
			scopeCellIs("billing", "LEADER", "node-3"),
			scopeCellIs("billing", "EPOCH", "43"),
			scopeCellIs("billing", "FOLLOWERS", "2: node-1,node-2"),
			termEnded("billing", "42", "resigned"),
			{pane: "TERMS", key: map[string]string{"SCOPE": "billing", "EPOCH": "43"}, col: "GAP BEFORE", has: []string{"2.0ms"}, full: true},
		},
		"settled": {
			scopeCellIs("billing", "LEADER", "node-3"),
			termEnded("billing", "42", "resigned"),
		},
	},
	"handover": {
		"during": {
			scopeCellIs("billing", "LEADER", "node-1 → node-3"),
			scopeCellIs("billing", "EPOCH", "42"),
			paneHas("EVENTS", "handover asked"),
		},
		"after": {
			scopeCellIs("billing", "LEADER", "node-3"),
			scopeCellIs("billing", "EPOCH", "43"),
			termEnded("billing", "42", "handed_over → node-3"),
		},
		"settled": {
			scopeCellIs("billing", "LEADER", "node-3"),
			termEnded("billing", "42", "handed_over → node-3"),
		},
	},
}
