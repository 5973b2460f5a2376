package tui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// nodeDetailLines is the node detail view: everything the snapshot says about
// one node — its state, its scopes and its role in each, its timing, its
// processes — and the alerts about it.
func (m *Model) nodeDetailLines(w, h int) []string {
	st := m.bodyStyles()
	n, ok := findNode(m.snap, m.mode.subject)
	name := m.detailName("NODE", m.mode.subject)
	if !ok {
		return m.detailMissing(st, name, "node "+termsafe.String(keyLabel(m.mode.subject))+" is not in the latest snapshot (its row was deleted)", w)
	}
	kv := func(k, v string) string { return fitLine("  "+st.render(toneMuted, padRight(k, 11))+" "+v, w) }

	var lines []string
	if n.Database != "" {
		lines = append(lines, kv("database", m.databaseText(st, n.Database)))
	}
	state := st.render(nodeTone(n.State), show.NodeState(n.State))
	switch n.State {
	case collector.NodeLive:
		state += " · heartbeats on time"
	case collector.NodeLate:
		state += " · silent beyond its trust window: its gates are closed"
	case collector.NodeDown:
		state += " · its leadership session is gone"
	case collector.NodeStopped:
		state += " · stopped cleanly at " + fmtClock(n.StoppedAt)
	case collector.NodeUnknown:
		state += " · not recorded: it registered again later and held no term then"
	}
	lines = append(lines, kv("state", state))
	seen := human.Cell(n.LastSeenAge) + " ago (at " + fmtStamp(n.LastSeen) + ")"
	if n.LastSeen.IsZero() && m.snap != nil && m.snap.Replay != nil {
		seen = "n/a in replay (seen again later; heartbeats are not recorded)"
	}
	if n.State == collector.NodeDown || n.State == collector.NodeLate {
		seen = st.render(nodeTone(n.State), seen)
	}
	lines = append(lines, kv("last seen", seen))

	lines = append(lines, m.nodeScopeLines(st, n, kv)...)
	if stale := staleClaims(n); len(stale) > 0 {
		lines = append(lines, kv("claims", st.render(toneWarn, "its last heartbeat said it leads "+
			termsafe.String(strings.Join(stale, ", "))+", which it no longer does")))
	}

	timing := "not registered"
	if n.Timing.HeartbeatInterval > 0 {
		timing = "heartbeat every " + human.Cell(n.Timing.HeartbeatInterval) + " · trust window " +
			human.Cell(n.Timing.TrustWindow) + " · session lease " + human.Cell(n.Timing.SessionLease)
	}
	lines = append(lines, kv("timing", timing))
	lines = append(lines, kv("priority", nodePriorityText(st, n)))
	mode := cmp.Or(termsafe.String(n.Mode), "—")
	switch n.Mode {
	case "lock":
		mode += ": its leadership session holds the scopes' advisory locks"
	case "lease":
		mode += ": lease rows, no lock"
	}
	lines = append(lines, kv("mode", mode))
	if n.DoorbellUnringable != "" {
		// The reason is the useful part and long (it names the fix): wrapped
		// under its label, never cut.
		why := "cannot ring, its wake-ups wait for its heartbeats (within one interval): " + termsafe.String(n.DoorbellUnringable)
		for i, l := range wrapText(why, w-2-11-1, "") {
			label := ""
			if i == 0 {
				label = "doorbell"
			}
			lines = append(lines, "  "+st.render(toneMuted, padRight(label, 11))+" "+st.render(toneWarn, l))
		}
	}

	proc := "os pid —"
	if n.OSPID > 0 {
		proc = "os pid " + strconv.Itoa(n.OSPID)
	}
	if n.Hostname != "" {
		proc += " on " + termsafe.String(n.Hostname)
	}
	replayed := m.snap != nil && m.snap.Replay != nil
	switch {
	case n.StartedAt.IsZero():
	case replayed:
		// A replay knows a node's first registration, not its processes.
		proc += " · first registered " + fmtClock(n.StartedAt)
	default:
		proc += " · started " + fmtClock(n.StartedAt)
		if up := m.snap.DBTime.Sub(n.StartedAt); up > 0 && n.StoppedAt.IsZero() && !m.snap.DBTime.IsZero() {
			proc += " (up " + human.Cell(up) + ")"
		}
	}
	lines = append(lines, kv("process", proc))
	restarts := st.render(toneMuted, "0")
	switch {
	case replayed:
		restarts = st.render(toneMuted, "n/a in replay")
	case n.Restarts > 0:
		restarts = st.render(toneWarn, strconv.Itoa(n.Restarts)) + " · registered again by a new process " + plural(n.Restarts, "time")
	}
	lines = append(lines, kv("restarts", restarts))
	lines = append(lines, kv("backend", backendText(st, n)))
	role := st.render(toneMuted, "— (not recorded)")
	if n.LoginRole != "" {
		role = termsafe.String(n.LoginRole) + st.render(toneMuted, " (the database role it registered under)")
	}
	lines = append(lines, kv("login role", role))
	lines = append(lines, kv("version", termsafe.String(n.Version)))
	if sv := n.Supervisor; sv != nil {
		lines = append(lines, kv("supervises", supervisedLine(sv)+st.render(toneMuted, " (pgleader run)")))
	}

	var alerts []collector.Alert
	for _, a := range m.snap.Alerts {
		if a.Node == n.ID && a.Database == n.Database {
			alerts = append(alerts, a)
		}
	}
	lines = append(lines, "", m.paneTitle(st, -1, "ALERTS "+strconv.Itoa(len(alerts)), "", w))
	if len(alerts) == 0 {
		lines = append(lines, st.render(toneMuted, fitLine("  none", w)))
	}
	for _, a := range alerts {
		lbl, t := severityLabel(a.Severity)
		lines = append(lines, fitLine("  "+st.render(t, lbl+" "+termsafe.String(string(a.Kind)))+": "+termsafe.String(a.Summary), w))
		lines = append(lines, st.render(toneMuted, hintLine("    → ", a, w)))
	}

	return m.detailScrolled(st, name, lines, w, h)
}

// nodeScopeLines lists the scopes the node campaigns for, one a line, with
// its role in each ("leads", "follows", "not following") and the scope's
// verdict.
func (m *Model) nodeScopeLines(st *styles, n collector.Node, kv func(k, v string) string) []string {
	scopes := slices.Clone(n.Scopes)
	for _, s := range n.Leads {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	slices.Sort(scopes)
	if len(scopes) == 0 {
		return []string{kv("scopes", st.render(toneMuted, "none: it campaigns for no scope"))}
	}
	width := 0
	for _, s := range scopes {
		width = max(width, textWidth(termsafe.String(s)))
	}
	// Only a live node follows: a late or down one is no scope's follower
	// (collector.Scope.Followers).
	follows, roleW := "follows", 7
	switch {
	case n.State == collector.NodeUnknown:
		follows = "?" // replayed: not recorded
	case !n.Live:
		follows, roleW = "not following", 13
	}
	out := make([]string, 0, len(scopes))
	for i, s := range scopes {
		role := follows
		if n.Role(s) == collector.RoleLeader {
			role = "leads"
		}
		text := padRight(termsafe.String(s), width) + "  " + padRight(role, roleW)
		if sc, ok := findScope(m.snap, keyOf(n.Database, s)); ok {
			text += "  " + st.render(verdictTone(sc.Verdict), show.Verdict(sc.Verdict))
			if role == "leads" {
				text += " · epoch " + strconv.FormatInt(sc.Epoch, 10)
			} else if sc.Leader != "" {
				text += " · led by " + termsafe.String(sc.Leader)
			}
		}
		k := ""
		if i == 0 {
			k = "scopes"
		}
		out = append(out, kv(k, text))
	}
	return out
}

// staleClaims are the scopes the node's last heartbeat said it leads and it
// does not: it froze, or lost its session.
func staleClaims(n collector.Node) []string {
	var out []string
	for _, s := range n.Reported {
		if !slices.Contains(n.Leads, s) {
			out = append(out, s)
		}
	}
	return out
}

// nodePriorityText is the priority and what it means for a handover.
func nodePriorityText(st *styles, n collector.Node) string {
	p := strconv.Itoa(n.Priority)
	switch {
	case n.Priority <= 0:
		p = st.render(toneMuted, p+": never leads")
	case n.State == collector.NodeUnknown:
	case !n.Eligible():
		p += ": not live, so no handover goes to it"
	default:
		p += ": eligible for a handover"
	}
	if n.FailbackAfter > 0 {
		p += " · preferred: takes its scopes back after " + human.Cell(n.FailbackAfter) + " up"
	}
	return p
}

// backendText is the node's leadership session: its backend pid and, in lock
// mode, whether the server still holds its beacon lock.
func backendText(st *styles, n collector.Node) string {
	s := "pid —"
	if n.BackendPID > 0 {
		s = "pid " + strconv.Itoa(n.BackendPID)
	}
	switch {
	case n.SessionAlive == nil:
	case *n.SessionAlive:
		s += " · session alive (holds its beacon lock)"
	default:
		s += " · " + st.render(toneBad, "session gone (its beacon lock is free)")
	}
	return s
}

// supervisedLine describes a pgleader run node's command and child.
func supervisedLine(sv *collector.Supervised) string {
	state := termsafe.String(sv.State)
	if sv.State == "unknown" {
		state = "? unknown now (its node is not live; its last report follows)" // the collector's word for it
	}
	t := termsafe.String(sv.Command) + " · " + state
	if sv.PID > 0 {
		t += " · pid " + strconv.Itoa(sv.PID)
	}
	if sv.Epoch > 0 {
		t += " · epoch " + show.Epoch(sv.Epoch)
	}
	t += " · " + strconv.Itoa(sv.Restarts) + " restarts"
	if sv.LastExit != nil {
		t += " · last " + termsafe.String(show.LastExit(sv))
	}
	return t
}
