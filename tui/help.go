package tui

import (
	"strings"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// legend explains the glyphs; it is searchable like the keys.
var legend = [][2]string{
	{"✔ OK", "led and heartbeating"},
	{"▲ DEGRADED", "led, something is off: an alert, or hb late"},
	{"✖ NO LEADER", "nobody leads it"},
	{"‼ SPLIT BRAIN", "lock ≠ record: act now"},
	{"· IDLE", "nobody meant to lead"},
	{"HB AGE ok", "≤ 2 × the interval"},
	{"HB AGE late", "≤ the trust window"},
	{"HB AGE bad", "beyond it: gate closed"},
	{"█ ▓ ▒ ░", "holders; · = nobody"},
	{"GAP BEFORE", "no leader before the term: from its predecessor's last sign of life to its start"},
	{"HELD FOR", "to the holder's last sign of life: a crash or an outage is the next term's gap"},
	{"holder silent", "the term is open, its holder leads no more"},
	{"dimmed, STALE", "old data, see error"},
}

// helpColumn is the narrowest help column; the screen holds as many as fit.
const helpColumn = 40

// helpLines renders the help screen: every binding of the key map, grouped,
// filtered by the search query, in as many columns as fit.
func (m *Model) helpLines(w, h int) []string {
	st := m.look
	q := m.mode.query
	search := m.keys.Filter.Help().Key
	query := search + " searches"
	switch {
	case m.mode.overlay == overlaySearch:
		query = "search: " + termsafe.String(q) + "▏"
	case q != "":
		query = "“" + termsafe.String(q) + "” (" + search + " edits)"
	}
	ncols := max(1, w/helpColumn)
	colW := w / ncols

	block := func(title string, entries [][2]string) []string {
		if len(entries) == 0 {
			return nil
		}
		kw := 0
		for _, e := range entries {
			kw = max(kw, textWidth(e[0]))
		}
		out := []string{st.paneTitle.Render(padRight(title, colW-1))}
		// A description too long for its column wraps under itself: a help
		// line is never cut.
		dw := max(1, colW-kw-4)
		for _, e := range entries {
			k := st.key.Render(padRight(e[0], kw))
			for _, part := range wrapWords(e[1], dw) {
				out = append(out, "  "+k+" "+padRight(part, dw))
				k = strings.Repeat(" ", kw)
			}
		}
		return out
	}
	var blocks [][]string
	for _, g := range m.keys.groups() {
		var entries [][2]string
		for _, b := range g.bindings {
			if b.Enabled() && matchHelp(b, g.title, q) {
				entries = append(entries, [2]string{b.Help().Key, b.Help().Desc})
			}
		}
		if b := block(g.title, entries); b != nil {
			blocks = append(blocks, b)
		}
	}
	var lg [][2]string
	for _, l := range legend {
		if q == "" || strings.Contains(strings.ToLower(l[0]+" "+l[1]+" legend"), strings.ToLower(q)) {
			lg = append(lg, l)
		}
	}
	if b := block("legend", lg); b != nil {
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		title := m.paneTitle(st, m.focus, "HELP · "+query, m.keys.Back.Help().Key+" closes", w)
		edit := m.keys.Erase.Help().Key + " edits, " + m.keys.Back.Help().Key + " clears"
		return []string{title, "", st.render(toneMuted, fitLine("  nothing matches “"+q+"” ("+edit+")", w))}
	}

	// Flow the blocks into columns, a block never split.
	total := 0
	for _, b := range blocks {
		total += len(b) + 1
	}
	target := (total + ncols - 1) / ncols
	cols := [][]string{nil}
	for _, b := range blocks {
		cur := &cols[len(cols)-1]
		if len(*cur) > 0 && len(*cur)+len(b) > target && len(cols) < ncols {
			cols = append(cols, nil)
			cur = &cols[len(cols)-1]
		}
		if len(*cur) > 0 {
			*cur = append(*cur, "")
		}
		*cur = append(*cur, b...)
	}
	height := 0
	for _, c := range cols {
		height = max(height, len(c))
	}
	lines := make([]string, height)
	for i := range lines {
		var b strings.Builder
		for _, c := range cols {
			l := ""
			if i < len(c) {
				l = c[i]
			}
			b.WriteString(fitLine(l, colW))
		}
		lines[i] = fitLine(b.String(), w)
	}
	view := h - 1
	m.mode.helpScroll = min(m.mode.helpScroll, max(0, len(lines)-view))
	hint := m.keys.Back.Help().Key + " closes"
	if len(lines) > view {
		hint = itoa(m.mode.helpScroll+1) + "–" + itoa(min(len(lines), m.mode.helpScroll+view)) + " of " + itoa(len(lines)) + " · " + m.keys.scrollHint() + " · " + hint
	}
	title := m.paneTitle(st, m.focus, "HELP · "+query, hint, w)
	return append([]string{title}, lines[m.mode.helpScroll:]...)
}
