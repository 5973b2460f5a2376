package tui

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// timelineWindow is how far back the terms timeline reaches: no further than
// the collector's TermsWindow (by default), within which a snapshot carries
// every scope's terms.
const timelineWindow = 5 * time.Minute

// holderGlyphs tell holders apart without colour; the legend names them.
// Most distinct first: ▓ is last because some fonts draw it almost like █.
var holderGlyphs = [holderTones]string{"█", "▒", "░", "▀", "▄", "▚", "≡", "▓"}

const (
	noLeaderGlyph = "·"
	// moreGlyph draws the holders beyond the palette: the timeline cannot
	// tell them apart, and the legend says so.
	moreGlyph = "?"
	// failoverGlyph marks a database failover (a new WAL timeline) on the
	// time axis, as the event log's "⇄ db failover".
	failoverGlyph = "⇄"
)

// holderMarks gives each node that led in the timeline window one glyph (and
// colour) for the whole window, in every strip and in the detail view. A node
// keeps its mark while it has a term in the window: a new holder takes the
// lowest free mark, in order of first appearance, and a mark is freed when
// its node's last term leaves the window. Beyond the palette a holder has no
// mark (drawn moreGlyph) rather than sharing one.
type holderMarks struct {
	of map[string]int // node id → index into holderGlyphs
}

// mark returns the holder's palette index, false beyond the palette.
func (hm *holderMarks) mark(holder string) (int, bool) {
	i, ok := hm.of[holder]
	return i, ok
}

// update keeps the marks of the holders still in the window [start, now] and
// hands free marks to the new ones.
func (hm *holderMarks) update(termsByScope map[string][]collector.Term, start, now time.Time) {
	first := map[string]time.Time{}
	for _, terms := range termsByScope {
		for _, t := range terms {
			if !termEnd(t, now).After(start) {
				continue
			}
			at := t.AcquiredAt
			if at.Before(start) {
				at = start
			}
			if f, ok := first[holderKey(t)]; !ok || at.Before(f) {
				first[holderKey(t)] = at
			}
		}
	}
	used := [holderTones]bool{}
	next := map[string]int{}
	for h, i := range hm.of {
		if _, ok := first[h]; ok {
			next[h], used[i] = i, true
		}
	}
	fresh := make([]string, 0, len(first))
	for h := range first {
		if _, ok := next[h]; !ok {
			fresh = append(fresh, h)
		}
	}
	slices.SortFunc(fresh, func(a, b string) int {
		if c := first[a].Compare(first[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	free := 0
	for _, h := range fresh {
		for free < holderTones && used[free] {
			free++
		}
		if free == holderTones {
			break
		}
		next[h], used[free] = free, true
	}
	hm.of = next
}

// timelineNow is the right edge of the timeline: the database's clock.
func (m *Model) timelineNow() time.Time {
	if m.snap == nil {
		return time.Time{}
	}
	if !m.snap.DBTime.IsZero() {
		return m.snap.DBTime
	}
	return m.snap.At
}

// dbFailovers are the times in [start, now] the database failed over: the
// collector's failover events, and the first term of a scope granted on a
// later WAL timeline than its previous term (an epoch that crossed a 2^40
// boundary; show.Epoch prints it "t2·N").
func (m *Model) dbFailovers(start, now time.Time) []time.Time {
	var out []time.Time
	in := func(at time.Time) bool { return !at.Before(start) && !at.After(now) }
	for _, e := range m.events.entries {
		if e.ev.Kind == collector.EventFailover && in(e.ev.At) {
			out = append(out, e.ev.At)
		}
	}
	for _, terms := range m.termsByScope {
		for i := 1; i < len(terms); i++ {
			if terms[i].Epoch>>40 > terms[i-1].Epoch>>40 && in(terms[i].AcquiredAt) {
				out = append(out, terms[i].AcquiredAt)
			}
		}
	}
	return out
}

// sideBySideWidth is the width from which the timeline and the recent terms
// table sit side by side instead of stacked.
const sideBySideWidth = 140

// termsTableRows is how many recent terms the terms pane wants to show
// before the event log has every line it could fill: a failover's story is
// in the log, and the table's older rows are a scroll (or a filter) away.
const termsTableRows = 5

// termsWant is how many lines the terms pane wants (title included) — the
// timeline and up to termsTableRows terms — and how many more it could use
// for the rest of the terms, once the other panes have what they want.
func (m *Model) termsWant(w int) (want, more int) {
	strip := max(1, len(m.scopes.rows))
	rows := max(1, len(m.terms.rows))
	shown := min(rows, termsTableRows)
	if w >= sideBySideWidth {
		// Side by side: the table beside the timeline, as tall as it (3 terms
		// at least); rows the timeline does not use are blank on its side.
		shown = min(rows, max(strip, 3))
		want = 1 + max(1+strip, 1+shown)
		return want, 1 + max(1+strip, 1+rows) - want
	}
	return 1 + 1 + strip + 1 + shown, rows - shown
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
		labelW = max(labelW, textWidth(termsafe.String(keyLabel(s))))
	}
	labelW = min(labelW, 18)
	cols := w - 2 - labelW - 1
	if cols < 10 {
		return []string{st.render(toneMuted, fitLine("  (too narrow for the timeline)", w))}, ""
	}
	now := m.timelineNow()
	start := now.Add(-timelineWindow)
	step := timelineWindow / time.Duration(cols)

	out := make([]string, 0, h)
	failovers := m.dbFailovers(start, now)
	out = append(out, fitLine(strings.Repeat(" ", 2+labelW+1)+axisLine(st, cols, start, step, failovers), w))

	shown := map[string]bool{}
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
		b.WriteString(padRight(termsafe.String(keyLabel(name)), labelW))
		b.WriteString(" ")
		m.strip(&b, st, m.termsByScope[name], start, now, m.knownUntil(name), step, cols, shown)
		out = append(out, b.String())
	}
	return out, m.timelineLegend(st, shown, len(failovers) > 0)
}

// timelineLegend names the mark of every holder drawn, in palette order, then
// how many holders the palette could not tell apart, the failover marker
// when one is drawn, and the no-leader dot.
func (m *Model) timelineLegend(st *styles, shown map[string]bool, failover bool) string {
	var named [holderTones]string
	more := 0
	for h := range shown {
		if i, ok := m.marks.mark(h); ok {
			named[i] = h
		} else {
			more++
		}
	}
	var legend []string
	for i, h := range named {
		if h != "" {
			legend = append(legend, st.render(toneHolder0+tone(i), holderGlyphs[i])+" "+termsafe.String(keyLabel(h)))
		}
	}
	if more > 0 {
		legend = append(legend, moreGlyph+" "+strconv.Itoa(more)+" more nodes (over "+strconv.Itoa(holderTones)+": see the table)")
	}
	if failover {
		legend = append(legend, st.render(toneBad, failoverGlyph)+" db failover")
	}
	legend = append(legend, noLeaderGlyph+" none")
	return strings.Join(legend, "  ")
}

// axisLine is the time axis over cols columns from start, step apart, with
// failoverGlyph in the columns where the database failed over, in place of
// the tick label it lands on.
func axisLine(st *styles, cols int, start time.Time, step time.Duration, failovers []time.Time) string {
	axis := []rune(timeAxis(cols, timelineWindow))
	if len(failovers) == 0 {
		return st.render(toneMuted, string(axis))
	}
	marked := make([]bool, cols)
	for _, at := range failovers {
		c := max(0, min(int(at.Sub(start)/step), cols-1))
		marked[c] = true
		// A tick label the marker lands on goes whole: "⇄ow" reads as nothing.
		for i := c; i >= 0 && axis[i] != ' '; i-- {
			axis[i] = ' '
		}
		for i := c + 1; i < cols && axis[i] != ' '; i++ {
			axis[i] = ' '
		}
	}
	var b strings.Builder
	run := 0
	for c := 0; c <= cols; c++ {
		if c < cols && !marked[c] {
			continue
		}
		b.WriteString(st.render(toneMuted, string(axis[run:c])))
		if c < cols {
			b.WriteString(st.render(toneBad, failoverGlyph))
		}
		run = c + 1
	}
	return b.String()
}

// strip writes one scope's strip: cols columns from start, step apart; each
// column shows who held the scope at its midpoint, in the holder's mark.
// Runs of one term are styled in one go. The holders drawn are added to shown.
// Columns after known (not zero: the last read of a fleet's database that
// cannot be read now) are blank: nobody knows who led then.
func (m *Model) strip(b *strings.Builder, st *styles, terms []collector.Term, start, now, known time.Time, step time.Duration, cols int, shown map[string]bool) {
	j := 0
	run, runLen := -1, 0 // run: index of the term drawn, -1 = nobody
	flush := func() {
		if runLen == 0 {
			return
		}
		if run < 0 {
			b.WriteString(st.render(toneMuted, strings.Repeat(noLeaderGlyph, runLen)))
		} else {
			h := holderKey(terms[run])
			shown[h] = true
			if i, ok := m.marks.mark(h); ok {
				b.WriteString(st.render(toneHolder0+tone(i), strings.Repeat(holderGlyphs[i], runLen)))
			} else {
				b.WriteString(strings.Repeat(moreGlyph, runLen))
			}
		}
		runLen = 0
	}
	for c := 0; c < cols; c++ {
		mid := start.Add(step*time.Duration(c) + step/2)
		if c == cols-1 {
			mid = now // the last column is "now": the holder at this moment, not half a column ago
		}
		if !known.IsZero() && mid.After(known) {
			flush()
			b.WriteString(strings.Repeat(" ", cols-c))
			return
		}
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

// holderKey is the term's holder as the timeline tells holders apart: by
// node id, and in a fleet by database too (keyOf).
func holderKey(t collector.Term) string { return keyOf(t.Database, t.Holder) }

// termEnd is where a term's strip ends: now while its holder leads, else its
// holder's last sign of life (collector.Term.LastSign): a crash, a freeze or a
// database outage is a gap in the strip, not time held. A closed term whose
// last sign is not known ends at its release; a silent one never seen leading
// ends where it began.
func termEnd(t collector.Term, now time.Time) time.Time {
	switch {
	case t.Open() && !t.Silent:
		return now
	case !t.LastSign.IsZero() && (t.Open() || t.LastSign.Before(t.ReleasedAt)):
		return t.LastSign
	case t.Open():
		return t.AcquiredAt
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
