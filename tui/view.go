package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
			"\n" + truncate("enlarge the window, or q to quit", max(w, 1))
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
		case m.helpOpen:
			body = m.helpLines(w, bodyH)
		case m.detail != "":
			body = m.detailLines(w, bodyH)
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
	if m.confirm != nil {
		lines = m.overlay(lines, m.confirmBox(w), w)
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
	if m.snap != nil && m.snap.Health.Database != "" {
		return termsafe.String(m.snap.Health.Database)
	}
	if m.opts.Database != "" {
		return termsafe.String(m.opts.Database)
	}
	return "the database"
}

// headerLines: title, database, source, freshness, interval; then one verdict
// per scope; then the PAUSED banner when paused.
func (m *Model) headerLines(w int) []string {
	st := m.look
	sep := st.render(toneMuted, " · ")
	parts := []string{st.title.Render(m.opts.Title), m.database()}
	if m.snap == nil {
		parts = append(parts, st.render(toneWarn, "connecting…"))
		return []string{fitLine(strings.Join(parts, sep), w), ""}
	}
	src, t := sourceLabel(m.snap.Health.Source)
	parts = append(parts, st.render(t, src))
	parts = append(parts, m.freshness(st))
	if m.interval > 0 {
		parts = append(parts, "every "+fmtInterval(m.interval))
	}
	lines := []string{fitLine(strings.Join(parts, sep), w), m.verdictLine(w)}
	if m.paused {
		msg := fmt.Sprintf(" ⏸ PAUSED · space resumes · showing seq %d from %s · %s buffered",
			m.snap.Seq, fmtClock(m.snap.At), plural(len(m.pausedEvents), "event"))
		lines = append(lines, st.paused.Render(fitLine(msg, w)))
	}
	return lines
}

// freshness is "updated 2s ago", loud when the data is older than it should be.
func (m *Model) freshness(st *styles) string {
	if m.snap.At.IsZero() {
		return st.render(toneWarn, "never updated")
	}
	age := m.opts.Now().Sub(m.snap.At)
	text := "updated " + fmtAgo(age)
	limit := max(3*m.interval, 5*time.Second)
	if age > limit && !m.paused {
		return st.render(toneBad, text)
	}
	return text
}

func fmtAgo(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	if d < time.Minute {
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	}
	return fmtDur(d) + " ago"
}

// verdictListMax is the most scopes the header names one by one; beyond it
// a row of names no longer reads at a glance, and the header counts instead.
const verdictListMax = 16

// verdictLine is the header's verdict line. With up to verdictListMax scopes
// that fit the width it lists every scope's verdict, worst first ("‼ SPLIT
// BRAIN billing   ✔ OK reports"). Otherwise it counts the scopes per verdict
// and names only the scopes in trouble (not OK), worst first, as many as fit:
// "998 ✔ OK · 2 ✖ NO LEADER │ ✖ scope-0011  ✖ scope-0500".
func (m *Model) verdictLine(w int) string {
	st := m.bodyStyles()
	scs := m.snap.Scopes
	if len(scs) == 0 {
		return st.render(toneMuted, fitLine("no scopes yet (pgleader.leader_state is empty)", w))
	}
	order := m.verdictOrder()
	if len(scs) <= verdictListMax {
		if line, ok := m.verdictList(st, order, w); ok {
			return line
		}
	}
	return m.verdictCounts(st, order, w)
}

// verdictOrder returns the indexes of the snapshot's scopes, worst verdict
// first, then by name. It is sorted once per snapshot.
func (m *Model) verdictOrder() []int {
	if m.verdictsOf == m.snap {
		return m.verdicts
	}
	scs := m.snap.Scopes
	order := make([]int, len(scs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := verdictRank(scs[a].Verdict) - verdictRank(scs[b].Verdict); d != 0 {
			return d
		}
		if d := strings.Compare(string(scs[a].Verdict), string(scs[b].Verdict)); d != 0 {
			return d // unknown verdicts share a rank: keep each together
		}
		return strings.Compare(scs[a].Name, scs[b].Name)
	})
	m.verdicts, m.verdictsOf = order, m.snap
	return order
}

// verdictList is every scope's verdict and name on one line; ok is false
// when they do not fit in w columns.
func (m *Model) verdictList(st *styles, order []int, w int) (string, bool) {
	const gap = "   "
	var b strings.Builder
	used := 0
	for _, i := range order {
		sc := &m.snap.Scopes[i]
		label, t := verdictLabel(sc.Verdict)
		name := termsafe.String(sc.Name)
		n := textWidth(label) + 1 + textWidth(name)
		if used > 0 {
			n += len(gap)
			b.WriteString(gap)
		}
		if used+n > w {
			return "", false
		}
		b.WriteString(st.render(t, label) + " " + name)
		used += n
	}
	return fitLine(b.String(), w), true
}

// verdictCounts is "998 ✔ OK · 2 ✖ NO LEADER", then the scopes not OK by
// name, worst first, as many as fit before "+N more".
func (m *Model) verdictCounts(st *styles, order []int, w int) string {
	scs := m.snap.Scopes
	type count struct {
		v collector.Verdict
		n int
	}
	var counts []count // worst first, as order is
	trouble := 0
	for _, i := range order {
		v := scs[i].Verdict
		if len(counts) == 0 || counts[len(counts)-1].v != v {
			counts = append(counts, count{v: v})
		}
		counts[len(counts)-1].n++
		if v != collector.VerdictOK {
			trouble++
		}
	}
	// OK first: the size of the healthy part, then what is wrong.
	if last := counts[len(counts)-1]; last.v == collector.VerdictOK {
		counts = append([]count{last}, counts[:len(counts)-1]...)
	}
	var b strings.Builder
	used := 0
	for k, c := range counts {
		label, t := verdictLabel(c.v)
		text := itoa(c.n) + " " + label
		if k > 0 {
			b.WriteString(st.render(toneMuted, " · "))
			used += 3
		}
		b.WriteString(st.render(t, text))
		used += textWidth(text)
	}
	if trouble == 0 {
		return fitLine(b.String(), w)
	}

	// The names, each with its verdict's glyph, while they fit with room
	// left for "+N more".
	const sep, gap = " │ ", "  "
	more := func(n int) string { return "+" + itoa(n) + " more" }
	room := w - used - textWidth(sep)
	var names strings.Builder
	shown, nw := 0, 0
	for _, i := range order[:trouble] {
		sc := &scs[i]
		label, t := verdictLabel(sc.Verdict)
		glyph, _, _ := strings.Cut(label, " ")
		name := termsafe.String(sc.Name)
		n := textWidth(glyph) + 1 + textWidth(name)
		if shown > 0 {
			n += len(gap)
		}
		reserve := 0
		if shown+1 < trouble {
			reserve = len(gap) + len(more(trouble-shown-1))
		}
		if nw+n+reserve > room {
			break
		}
		if shown > 0 {
			names.WriteString(gap)
		}
		names.WriteString(st.render(t, glyph) + " " + name)
		nw += n
		shown++
	}
	if shown == 0 {
		return fitLine(b.String(), w) // the counts say it; no room for a name
	}
	b.WriteString(st.render(toneMuted, sep))
	b.WriteString(names.String())
	if rest := trouble - shown; rest > 0 {
		b.WriteString(gap + st.render(toneBad, more(rest)))
	}
	return fitLine(b.String(), w)
}

// alertLines is the alert banner: the worst alerts with their hint and
// runbook, and how many more there are.
func (m *Model) alertLines(w int) []string {
	alerts := m.snap.Alerts
	if len(alerts) == 0 {
		return nil
	}
	st := m.look
	limit := 1
	if !m.compact() {
		limit = 3
	}
	limit = min(limit, len(alerts))
	var out []string
	for i, a := range alerts[:limit] {
		label, t := severityLabel(a.Severity)
		subject := termsafe.String(a.Scope)
		if a.Node != "" {
			if subject != "" {
				subject += " "
			}
			subject += "node " + termsafe.String(a.Node)
		}
		head := label + " " + termsafe.String(string(a.Kind))
		if subject != "" {
			head += " " + subject
		}
		first := st.render(t, head) + ": " + termsafe.String(a.Summary)
		if i == limit-1 && len(alerts) > limit {
			more := fmt.Sprintf("  +%d more", len(alerts)-limit)
			first = fitLine(first, max(0, w-textWidth(more))) + st.render(toneWarn, more)
		}
		out = append(out, fitLine(first, w))
		out = append(out, st.render(toneMuted, hintLine("  → ", a, w)))
	}
	return out
}

// footerLines: the status line (filter input, errors, last message) and the
// key help.
func (m *Model) footerLines(w int) []string {
	st := m.look
	var status, errLine string
	switch {
	case m.filtering:
		status = st.key.Render("/") + " filter: " + termsafe.String(m.filter) + "▏" + st.render(toneMuted, "  enter keeps · esc clears")
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
			errLine = st.errorText.Render(fitLine("  "+termsafe.String(h.LastError), w))
		}
	case m.status != "":
		status = st.render(m.statusT, m.status)
	case m.snap != nil:
		status = st.render(toneMuted, m.healthText())
	}
	var flags []string
	if m.filter != "" && !m.filtering {
		flags = append(flags, "filter “"+termsafe.String(m.filter)+"” (esc clears)")
	}
	if m.problems {
		flags = append(flags, "problems only (p)")
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
	return append(out, fitLine(hm.ShortHelpView(m.keys.ShortHelp()), w))
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

// slot is a pane's claim on the body's height.
type slot struct{ min, want, weight int }

// allocate splits total lines between slots: each gets its minimum, then lines
// go one by one to the slot furthest below its weight share until each has
// what it wants; the last slot takes what is left.
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
			slots[i] = slot{min: 5, want: m.termsWant(w), weight: 2}
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
	case paneEvents:
		body = m.events.render(st, w, h-1)
		title = "EVENTS"
		hint = m.events.hint()
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

// confirmWrap is the width the confirmation's explanation is wrapped at.
const confirmWrap = 58

// confirmBox renders the open y/N question: which action, on whom, and what it
// does.
func (m *Model) confirmBox(w int) string {
	c := *m.confirm
	c.scope, c.leader = termsafe.String(c.scope), termsafe.String(c.leader) // shown, not acted on
	var title string
	var body []string
	switch c.kind {
	case actionResign:
		title = "Resign the leader of " + c.scope + "?"
		body = strings.Split(ansi.Wrap(fmt.Sprintf("Asks %s through the database to hand %s over: it drains in-flight work "+
			"(up to its drain timeout), releases the lock, and a follower takes over under a new epoch, usually "+
			"within one heartbeat interval.", c.leader, c.scope), min(confirmWrap, max(20, w-4)), ""), "\n")
	default:
		pid := "unknown backend pid"
		if c.pid > 0 {
			pid = fmt.Sprintf("backend pid %d", c.pid)
		}
		title = "Evict the leader of " + c.scope + "?"
		body = []string{
			fmt.Sprintf("Terminates %s's leadership session (%s).", c.leader, pid),
			"A follower takes over under a new epoch; the",
			"evicted node's fenced writes are refused.",
		}
	}
	lines := append([]string{m.look.title.Render(title), ""}, body...)
	lines = append(lines, "", m.look.key.Render("y")+" "+c.kind.verb()+"    "+m.look.key.Render("any other key")+" cancel   [y/N]")
	return m.look.modal.MaxWidth(w).Render(strings.Join(lines, "\n"))
}

// healthText is the quiet status line: how the collector is doing.
func (m *Model) healthText() string {
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

// hintLine is "→ hint  (runbook)" in w columns; when it does not fit, the hint
// is cut, never the runbook anchor.
func hintLine(prefix string, a collector.Alert, w int) string {
	rb := ""
	if a.Runbook != "" {
		rb = "  (" + termsafe.String(a.Runbook) + ")"
	}
	hint := termsafe.String(a.Hint)
	room := w - textWidth(prefix) - textWidth(rb)
	if room < 12 {
		return fitLine(prefix+hint+rb, w)
	}
	return fitLine(prefix+truncate(hint, room)+rb, w)
}
