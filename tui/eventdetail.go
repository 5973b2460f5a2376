package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// eventDetailLines is the event detail view (Enter on the event log): the
// selected line whole, wrapped — the log cuts it at the pane's width — and
// every field of the event; for a flood shown as one line (grouped), every
// member event, wrapped, one after another. Nothing here is cut: a long
// value wraps, and the view scrolls.
func (m *Model) eventDetailLines(w, h int) []string {
	st := m.bodyStyles()
	e := &m.mode.event
	kind, _, _, _ := eventParts(e.ev)
	var lines []string
	if len(e.members) > 0 {
		name := "EVENTS · " + plural(len(e.members), "event") + " in one line"
		if m.stale() {
			name += " · STALE"
		}
		// The line names every scope; the members below do too, one each.
		lines = append(lines, wrapLine(st.render(e.tone, strings.TrimPrefix(e.summary, "  ")), w)...)
		lines = append(lines, "", m.paneTitle(st, -1, "MEMBERS "+strconv.Itoa(len(e.members)), "", w))
		for _, ev := range e.members {
			line, t := eventLine(ev)
			lines = append(lines, wrapLine(st.render(t, strings.TrimPrefix(line, "  ")), w)...)
		}
		return m.detailScrolled(st, name, lines, w, h)
	}
	name := m.detailName("EVENT", kind)
	lines = append(lines, wrapLine(st.render(e.tone, strings.TrimPrefix(e.line, "  ")), w)...)
	lines = append(lines, "")
	const keyW = 11
	kv := func(k, v string) {
		if v == "" {
			return
		}
		for i, l := range wrapText(termsafe.String(v), w-2-keyW-1, "") {
			label := ""
			if i == 0 {
				label = k
			}
			lines = append(lines, "  "+st.render(toneMuted, padRight(label, keyW))+" "+l)
		}
	}
	ev := e.ev
	kv("at", ev.At.Format("2006-01-02 15:04:05.000000 MST"))
	kv("kind", string(ev.Kind))
	kv("database", ev.Database) // a fleet's; empty (no line) for one database
	kv("scope", ev.Scope)
	kv("node", ev.Node)
	if ev.Epoch != 0 {
		epoch := strconv.FormatInt(ev.Epoch, 10)
		if l := show.Epoch(ev.Epoch); l != epoch {
			epoch += " (" + l + ")"
		}
		kv("epoch", epoch)
	}
	kv("previous", ev.PrevHolder)
	kv("reason", ev.Reason)
	kv("detail", ev.Detail)
	if a := ev.Alert; a != nil {
		kv("alert", string(a.Kind)+" · "+string(a.Severity))
		kv("summary", a.Summary)
		kv("hint", a.Hint)
		kv("runbook", a.Runbook)
		if !a.Since.IsZero() {
			kv("since", fmtStamp(a.Since))
		}
	}
	if ev.AuditID != 0 {
		kv("audit id", strconv.FormatInt(ev.AuditID, 10))
	}
	if ev.LSN != 0 {
		kv("lsn", strconv.FormatUint(ev.LSN, 16))
	}
	return m.detailScrolled(st, name, lines, w, h)
}

// wrapText wraps s to lines of at most w columns, each after indent (which
// counts in w); a word longer than a line is broken, never cut.
func wrapText(s string, w int, indent string) []string {
	lim := max(1, w-textWidth(indent))
	out := strings.Split(ansi.Wrap(s, lim, ""), "\n")
	for i := range out {
		out[i] = indent + out[i]
	}
	return out
}

// wrapLine wraps a log line (without its two leading blanks) in w columns,
// its continuation lines indented under it, so that each line of the log
// reads as one block.
func wrapLine(s string, w int) []string {
	out := wrapText(s, w, "    ")
	out[0] = "  " + strings.TrimPrefix(out[0], "    ")
	return out
}
