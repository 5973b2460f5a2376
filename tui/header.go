package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// headerLines: title, database, source, freshness, interval; then one verdict
// per scope; then the PAUSED banner when paused.
func (m *Model) headerLines(w int) []string {
	if m.snap != nil && m.snap.Replay != nil {
		return m.replayHeader(w)
	}
	st := m.look
	sep := st.render(toneMuted, " · ")
	parts := []string{st.title.Render(m.opts.Title)}
	var dsn []string // the DSN line names the database instead
	if m.opts.DSN != "" {
		dsn = []string{m.dsnLine(st, w)}
	} else {
		parts = append(parts, m.database())
	}
	if m.snap == nil {
		parts = append(parts, st.render(toneWarn, "connecting…"))
		return append(append([]string{fitLine(strings.Join(parts, sep), w)}, dsn...), "")
	}
	src, t := sourceLabel(m.snap.Health)
	parts = append(parts, st.render(t, src))
	parts = append(parts, m.freshness(st))
	if m.interval > 0 {
		parts = append(parts, "every "+fmtInterval(m.interval))
	}
	lines := append(append([]string{fitLine(strings.Join(parts, sep), w)}, dsn...), m.verdictLine(w))
	if m.paused {
		msg := fmt.Sprintf(" ⏸ PAUSED · %s resumes · showing seq %d from %s · %s buffered",
			m.keys.Pause.Help().Key, m.snap.Seq, fmtClock(m.snap.At), plural(len(m.pausedEvents), "event"))
		lines = append(lines, st.paused.Render(fitLine(msg, w)))
	}
	return lines
}

// dsnLine is "dsn postgres://… · c copies": the whole DSN, to paste; the
// hint goes first when they do not fit together.
func (m *Model) dsnLine(st *styles, w int) string {
	line := st.render(toneMuted, "dsn ") + termsafe.String(m.opts.DSN)
	hint := st.render(toneMuted, " · "+m.keys.Copy.Help().Key+" copies")
	if m.keys.Copy.Enabled() && textWidth(ansi.Strip(line+hint)) <= w {
		line += hint
	}
	return fitLine(line, w)
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

// verdictListMax is the most scopes the header names one by one; beyond it
// a row of names no longer reads at a glance, and the header counts instead.
const verdictListMax = 16

// verdictLine is the header's verdict line. With up to verdictListMax scopes
// that fit the width it lists every scope's verdict, worst first ("‼ SPLIT
// BRAIN billing   ✔ OK reports"). Otherwise it counts the scopes per verdict
// and names only the scopes in trouble (neither OK nor IDLE), worst first, as
// many as fit: "998 ✔ OK · 2 · IDLE · 2 ✖ NO LEADER │ ✖ scope-0011  ✖
// scope-0500". Either way it ends with the retired scopes' count, if any
// ("3 retired"): they are not in the snapshot's scopes.
func (m *Model) verdictLine(w int) string {
	if len(m.snap.Databases) > 1 {
		return m.fleetVerdictLine(w)
	}
	st := m.bodyStyles()
	scs := m.snap.Scopes
	if len(scs) == 0 {
		if m.snap.Retired > 0 {
			return st.render(toneMuted, fitLine("no scopes in view: "+m.retiredText(), w))
		}
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
		if d := scs[a].Verdict.Rank() - scs[b].Verdict.Rank(); d != 0 {
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
		label, t := show.Verdict(sc.Verdict), verdictTone(sc.Verdict)
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
	if r := m.retiredText(); r != "" {
		if used+len(gap)+textWidth(r) > w {
			return "", false
		}
		b.WriteString(gap + st.render(toneMuted, r))
	}
	return fitLine(b.String(), w), true
}

// retiredText is "3 retired" ("" when no scope is retired).
func (m *Model) retiredText() string {
	if m.snap.Retired == 0 {
		return ""
	}
	return itoa(m.snap.Retired) + " retired"
}

// verdictCounts is "998 ✔ OK · 2 · IDLE · 2 ✖ NO LEADER", then the scopes in
// trouble by name, worst first, as many as fit before "+N more".
func (m *Model) verdictCounts(st *styles, order []int, w int) string {
	scs := m.snap.Scopes
	type count struct {
		v collector.Verdict
		n int
	}
	var counts []count // worst first, as order is: the troubled ones, then OK, then IDLE
	trouble := 0
	for _, i := range order {
		v := scs[i].Verdict
		if len(counts) == 0 || counts[len(counts)-1].v != v {
			counts = append(counts, count{v: v})
		}
		counts[len(counts)-1].n++
		if v.Troubled() {
			trouble++
		}
	}
	// OK and IDLE first (the part that needs nothing), then what is wrong.
	split := len(counts)
	for split > 0 && !counts[split-1].v.Troubled() {
		split--
	}
	counts = append(slices.Clone(counts[split:]), counts[:split]...)
	var b strings.Builder
	used := 0
	part := func(t tone, text string) {
		if used > 0 {
			b.WriteString(st.render(toneMuted, " · "))
			used += 3
		}
		b.WriteString(st.render(t, text))
		used += textWidth(text)
	}
	for _, c := range counts {
		label, t := show.Verdict(c.v), verdictTone(c.v)
		part(t, itoa(c.n)+" "+label)
	}
	if r := m.retiredText(); r != "" {
		part(toneMuted, r)
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
		glyph, t := show.Glyph(sc.Verdict), verdictTone(sc.Verdict)
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
		first := st.render(t, alertHead(label, a)) + ": " + termsafe.String(a.Summary)
		if i == limit-1 && len(alerts) > limit {
			more := fmt.Sprintf("  +%d more", len(alerts)-limit)
			first = fitLine(first, max(0, w-textWidth(more))) + st.render(toneWarn, more)
		}
		out = append(out, fitLine(first, w))
		out = append(out, st.render(toneMuted, hintLine("  → ", a, w)))
	}
	return out
}

// alertHead is an alert's head: its severity label, kind and subject —
// the scope, named with its database over a fleet ("billing/reports"), or
// the database alone, and the node ("‼ CRITICAL no_leader billing/reports",
// "▲ WARNING stale_node orders node node-1"). Scope names and node ids
// repeat across databases: without the database a fleet's alert names
// nothing.
func alertHead(label string, a collector.Alert) string {
	subject := termsafe.String(a.Scope)
	if a.Database != "" {
		subject = termsafe.String(keyLabel(keyOf(a.Database, a.Scope)))
		if a.Scope == "" {
			subject = termsafe.String(a.Database)
		}
	}
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
	return head
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
