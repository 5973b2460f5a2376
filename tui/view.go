package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// The smallest terminal the dashboard draws in, and the size from which it
// shows every pane at once (below it, the compact layout).
const (
	minWidth, minHeight   = 60, 16
	fullWidth, fullHeight = 100, 32
)

// View renders the screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeNone
	return v
}

// render builds the frame: exactly m.height lines of at most m.width columns.
func (m *Model) render() string {
	w, h := m.width, m.height
	if m.tooSmall() {
		return truncate(fmt.Sprintf("terminal too small: need ≥%d×%d, have %d×%d", minWidth, minHeight, w, h), max(w, 1)) +
			"\n" + truncate("enlarge the window, or "+m.keys.Quit.Help().Key+" to quit", max(w, 1))
	}
	m.ensureRows()
	lines := make([]string, 0, h)
	lines = append(lines, m.headerLines(w)...)
	footer := m.footerLines(w)
	var body []string
	if m.snap == nil {
		bodyH := h - len(lines) - len(footer)
		body = m.connectingLines(w, bodyH)
	} else {
		lines = append(lines, m.alertLines(w)...)
		bodyH := h - len(lines) - len(footer)
		switch {
		case m.mode.overlay == overlayHelp, m.mode.overlay == overlaySearch:
			body = m.helpLines(w, bodyH)
		case m.mode.view == viewScope:
			body = m.detailLines(w, bodyH)
		case m.mode.view == viewNode:
			body = m.nodeDetailLines(w, bodyH)
		case m.mode.view == viewEvent:
			body = m.eventDetailLines(w, bodyH)
		default:
			body = m.mainLines(w, bodyH)
		}
		body = clampLines(body, bodyH, w)
	}
	lines = append(lines, body...)
	lines = append(lines, footer...)
	if len(lines) > h {
		lines = lines[:h]
	}
	switch m.mode.overlay {
	case overlayConfirm:
		lines = m.overlay(lines, m.confirmBox(w), w)
	case overlayPicker:
		lines = m.overlay(lines, m.pickerBox(w), w)
	}
	return strings.Join(lines, "\n")
}

// clampLines cuts or pads lines to exactly n lines.
func clampLines(lines []string, n, w int) []string {
	if len(lines) > n {
		return lines[:max(n, 0)]
	}
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines
}

// bodyStyles is the look of the data: dimmed while it may be stale.
func (m *Model) bodyStyles() *styles {
	if m.stale() {
		return m.dimmed
	}
	return m.look
}

func (m *Model) database() string {
	if m.fleet.only != "" && m.isFleet() {
		return m.fleetDatabaseLabel()
	}
	if m.snap != nil && m.snap.Health.Database != "" {
		return termsafe.String(m.snap.Health.Database)
	}
	if m.opts.Database != "" {
		return termsafe.String(m.opts.Database)
	}
	return "the database"
}

// footerLines: the status line (filter input, errors, last message) and the
// key help.
func (m *Model) footerLines(w int) []string {
	st := m.look
	var status, errLine string
	switch {
	case m.mode.overlay == overlayFilter:
		status = st.key.Render(m.keys.Filter.Help().Key) + " filter: " + termsafe.String(m.filter) + "▏" +
			st.render(toneMuted, "  "+m.keys.Enter.Help().Key+" keeps · "+m.keys.Back.Help().Key+" clears")
	case m.snap != nil && m.stale():
		h := m.snap.Health
		head := "✖ READ FAILING"
		if h.Source == collector.SourceDisconnected {
			head = "✖ DISCONNECTED"
		}
		if !h.LastErrorAt.IsZero() {
			head += " since " + fmtClock(h.LastErrorAt)
		}
		head += " — showing the last good data"
		if !h.LastPoll.IsZero() {
			head += ", read at " + fmtClock(h.LastPoll)
		}
		status = st.errorText.Render(head)
		if m.status != "" {
			status += st.render(toneMuted, " · ") + st.render(m.statusT, m.status)
		}
		if h.LastError != "" {
			errLine = st.errorText.Render(fitLine("  "+keepTail(termsafe.String(h.LastError), w-2), w))
		}
	case m.status != "":
		status = st.render(m.statusT, m.status)
	case m.snap != nil:
		status = st.render(toneMuted, m.healthText())
	}
	var flags []string
	if m.filter != "" && m.mode.overlay != overlayFilter {
		flags = append(flags, "filter “"+termsafe.String(m.filter)+"” ("+m.keys.Back.Help().Key+" clears)")
	}
	if m.problems {
		flags = append(flags, "problems only ("+m.keys.Problems.Help().Key+")")
	}
	if m.fleet.only != "" {
		flags = append(flags, "database "+termsafe.String(m.fleet.only)+" only ("+m.keys.Database.Help().Key+" picks)")
	}
	if len(flags) > 0 {
		right := st.render(toneWarn, strings.Join(flags, " · "))
		rw := textWidth(ansi.Strip(right))
		status = fitLine(status, max(0, w-rw-1)) + " " + right
	}
	hm := st.help
	hm.SetWidth(w)
	out := []string{fitLine(status, w)}
	if errLine != "" {
		out = append(out, errLine)
	}
	return append(out, fitLine(hm.ShortHelpView(fitHelp(hm, m.footerKeys(), w)), w))
}

// fitHelp keeps the bindings whose entries fit in w columns together, in
// order, skipping any that would not: an entry is shown whole or not at all.
func fitHelp(hm help.Model, bs []key.Binding, w int) []key.Binding {
	hm.SetWidth(0)
	sep := textWidth(hm.ShortSeparator)
	var out []key.Binding
	used := 0
	for _, b := range bs {
		if !b.Enabled() {
			continue
		}
		n := textWidth(ansi.Strip(hm.ShortHelpView([]key.Binding{b})))
		if used > 0 {
			n += sep
		}
		if used+n > w {
			continue
		}
		out = append(out, b)
		used += n
	}
	return out
}

func (m *Model) connectingLines(w, h int) []string {
	out := make([]string, max(h, 0))
	msg := "connecting to " + m.database() + "…"
	if m.feedClosed {
		msg = "the collector stopped before its first read of " + m.database()
	}
	if h > 0 {
		mid := h / 2
		pad := max(0, (w-textWidth(msg))/2)
		out[mid] = fitLine(strings.Repeat(" ", pad)+msg, w)
	}
	return out
}

// compact reports whether the body uses the compact layout.
func (m *Model) compact() bool {
	return m.width < fullWidth || m.height < fullHeight
}

// slot is a pane's claim on the body's height: at least min, want when
// there is room, and more beyond it that it could use but needs less than
// the other panes need their want.
type slot struct{ min, want, more, weight int }

// allocate splits total lines between slots: each gets its minimum, then lines
// go one by one to the slot furthest below its weight share until each has
// what it wants; then each slot in order gets its more; the last slot takes
// what is left.
func allocate(total int, slots []slot) []int {
	out := make([]int, len(slots))
	rem := total
	for i, s := range slots {
		out[i] = max(0, min(s.min, rem))
		rem -= out[i]
	}
	for rem > 0 {
		best, score := -1, 0.0
		for i, s := range slots {
			if out[i] >= s.want {
				continue
			}
			sc := float64(out[i]) / float64(max(s.weight, 1))
			if best < 0 || sc < score {
				best, score = i, sc
			}
		}
		if best < 0 {
			break
		}
		out[best]++
		rem--
	}
	for i, s := range slots {
		if out[i] >= s.want {
			n := min(rem, s.more)
			out[i] += n
			rem -= n
		}
	}
	if rem > 0 && len(out) > 0 {
		out[len(out)-1] += rem
	}
	return out
}

// mainLines lays out the panes.
func (m *Model) mainLines(w, h int) []string {
	st := m.bodyStyles()
	compact := m.compact()
	panes := []pane{paneScopes, paneNodes, paneTerms, paneEvents}
	if compact {
		second := paneNodes
		if m.focus == paneTerms {
			second = paneTerms
		}
		panes = []pane{paneScopes, second, paneEvents}
	}
	slots := make([]slot, len(panes))
	for i, p := range panes {
		switch p {
		case paneScopes:
			n := max(1, len(m.scopes.rows))
			slots[i] = slot{min: 2 + min(n, 3), want: 2 + n, weight: 3}
		case paneNodes:
			n := max(1, len(m.nodes.rows))
			slots[i] = slot{min: 2 + min(n, 2), want: 2 + n, weight: 2}
		case paneTerms:
			want, more := m.termsWant(w)
			slots[i] = slot{min: 5, want: want, more: more, weight: 2}
		case paneEvents:
			n := max(3, len(m.events.shown))
			slots[i] = slot{min: 3, want: 1 + n, weight: 2}
		}
	}
	hs := allocate(h, slots)
	out := make([]string, 0, h)
	for i, p := range panes {
		out = append(out, m.paneLines(st, p, w, hs[i])...)
	}
	return out
}

// paneLines renders one pane, title included, in exactly h lines.
func (m *Model) paneLines(st *styles, p pane, w, h int) []string {
	if h <= 0 {
		return nil
	}
	var body []string
	var title, hint string
	switch p {
	case paneScopes:
		body = m.scopes.render(st, w, h-2, m.focus == p)
		title = "SCOPES " + m.countText(len(m.scopes.rows), len(m.snap.Scopes))
		hint = m.scopes.scrollHint(h - 2)
	case paneNodes:
		body = m.nodes.render(st, w, h-2, m.focus == p)
		title = "NODES " + m.countText(len(m.nodes.rows), len(m.snap.Nodes))
		hint = m.nodes.scrollHint(h - 2)
	case paneTerms:
		var legend string
		body, legend = m.termsPane(st, w, h-1)
		title = "TERMS · last " + fmtAxis(timelineWindow) + "  " + legend
		hint = m.terms.followHint(m.keys.Top.Help().Key)
	case paneEvents:
		body = m.events.render(st, w, h-1, m.focus == p)
		title = "EVENTS"
		hint = m.events.hint(m.keys)
	}
	if m.stale() {
		title += " · STALE"
	}
	out := make([]string, 0, h)
	out = append(out, m.paneTitle(st, p, title, hint, w))
	out = append(out, body...)
	return clampLines(out, h, w)
}

func (m *Model) countText(shown, total int) string {
	if shown == total {
		return itoa(total)
	}
	return itoa(shown) + "/" + itoa(total)
}

// paneTitle is "▸ SCOPES 12 ─── 1–10 of 12", the marker on the focused pane.
func (m *Model) paneTitle(st *styles, p pane, title, hint string, w int) string {
	marker := "  "
	ts := st.paneTitle
	if m.focus == p {
		marker = "▸ "
		ts = st.paneFocus
	}
	left := ts.Render(marker + title)
	if hint != "" {
		hint = " " + hint + " "
	}
	lw := textWidth(ansi.Strip(left))
	if lw+1+len(hint) > w {
		return fitLine(left, w)
	}
	rule := strings.Repeat("─", max(0, w-lw-1-textWidth(hint)-2))
	return fitLine(left+" "+st.render(toneMuted, rule+hint+"──"), w)
}

// overlay draws box centred over lines.
func (m *Model) overlay(lines []string, box string, w int) []string {
	bl := strings.Split(box, "\n")
	bw := 0
	for _, l := range bl {
		bw = max(bw, textWidth(l))
	}
	x := max(0, (w-bw)/2)
	y := max(0, (len(lines)-len(bl))/2)
	for i, l := range bl {
		if y+i >= len(lines) {
			break
		}
		base := fitLine(lines[y+i], w)
		left := ansi.Truncate(base, x, "")
		right := ansi.TruncateLeft(base, x+bw, "")
		lines[y+i] = left + "\x1b[m" + fitLine(l, bw) + "\x1b[m" + right
	}
	return lines
}

// healthText is the quiet status line: how the collector is doing.
func (m *Model) healthText() string {
	if r := m.snap.Replay; r != nil {
		return "rebuilt from terms, audit and nodes · n/a: not recorded · history read " +
			fmtClock(r.From) + "–" + fmtClock(r.To)
	}
	h := m.snap.Health
	parts := []string{fmt.Sprintf("seq %d", m.snap.Seq)}
	if h.PollDuration > 0 {
		parts = append(parts, "read in "+fmtInterval(h.PollDuration.Round(time.Millisecond)))
	}
	if l := m.snap.Locks; l.Capacity > 0 {
		parts = append(parts, fmt.Sprintf("advisory locks %d/%d", l.Advisory, l.Capacity))
	}
	if h.PollErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d read errors", h.PollErrors))
	}
	if h.DroppedEvents > 0 {
		parts = append(parts, fmt.Sprintf("%d events dropped", h.DroppedEvents))
	}
	if h.ServerVersion != "" {
		parts = append(parts, "PostgreSQL "+h.ServerVersion)
	}
	return strings.Join(parts, " · ")
}
