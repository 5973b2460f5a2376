package tui

import (
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// column describes one table column.
type column struct {
	title string
	min   int  // narrowest it may be squeezed to
	max   int  // widest it may grow to (0 = content width)
	right bool // right-aligned (numbers, durations)
	// drop orders columns to hide when the terminal is narrow: the highest goes
	// first; 0 never goes.
	drop int
	// fleet: shown only over several databases (table.fleet).
	fleet bool
	// reserve is the least natural width: the widest its values get (a
	// duration's six characters), so that the column does not widen as a
	// value grows.
	reserve int
}

// cell is the text of one cell and what it means.
type cell struct {
	text string
	tone tone
}

// row is one table row; key identifies it across refreshes.
type row struct {
	key   string
	cells []cell
}

// table is a scrollable table with a cursor that sticks to a row's key. It
// renders only the rows in its window, so its cost does not grow with the
// number of rows.
type table struct {
	cols    []column
	rows    []row
	natural []int // content width per column, over all rows

	cursor int    // index into rows
	key    string // key of the row under the cursor
	offset int    // first visible row
	height int    // rows shown by the last render: a page for PgUp/PgDn

	sortCol  int // column index carrying the sort marker (-1 none)
	sortDesc bool
	empty    string // shown when there are no rows

	// newestFirst tables (the terms) follow their first row, the newest,
	// like the event log follows its tail: while following, new rows push
	// the cursor along instead of pushing the old row under it off screen.
	newestFirst bool
	following   bool // the cursor is on the newest row and stays there
	// unsorted tables keep their rows' order (time): no column title needs
	// room for a sort marker.
	unsorted bool

	fleet bool // the rows are of several databases: fleet columns show
}

func newTable(cols []column, empty string) *table {
	return &table{cols: cols, sortCol: -1, empty: empty}
}

// newFollowingTable is a table whose first row is the newest; it starts
// following it.
func newFollowingTable(cols []column, empty string) *table {
	t := newTable(cols, empty)
	t.newestFirst, t.following, t.unsorted = true, true, true
	return t
}

// setRows replaces the rows and puts the cursor back on the row with the same
// key; when that row is gone the cursor stays at the same position. A
// following table puts it on the first row, the newest, instead. Cell texts
// are made safe to print here, once per snapshot, for every table: they hold
// names and hosts someone else wrote (termsafe.String). Keys stay as they are:
// they name the scope an action is for.
func (t *table) setRows(rows []row) {
	for _, r := range rows {
		for j := range r.cells {
			r.cells[j].text = termsafe.String(r.cells[j].text)
		}
	}
	// While the rows are the same ones, in the same order, a column keeps
	// the width it had (it only grows): a value that changes width every
	// second ("none for 9.9s", "10s") does not move the columns to its
	// right back and forth. Other rows start afresh.
	same := len(t.natural) == len(t.cols) && len(rows) == len(t.rows)
	for i := 0; same && i < len(rows); i++ {
		same = rows[i].key == t.rows[i].key
	}
	t.rows = rows
	if !same {
		t.natural = make([]int, len(t.cols))
		marker := 1 // room for the sort marker
		if t.unsorted {
			marker = 0
		}
		for j, c := range t.cols {
			t.natural[j] = max(textWidth(c.title)+marker, c.reserve)
		}
	}
	for _, r := range rows {
		for j := range t.cols {
			if j < len(r.cells) {
				t.natural[j] = max(t.natural[j], textWidth(r.cells[j].text))
			}
		}
	}
	if t.following && len(rows) > 0 {
		t.setCursor(0)
		return
	}
	if t.key != "" {
		for i, r := range rows {
			if r.key == t.key {
				t.cursor = i
				return
			}
		}
	}
	t.setCursor(t.cursor)
}

func (t *table) setCursor(i int) {
	t.cursor = max(0, min(i, len(t.rows)-1))
	if len(t.rows) > 0 {
		t.key = t.rows[t.cursor].key
	}
}

// navigated is called after the operator moved the cursor: a newest-first
// table follows while the cursor is on the newest row, so moving off it stops
// following and going back to it (Home) resumes.
func (t *table) navigated() {
	if t.newestFirst {
		t.following = t.cursor == 0
	}
}

// followHint is the title hint of a following table: which rows show, and
// whether it follows the newest (top names the key that resumes).
func (t *table) followHint(top string) string {
	if len(t.rows) == 0 {
		return ""
	}
	s := t.scrollHint(t.height)
	if s == "" {
		s = itoa(len(t.rows))
	}
	if t.following {
		return s + " · following"
	}
	return s + " · scrolled (" + top + " follows)"
}

// move moves the cursor by n rows.
func (t *table) move(n int) { t.setCursor(t.cursor + n) }

// scrollPages moves the window and the cursor by n pages, a page being the
// rows the last render showed (fallback before the first): the next rows
// come into view whole, the cursor keeps its place in the window.
func (t *table) scrollPages(n, fallback int) {
	page := t.height
	if page <= 0 {
		page = max(1, fallback)
	}
	t.offset = max(0, min(t.offset+n*page, len(t.rows)-page))
	t.move(n * page)
}

// selected returns the key under the cursor ("" when empty).
func (t *table) selected() string {
	if len(t.rows) == 0 {
		return ""
	}
	return t.rows[t.cursor].key
}

// widths fits the columns into width: it hides droppable columns, then
// squeezes the widest ones towards their minimum. width <= 0 means unlimited.
// A hidden column has width -1.
func (t *table) widths(width, gutter int) (ws []int, sep int) {
	ws = make([]int, len(t.cols))
	for j, c := range t.cols {
		ws[j] = t.natural[j]
		if c.max > 0 {
			ws[j] = min(ws[j], c.max)
		}
		if c.fleet && !t.fleet {
			ws[j] = -1
		}
	}
	if width <= 0 {
		return ws, 2
	}
	total := func(sep int) int {
		n, sum := 0, gutter
		for _, w := range ws {
			if w >= 0 {
				sum += w
				n++
			}
		}
		return sum + max(0, n-1)*sep
	}
	if total(2) <= width {
		return ws, 2
	}
	sep = 1
	for total(sep) > width {
		worst, at := 0, -1
		for j, c := range t.cols {
			if ws[j] >= 0 && c.drop > worst {
				worst, at = c.drop, j
			}
		}
		if at < 0 {
			break
		}
		// Hiding costs information; squeeze first when squeezing is enough.
		if t.squeezable(ws) >= total(sep)-width {
			break
		}
		ws[at] = -1
	}
	for over := total(sep) - width; over > 0; over-- {
		widest, at := 0, -1
		for j, c := range t.cols {
			if ws[j] > max(c.min, 1) && ws[j]-c.min > widest {
				widest, at = ws[j]-c.min, j
			}
		}
		if at < 0 {
			break
		}
		ws[at]--
	}
	return ws, sep
}

func (t *table) squeezable(ws []int) int {
	n := 0
	for j, c := range t.cols {
		if ws[j] > c.min {
			n += ws[j] - max(c.min, 1)
		}
	}
	return n
}

// render returns the header line and up to height row lines, each exactly
// width columns wide (or natural width when width <= 0). focused marks the
// cursor row loudly; otherwise only the gutter marker shows it.
func (t *table) render(st *styles, width, height int, focused bool) []string {
	const gutter = 2
	ws, sep := t.widths(width, gutter)
	sepStr := strings.Repeat(" ", sep)
	lines := make([]string, 0, 1+min(height, len(t.rows)))

	var b strings.Builder
	b.WriteString(strings.Repeat(" ", gutter))
	first := true
	for j, c := range t.cols {
		if ws[j] < 0 {
			continue
		}
		if !first {
			b.WriteString(sepStr)
		}
		first = false
		title := c.title
		if j == t.sortCol {
			if t.sortDesc {
				title += "↓"
			} else {
				title += "↑"
			}
		}
		if c.right {
			b.WriteString(padLeft(title, ws[j]))
		} else {
			b.WriteString(padRight(title, ws[j]))
		}
	}
	header := b.String()
	if width > 0 {
		header = fitLine(header, width)
	}
	lines = append(lines, st.colHeader.Render(header))

	if len(t.rows) == 0 {
		if height > 0 {
			lines = append(lines, st.render(toneMuted, fitOrNot("  "+termsafe.String(t.empty), width)))
		}
		return lines
	}
	if height <= 0 {
		return lines
	}
	t.height = height
	// Keep the cursor inside the window.
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+height {
		t.offset = t.cursor - height + 1
	}
	t.offset = max(0, min(t.offset, len(t.rows)-height))

	end := min(len(t.rows), t.offset+height)
	segs := make([]segment, 0, 2*len(t.cols)+1)
	for i := t.offset; i < end; i++ {
		r := t.rows[i]
		segs = segs[:0]
		if i == t.cursor {
			segs = append(segs, segment{"▸ ", toneNone})
		} else {
			segs = append(segs, segment{"  ", toneNone})
		}
		first := true
		for j, c := range t.cols {
			if ws[j] < 0 {
				continue
			}
			if !first {
				segs = append(segs, segment{sepStr, toneNone})
			}
			first = false
			var cl cell
			if j < len(r.cells) {
				cl = r.cells[j]
			}
			if c.right {
				segs = append(segs, segment{padLeft(cl.text, ws[j]), cl.tone})
			} else {
				segs = append(segs, segment{padRight(cl.text, ws[j]), cl.tone})
			}
		}
		var style *[toneCount]lipgloss.Style // nil: each cell in its tone
		if i == t.cursor {
			// The cursor bar spans the row, each cell keeping its tone.
			style = &st.idleTones
			if focused {
				style = &st.cursorTones
			}
		}
		lines = append(lines, renderSegments(st, segs, width, style))
	}
	return lines
}

// segment is a run of a line's text in one tone.
type segment struct {
	text string
	tone tone
}

// renderSegments renders segs as one line of exactly width columns (its
// natural width when width <= 0): cut with an ellipsis or padded in the
// last segment's style. style, when set, replaces each tone's look (the
// cursor bar's).
func renderSegments(st *styles, segs []segment, width int, style *[toneCount]lipgloss.Style) string {
	if width > 0 {
		total := 0
		for k := range segs {
			n := textWidth(segs[k].text)
			if total+n > width {
				segs[k].text = truncate(segs[k].text, width-total)
				segs = segs[:k+1]
				total = width
				break
			}
			total += n
		}
		if total < width && len(segs) > 0 {
			segs[len(segs)-1].text += strings.Repeat(" ", width-total)
		}
	}
	var b strings.Builder
	for _, sg := range segs {
		switch {
		case style != nil:
			b.WriteString(style[sg.tone].Render(sg.text))
		default:
			b.WriteString(st.render(sg.tone, sg.text))
		}
	}
	return b.String()
}

// scrollHint says which rows are visible when not all are, e.g. "12–25 of 100".
func (t *table) scrollHint(height int) string {
	if len(t.rows) <= height || height <= 0 {
		return ""
	}
	end := min(len(t.rows), t.offset+height)
	return itoa(t.offset+1) + "–" + itoa(end) + " of " + itoa(len(t.rows))
}

func fitOrNot(s string, width int) string {
	if width <= 0 {
		return s
	}
	return fitLine(s, width)
}
