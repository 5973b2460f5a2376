package tui

import (
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// timelineWindow is how far back the terms timeline reaches.
const timelineWindow = 5 * time.Minute

// holderGlyphs tell holders apart without colour; the legend names them.
var holderGlyphs = [holderTones]string{"█", "▓", "▒", "░"}

const noLeaderGlyph = "·"

// sideBySideWidth is the width from which the timeline and the recent terms
// table sit side by side instead of stacked.
const sideBySideWidth = 140

// termsWant is how many lines the terms pane could use (title included).
func (m *Model) termsWant(w int) int {
	strip := max(1, len(m.scopes.rows))
	table := 1 + max(1, len(m.terms.rows))
	if w >= sideBySideWidth {
		return 1 + max(1+strip, table)
	}
	return 1 + 1 + strip + table
}

// termsPane renders the timeline and the recent terms in h lines and returns
// the holders' legend for the title.
func (m *Model) termsPane(st *styles, w, h int) ([]string, string) {
	if h <= 0 {
		return nil, ""
	}
	focused := m.focus == paneTerms
	if w >= sideBySideWidth {
		lw := w / 2
		rw := w - lw - 1
		left, legend := m.timelineLines(st, lw, h, m.timelineScopes(h-1))
		right := m.terms.render(st, rw, h-1, focused)
		out := make([]string, h)
		for i := range out {
			var l, r string
			if i < len(left) {
				l = left[i]
			}
			if i < len(right) {
				r = right[i]
			}
			out[i] = fitLine(l, lw) + " " + fitLine(r, rw)
		}
		return out, legend
	}
	// Stacked: the timeline gets up to half, the table the rest.
	stripRows := min(max(1, len(m.scopes.rows)), max(1, (h-1)/2))
	tableRows := h - 1 - stripRows - 1
	if tableRows < 1 {
		stripRows = max(1, h-3)
		tableRows = h - 2 - stripRows
	}
	strip, legend := m.timelineLines(st, w, 1+stripRows, m.timelineScopes(stripRows))
	out := append(strip, m.terms.render(st, w, tableRows, focused)...)
	return out, legend
}

// timelineScopes picks up to n scopes for the timeline: the scopes table's
// window, moved to include the selected scope.
func (m *Model) timelineScopes(n int) []string {
	rows := m.scopes.rows
	if n <= 0 || len(rows) == 0 {
		return nil
	}
	start := m.scopes.offset
	if m.scopes.cursor >= start+n {
		start = m.scopes.cursor - n + 1
	}
	start = max(0, min(start, len(rows)-n))
	end := min(len(rows), start+n)
	out := make([]string, 0, end-start)
	for _, r := range rows[start:end] {
		out = append(out, r.key)
	}
	return out
}

// timelineLines renders the time axis and one strip per scope in at most h
// lines of width w: time runs left to right over the last timelineWindow, a
// holder's glyph where the scope was led, "·" where nobody led it.
func (m *Model) timelineLines(st *styles, w, h int, scopes []string) ([]string, string) {
	if h <= 0 {
		return nil, ""
	}
	labelW := 6
	for _, s := range scopes {
		labelW = max(labelW, textWidth(termsafe.String(s)))
	}
	labelW = min(labelW, 18)
	cols := w - 2 - labelW - 1
	if cols < 10 {
		return []string{st.render(toneMuted, fitLine("  (too narrow for the timeline)", w))}, ""
	}
	now := m.snap.DBTime
	if now.IsZero() {
		now = m.snap.At
	}
	start := now.Add(-timelineWindow)
	step := timelineWindow / time.Duration(cols)

	out := make([]string, 0, h)
	out = append(out, st.render(toneMuted, fitLine(strings.Repeat(" ", 2+labelW+1)+timeAxis(cols, timelineWindow), w)))

	// One glyph per holder when few holders show; otherwise the glyph
	// alternates per term and the terms table names the holders.
	holders := map[string]bool{}
	for _, name := range scopes {
		for _, t := range m.termsByScope[name] {
			if termEnd(t, now).After(start) {
				holders[t.Holder] = true
			}
		}
	}
	glyphOf := map[string]tone{}
	perHolder := len(holders) <= holderTones
	for i, h := range sortedKeys(holders) {
		glyphOf[h] = toneHolder0 + tone(i%holderTones)
	}
	selected := m.scopes.selected()
	var b strings.Builder
	for _, name := range scopes {
		if len(out) >= h {
			break
		}
		b.Reset()
		if name == selected {
			b.WriteString("▸ ")
		} else {
			b.WriteString("  ")
		}
		b.WriteString(padRight(termsafe.String(name), labelW))
		b.WriteString(" ")
		m.strip(&b, st, m.termsByScope[name], start, now, step, cols, glyphOf, perHolder)
		out = append(out, b.String())
	}
	if !perHolder {
		return out, st.render(toneHolder0, holderGlyphs[0]) + st.render(toneHolder1, holderGlyphs[1]) + " alternate per term  " + noLeaderGlyph + " none"
	}
	var legend []string
	for _, h := range sortedKeys(holders) {
		t := glyphOf[h]
		legend = append(legend, st.render(t, holderGlyphs[t-toneHolder0])+" "+termsafe.String(h))
	}
	legend = append(legend, noLeaderGlyph+" none")
	return out, strings.Join(legend, "  ")
}

// strip writes one scope's strip: cols columns from start, step apart; each
// column shows who held the scope at its midpoint. Runs of one term are
// styled in one go.
func (m *Model) strip(b *strings.Builder, st *styles, terms []collector.Term, start, now time.Time, step time.Duration, cols int, glyphOf map[string]tone, perHolder bool) {
	j := 0
	run, runLen := -1, 0 // run: index of the term drawn, -1 = nobody
	nth := 0             // terms drawn so far, for alternating glyphs
	flush := func() {
		if runLen == 0 {
			return
		}
		if run < 0 {
			b.WriteString(st.render(toneMuted, strings.Repeat(noLeaderGlyph, runLen)))
		} else {
			t := glyphOf[terms[run].Holder]
			if !perHolder {
				t = toneHolder0 + tone(nth%2)
				nth++
			}
			b.WriteString(st.render(t, strings.Repeat(holderGlyphs[t-toneHolder0], runLen)))
		}
		runLen = 0
	}
	for c := 0; c < cols; c++ {
		mid := start.Add(step*time.Duration(c) + step/2)
		for j < len(terms) && termEnd(terms[j], now).Before(mid) {
			j++
		}
		cur := -1
		if j < len(terms) && !terms[j].AcquiredAt.After(mid) {
			cur = j
		}
		if cur != run {
			flush()
			run = cur
		}
		runLen++
	}
	flush()
}

func termEnd(t collector.Term, now time.Time) time.Time {
	if t.Open() {
		return now
	}
	return t.ReleasedAt
}

// timeAxis labels cols columns spanning window: "-5m", "-4m", …, "now".
func timeAxis(cols int, window time.Duration) string {
	axis := []rune(strings.Repeat(" ", cols))
	put := func(pos int, s string) {
		r := []rune(s)
		if pos < 0 || pos+len(r) > cols {
			return
		}
		for i := pos; i < pos+len(r); i++ {
			if axis[i] != ' ' || (i > 0 && axis[i-1] != ' ' && i == pos) {
				return
			}
		}
		copy(axis[pos:], r)
	}
	put(cols-3, "now")
	tick := time.Minute
	for k := int(window / tick); k >= 1; k-- {
		pos := int(float64(cols) * float64(window-time.Duration(k)*tick) / float64(window))
		put(pos, "-"+fmtAxis(time.Duration(k)*tick))
	}
	return string(axis)
}

// fmtAxis labels a time-axis tick or the span of the timeline: whole minutes
// ("5m"), else whole seconds ("30s"); a cell's "5m00s" would crowd the axis.
func fmtAxis(d time.Duration) string {
	if d%time.Minute == 0 {
		return itoa(int(d/time.Minute)) + "m"
	}
	return itoa(int(d/time.Second)) + "s"
}
