package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// detailName is a detail view's title: its kind and name, marked STALE while
// the snapshot is.
func (m *Model) detailName(kind, id string) string {
	name := kind + " " + termsafe.String(keyLabel(id))
	if m.stale() {
		name += " · STALE"
	}
	return name
}

// detailMissing is a detail view whose subject left the snapshot: its title
// and why.
func (m *Model) detailMissing(st *styles, name, why string, w int) []string {
	title := m.paneTitle(st, m.focus, name, m.keys.Back.Help().Key+" back", w)
	return []string{title, "", st.render(toneWarn, fitLine("  "+why, w))}
}

// detailLines is the scope detail view: everything the snapshot says about one
// scope, its heartbeat-age history and its terms.
func (m *Model) detailLines(w, h int) []string {
	st := m.bodyStyles()
	sc, ok := findScope(m.snap, m.mode.subject)
	name := m.detailName("SCOPE", m.mode.subject)
	if !ok {
		return m.detailMissing(st, name, "scope "+termsafe.String(keyLabel(m.mode.subject))+" is not in the latest snapshot (deleted, or filtered by the collector)", w)
	}
	label, vt := show.Verdict(sc.Verdict), verdictTone(sc.Verdict)
	if m.dbDown(sc.Database) {
		label, vt = "? was "+string(sc.Verdict)+" (last-known: its database cannot be read)", toneMuted
	}
	kv := func(k, v string) string { return fitLine("  "+st.render(toneMuted, padRight(k, 11))+" "+v, w) }

	var lines []string
	if sc.Database != "" {
		lines = append(lines, kv("database", m.databaseText(st, sc.Database)))
	}
	verdict := st.render(vt, label)
	if why := degradedWhy(&sc); why != "" && !m.dbDown(sc.Database) {
		verdict += " · " + st.render(toneWarn, why)
	}
	lines = append(lines, kv("verdict", verdict))
	silent := sc.OpenTerm != nil && sc.OpenTerm.Silent && sc.OpenTerm.Epoch == sc.Epoch
	switch {
	case sc.Leader != "" && !sc.HasLeader():
		// The term is open on record, its holder gone: the scope has no
		// leader, whatever the open row says.
		text := fmt.Sprintf("none · was %s%s, epoch %d from %s", termsafe.String(sc.Leader), hostText(sc.LeaderHost),
			sc.Epoch, fmtClock(sc.AcquiredAt))
		if silent {
			text += " · " + silentText(*sc.OpenTerm)
		}
		if sc.LeaderlessFor > 0 {
			text += " · leaderless for " + human.Cell(sc.LeaderlessFor)
		}
		lines = append(lines, kv("leader", st.render(toneBad, text)))
	case sc.Leader != "":
		text := fmt.Sprintf("%s%s · epoch %d · since %s (tenure %s)",
			termsafe.String(sc.Leader), hostText(sc.LeaderHost), sc.Epoch, fmtClock(sc.AcquiredAt), human.Cell(sc.Tenure))
		if silent {
			// It holds the scope (its lock or lease) but leads no more: frozen
			// or cut off, its gate closed.
			text += " · " + st.render(toneBad, silentText(*sc.OpenTerm)+": it holds the scope but leads no more")
		}
		lines = append(lines, kv("leader", text))
	default:
		text := fmt.Sprintf("none · epoch %d", sc.Epoch)
		if sc.LeaderlessFor > 0 {
			text += " · leaderless for " + human.Cell(sc.LeaderlessFor)
		}
		if !sc.ReleasedAt.IsZero() {
			text += " · released at " + fmtClock(sc.ReleasedAt)
		}
		t := toneBad
		if sc.Verdict == collector.VerdictIdle {
			t = toneMuted
		}
		lines = append(lines, kv("leader", st.render(t, text)))
	}
	if sc.Verdict == collector.VerdictIdle {
		lines = append(lines, kv("idle", st.render(toneMuted, "nobody is meant to lead: its candidates stopped cleanly")),
			kv("", st.render(toneMuted, "pgleader scope retire "+termsafe.String(sc.Name)+" takes it out of the views")))
	}
	if sc.HandoverTo != "" {
		text := "to " + termsafe.String(sc.HandoverTo) + " · reserved until " + fmtClock(sc.HandoverDeadline)
		if left := sc.HandoverDeadline.Sub(m.snap.DBTime); left > 0 {
			text += " (" + human.Cell(left) + " left)"
		}
		lines = append(lines, kv("handover", st.render(toneWarn, text)))
	}
	lines = append(lines, kv("backends", m.backendsText(st, sc)))
	for _, f := range sc.Interference {
		lines = append(lines, st.render(toneCrit, fitLine(kv("foreign", termsafe.String(f.String())), w)))
	}
	hb := "—"
	switch {
	case sc.Leader != "" && sc.LastHeartbeat.IsZero() && m.snap.Replay != nil:
		hb = st.render(toneMuted, "n/a in replay (heartbeats are not recorded)")
	case sc.Leader != "":
		hb = st.render(heartbeatTone(sc.HeartbeatAge, sc.Timing), human.Cell(sc.HeartbeatAge)+" ago") +
			" (at " + fmtStamp(sc.LastHeartbeat) + ")"
	}
	lines = append(lines, kv("heartbeat", hb))
	lines = append(lines, kv("timing", timingText(sc.Timing)))
	fol := st.render(toneWarn, "none: no candidate to take over")
	if sc.Verdict == collector.VerdictIdle {
		fol = st.render(toneMuted, "none")
	}
	if len(sc.Followers) > 0 {
		fol = m.followersText(sc.Database, sc.Followers)
	}
	if unknown := m.unknownCandidates[m.mode.subject]; len(unknown) > 0 {
		// Replayed: candidates whose state then is not recorded may have followed.
		u := st.render(toneMuted, "? "+termsafe.String(strings.Join(unknown, ", "))+" (state not recorded then)")
		if len(sc.Followers) == 0 {
			fol = u
		} else {
			fol += " · " + u
		}
	}
	lines = append(lines, kv("followers", fol))
	lines = append(lines, kv("changes", fmt.Sprintf("%d in the flap window", sc.Changes)))
	if sc.Mode == "lease" {
		lines = append(lines, kv("mode", "lease: a lease row, no lock (a crash is replaced after the session lease)"))
	} else {
		lines = append(lines, kv("lock key", fmt.Sprintf("%d (0x%016x)", sc.LockKey, uint64(sc.LockKey))))
	}
	if len(sc.BoundTo) > 0 {
		lines = append(lines, kv("bound to", termsafe.String(strings.Join(sc.BoundTo, ", "))+" (only their logins campaign)"))
	}

	// Heartbeat-age history.
	if r := m.hb[m.mode.subject]; r != nil && (r.full || r.next > 0) {
		vals := r.values()
		if n := w - 2 - 12; len(vals) > n && n > 0 {
			vals = vals[len(vals)-n:]
		}
		var peak, last = vals[0], vals[len(vals)-1]
		for _, v := range vals {
			peak = max(peak, v)
		}
		full := sc.Timing.TrustWindow
		scale := "full bar = trust window " + human.Cell(full)
		if full <= 0 {
			scale = "full bar = peak"
		}
		sample := func(d time.Duration) string { // the ring keeps -1 for "no holder"
			if d < 0 {
				return "no leader"
			}
			return human.Cell(d)
		}
		lines = append(lines, kv("hb history", fmt.Sprintf("%s, %s · now %s · peak %s", plural(len(vals), "sample"), scale, sample(last), sample(peak))))
		lines = append(lines, fitLine("  "+strings.Repeat(" ", 12)+sparkline(vals, full), w))
	}

	// Timeline strip for this scope.
	if strip, legend := m.timelineLines(st, w, 2, []string{m.mode.subject}); len(strip) > 0 {
		lines = append(lines, "", m.paneTitle(st, -1, "LAST "+fmtAxis(timelineWindow)+"  "+legend, "", w))
		lines = append(lines, strip...)
	}

	lines = append(lines, "", m.paneTitle(st, -1, "ALERTS "+strconv.Itoa(len(sc.Alerts)), "", w))
	if len(sc.Alerts) == 0 {
		lines = append(lines, st.render(toneMuted, fitLine("  none", w)))
	}
	for _, a := range sc.Alerts {
		lbl, t := severityLabel(a.Severity)
		lines = append(lines, fitLine("  "+st.render(t, lbl+" "+termsafe.String(string(a.Kind)))+": "+termsafe.String(a.Summary), w))
		lines = append(lines, st.render(toneMuted, hintLine("    → ", a, w)))
		if !a.Since.IsZero() {
			lines = append(lines, st.render(toneMuted, fitLine("    since "+fmtClock(a.Since), w)))
		}
	}

	terms := m.termsByScope[m.mode.subject]
	lines = append(lines, "", m.paneTitle(st, -1, "TERMS "+strconv.Itoa(len(terms))+" (newest first)", "", w))
	rows := make([]row, 0, len(terms))
	for i := len(terms) - 1; i >= 0; i-- {
		rows = append(rows, row{key: strconv.FormatInt(terms[i].Epoch, 10), cells: termCells(terms[i])})
	}
	tt := newTable(termColumns, "no terms in the snapshot")
	tt.unsorted = true
	tt.setRows(rows)
	tt.cursor = -1 // no selection here
	lines = append(lines, tt.render(st, w, max(1, len(rows)), false)...)

	return m.detailScrolled(st, name, lines, w, h)
}

// detailScrolled is a detail view's frame: its title, with where the body is
// scrolled to, over the body's visible lines.
func (m *Model) detailScrolled(st *styles, name string, lines []string, w, h int) []string {
	view := h - 1
	m.mode.scroll = min(m.mode.scroll, max(0, len(lines)-view))
	hint := m.keys.Back.Help().Key + " back"
	if len(lines) > view {
		hint = itoa(m.mode.scroll+1) + "–" + itoa(min(len(lines), m.mode.scroll+view)) + " of " + itoa(len(lines)) + " · " + m.keys.scrollHint() + " · " + hint
	}
	title := m.paneTitle(st, m.focus, name, hint, w)
	return append([]string{title}, lines[m.mode.scroll:]...)
}

// followersText lists followers with their priority, best first as a
// handover without a target would pick them: "node-c (2), node-b (1),
// node-d (0: never leads)".
func (m *Model) followersText(db string, ids []string) string {
	parts := make([]string, 0, len(ids))
	for _, f := range m.rankedFollowers(db, ids) {
		p := "?" // not in the snapshot's nodes
		if f.known {
			p = strconv.Itoa(f.node.Priority)
			switch {
			case f.node.Priority == 0:
				p += ": never leads"
			case !f.node.Eligible():
				p += ": not live"
			}
		}
		parts = append(parts, termsafe.String(f.id)+" ("+p+")")
	}
	return strings.Join(parts, ", ")
}

// backendsText compares the holder's backend with the lock's holders: a
// mismatch is the split-brain signature.
func (m *Model) backendsText(st *styles, sc collector.Scope) string {
	if m.snap != nil && m.snap.Replay != nil {
		return "holder pid " + strconv.Itoa(sc.HolderPID) + " (its term's) · lock holders and waiters: n/a in replay"
	}
	holder := "holder pid —"
	if sc.HolderPID > 0 {
		holder = "holder pid " + strconv.Itoa(sc.HolderPID)
	}
	var pids []string
	match := len(sc.LockPIDs) == 1 && sc.LockPIDs[0] == sc.HolderPID
	for _, p := range sc.LockPIDs {
		pids = append(pids, strconv.Itoa(p))
	}
	lock := "lock held by nobody"
	if len(pids) > 0 {
		lock = "lock pids " + strings.Join(pids, ", ")
	}
	switch {
	case len(pids) == 0 && sc.Leader != "":
		lock = st.render(toneBad, lock+" ✖ (a term is open)")
	case len(pids) > 0 && !match:
		lock = st.render(toneCrit, lock+" ✖ (≠ holder)")
	}
	return holder + " · " + lock + " · " + strconv.Itoa(sc.Waiters) + " waiting"
}

func timingText(t collector.Timing) string {
	if t.HeartbeatInterval <= 0 {
		return "unknown (no holder)"
	}
	s := "interval " + human.Cell(t.HeartbeatInterval)
	if t.HeartbeatTimeout > 0 {
		s += " · timeout " + human.Cell(t.HeartbeatTimeout)
	}
	return s + " · trust " + human.Cell(t.TrustWindow) + " · lease " + human.Cell(t.SessionLease)
}

// openDetail opens the detail of the row under the focused pane's cursor: a
// node's on the nodes pane, the event line's on the event log, else its
// scope's.
func (m *Model) openDetail() {
	m.ensureRows()
	var scope string
	switch m.focus {
	case paneEvents:
		if e, ok := m.events.selected(); ok {
			m.openEvent(e)
		}
		return
	case paneScopes:
		scope = m.scopes.selected()
	case paneTerms:
		if i := m.terms.cursor; i < len(m.terms.rows) {
			scope, _, _ = strings.Cut(m.terms.rows[i].key, "\x00") // the scope's key, then the epoch
		}
	case paneNodes:
		if node := m.nodes.selected(); node != "" {
			m.openView(viewNode, node)
		}
		return
	}
	if scope != "" {
		m.openView(viewScope, scope)
	}
}

// hostText is " on HOST" ("" when the host is not known).
func hostText(host string) string {
	if host == "" {
		return ""
	}
	return " on " + termsafe.String(host)
}
