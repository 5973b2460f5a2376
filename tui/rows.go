package tui

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/tui/show"
)

// cellWidth is the widest a human.Cell duration gets ("59m59s").
const cellWidth = 6

// Scopes table columns.
const (
	scDatabase = iota
	scName
	scVerdict
	scLeader
	scEpoch
	scTenure
	scHeartbeat
	scFollowers
	scAlerts
)

var scopeColumns = []column{
	scDatabase:  {title: "DATABASE", min: 8, max: 16, fleet: true},
	scName:      {title: "SCOPE", min: 8, max: 28},
	scVerdict:   {title: "VERDICT", min: 11},
	scLeader:    {title: "LEADER", min: 8, max: 32},
	scEpoch:     {title: "EPOCH", min: 5, right: true},
	scTenure:    {title: "TENURE", min: 6, right: true, drop: 2, reserve: cellWidth},
	scHeartbeat: {title: "HB AGE", min: 6, right: true, reserve: cellWidth},
	scFollowers: {title: "FOLLOWERS", min: 6, max: 40, drop: 3},
	scAlerts:    {title: "ALERTS", min: 6, max: 30, drop: 1},
}

// Nodes table columns.
const (
	ndDatabase = iota
	ndID
	ndHost
	ndPID
	ndState
	ndPriority
	ndRoles
	ndSeen
	ndVersion
)

var nodeColumns = []column{
	ndDatabase: {title: "DATABASE", min: 8, max: 16, fleet: true},
	ndID:       {title: "NODE", min: 8, max: 24},
	ndHost:     {title: "HOST", min: 6, max: 24, drop: 2},
	ndPID:      {title: "PID", min: 5, right: true, drop: 3},
	ndState:    {title: "STATE", min: 7},
	ndPriority: {title: "PRIORITY", min: 8, max: 16},
	ndRoles:    {title: "ROLES", min: 10, max: 60},
	ndSeen:     {title: "SEEN", min: 5, right: true, reserve: cellWidth},
	ndVersion:  {title: "VERSION", min: 7, max: 16, drop: 1},
}

// Terms table columns. GAP BEFORE is the time without a leader before the
// row's term began (collector.Term.HandoverGap): it stands before STARTED,
// on the side of the term's beginning, not beside ENDED BY, where it would
// read as the time the term's own end took.
const (
	tmDatabase = iota
	tmEpoch
	tmScope
	tmLeader
	tmGap
	tmStarted
	tmHeld
	tmEnded
)

var termColumns = []column{
	tmDatabase: {title: "DATABASE", min: 8, max: 16, fleet: true},
	tmEpoch:    {title: "EPOCH", min: 5, right: true},
	tmScope:    {title: "SCOPE", min: 8, max: 24},
	tmLeader:   {title: "LEADER", min: 8, max: 24},
	tmGap:      {title: "GAP BEFORE", min: 10, right: true, drop: 1},
	tmStarted:  {title: "STARTED", min: 8},
	tmHeld:     {title: "HELD FOR", min: 8, right: true, reserve: cellWidth},
	tmEnded:    {title: "ENDED BY", min: len("holder silent since 00:00:00"), max: 30}, // squeezed no further: the time is the point
}

// ensureRows rebuilds the table rows when the snapshot, the filter, the
// problems toggle or a sort changed; otherwise it does nothing, so renders do
// not re-sort.
func (m *Model) ensureRows() {
	if m.rowsValid {
		return
	}
	m.rowsValid = true
	if m.snap == nil {
		return
	}
	fleet := len(m.snap.Databases) > 1
	m.scopes.fleet, m.nodes.fleet, m.terms.fleet = fleet, fleet, fleet
	m.scopes.setRows(m.scopeRows())
	m.nodes.setRows(m.nodeRows())
	m.terms.setRows(m.termRows())
	m.events.setFilter(m.filter, m.fleet.only)
	m.scopes.empty, m.nodes.empty = m.emptyText("scopes", len(m.snap.Scopes)), m.emptyText("nodes", len(m.snap.Nodes))
	m.terms.empty, m.events.empty = m.emptyText("terms", len(m.snap.Terms)), m.emptyText("events", -1)
}

// emptyText is what an empty pane says: that nothing is in it, or which of
// the view's narrowings (the filter, problems only, one database) hide what
// is ("no scopes match: filter “zz” (esc clears) · problems only (p shows
// all)"). total is how many there are before narrowing (-1: not known).
func (m *Model) emptyText(what string, total int) string {
	var why []string
	if m.filter != "" {
		why = append(why, "filter “"+m.filter+"” ("+m.keys.Back.Help().Key+" clears)")
	}
	if m.problems && what != "events" {
		why = append(why, "problems only ("+m.keys.Problems.Help().Key+" shows all)")
	}
	if m.fleet.only != "" {
		why = append(why, "database "+m.fleet.only+" only ("+m.keys.Database.Help().Key+" picks)")
	}
	switch {
	case len(why) > 0 && total > 0:
		return "none of the " + itoa(total) + " " + what + " match: " + strings.Join(why, " · ")
	case len(why) > 0:
		return "no " + what + " match: " + strings.Join(why, " · ")
	case what == "events":
		return "no events yet"
	}
	return "no " + what
}

// scopeProblem reports a scope the problems filter keeps: a troubled verdict
// (not OK, not IDLE), an alert, or a database that cannot be read.
func (m *Model) scopeProblem(sc *collector.Scope) bool {
	return sc.Verdict.Troubled() || len(sc.Alerts) > 0 || m.dbDown(sc.Database)
}

func (m *Model) visibleScopes() []*collector.Scope {
	out := make([]*collector.Scope, 0, len(m.snap.Scopes))
	for i := range m.snap.Scopes {
		sc := &m.snap.Scopes[i]
		if m.problems && !m.scopeProblem(sc) || !m.inView(sc.Database) {
			continue
		}
		if m.filter != "" && !m.matchesFilter(append([]string{sc.Name, sc.Leader, sc.Database}, sc.Followers...)...) {
			continue
		}
		out = append(out, sc)
	}
	by := scopeSorts[m.scopeSort.col]
	desc := m.scopeSort.desc
	slices.SortStableFunc(out, func(a, b *collector.Scope) int {
		c := by.cmp(m, a, b)
		if c == 0 {
			c = cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Database, b.Database))
		}
		if desc {
			return -c
		}
		return c
	})
	m.scopes.sortCol, m.scopes.sortDesc = by.col, desc
	return out
}

func (m *Model) scopeRows() []row {
	scs := m.visibleScopes()
	rows := make([]row, len(scs))
	for i, sc := range scs {
		rows[i] = row{key: keyOf(sc.Database, sc.Name), cells: scopeCells(sc)}
		if unknown := m.unknownCandidates[keyOf(sc.Database, sc.Name)]; len(unknown) > 0 {
			rows[i].cells[scFollowers] = followersUnknown(sc, unknown)
		}
		if m.dbDown(sc.Database) {
			m.lastKnown(rows[i].cells, scDatabase, scVerdict, sc.Verdict)
		}
	}
	return rows
}

func scopeCells(sc *collector.Scope) []cell {
	c := make([]cell, len(scopeColumns))
	c[scDatabase] = cell{text: sc.Database}
	c[scName] = cell{text: sc.Name}
	c[scVerdict] = cell{text: show.Verdict(sc.Verdict), tone: verdictTone(sc.Verdict)}
	idle := sc.Verdict == collector.VerdictIdle
	switch {
	case sc.HandoverTo != "":
		// A pending handover: the scope is reserved for its target.
		from := cmp.Or(sc.Leader, "—")
		c[scLeader] = cell{text: from + " → " + sc.HandoverTo, tone: toneWarn}
	case sc.Leader != "" && !sc.HasLeader():
		// The term is open on record, but its holder no longer holds it (its
		// session is gone, or its lease ran out): the scope has no leader; say who
		// led last and for how long there has been none.
		text := "✖ was " + sc.Leader
		if sc.LeaderlessFor > 0 {
			text += ", none for " + gapText(sc.LeaderlessFor)
		}
		c[scLeader] = cell{text: text, tone: toneBad}
	case sc.Leader != "":
		c[scLeader] = cell{text: sc.Leader}
	default:
		text, t := "—", toneBad
		if sc.LeaderlessFor > 0 {
			text = "— for " + human.Cell(sc.LeaderlessFor)
		}
		if idle {
			t = toneMuted
		}
		c[scLeader] = cell{text: text, tone: t}
	}
	if sc.Leader != "" && sc.HasLeader() {
		c[scTenure] = cell{text: human.Cell(sc.Tenure)}
		c[scHeartbeat] = cell{text: human.Cell(sc.HeartbeatAge), tone: heartbeatTone(sc.HeartbeatAge, sc.Timing)}
		if sc.LastHeartbeat.IsZero() {
			c[scHeartbeat] = cell{text: "n/a", tone: toneMuted} // replayed: not recorded
		}
	} else {
		c[scTenure] = cell{text: "—", tone: toneMuted}
		c[scHeartbeat] = cell{text: "—", tone: toneMuted}
	}
	c[scEpoch] = cell{text: show.Epoch(sc.Epoch)}
	if len(sc.Followers) == 0 {
		t := toneWarn
		if idle {
			t = toneMuted
		}
		c[scFollowers] = cell{text: "none", tone: t}
	} else {
		c[scFollowers] = cell{text: strconv.Itoa(len(sc.Followers)) + ": " + strings.Join(sc.Followers, ",")}
	}
	c[scAlerts] = alertCell(sc.Alerts)
	if why := degradedWhy(sc); why != "" {
		c[scAlerts] = cell{text: "hb late", tone: toneWarn} // DEGRADED with no alert: say why
	}
	return c
}

// degradedWhy says why a scope is DEGRADED when no alert does: its leader's
// heartbeat is older than twice its interval (the collector's late check).
// "" for any other scope.
func degradedWhy(sc *collector.Scope) string {
	if sc.Verdict != collector.VerdictDegraded || len(sc.Alerts) > 0 {
		return ""
	}
	iv := sc.Timing.HeartbeatInterval
	if iv > 0 && sc.HeartbeatAge > 2*iv {
		return "heartbeat late: " + human.Cell(sc.HeartbeatAge) + " old, over 2 × its " + human.Cell(iv) + " interval"
	}
	return "heartbeat late: older than 2 × its interval"
}

// followersUnknown is the FOLLOWERS cell of a replayed scope some of whose
// candidates' state the history cannot tell: "1: node-c +1 unknown", "?
// 2 unknown"; never "none" when they may have followed.
func followersUnknown(sc *collector.Scope, unknown []string) cell {
	more := "+" + strconv.Itoa(len(unknown)) + " unknown"
	if len(sc.Followers) == 0 {
		return cell{text: "? " + strconv.Itoa(len(unknown)) + " unknown", tone: toneMuted}
	}
	return cell{text: strconv.Itoa(len(sc.Followers)) + ": " + strings.Join(sc.Followers, ",") + " " + more}
}

// alertCell summarises a scope's alerts: the worst kind and how many more.
func alertCell(as []collector.Alert) cell {
	if len(as) == 0 {
		return cell{text: "—", tone: toneMuted}
	}
	worst := as[0]
	for _, a := range as[1:] {
		if a.Severity == collector.SeverityCritical && worst.Severity != collector.SeverityCritical {
			worst = a
		}
	}
	t := toneWarn
	if worst.Severity == collector.SeverityCritical {
		t = toneBad
	}
	text := string(worst.Kind)
	if len(as) > 1 {
		text += " +" + strconv.Itoa(len(as)-1)
	}
	return cell{text: text, tone: t}
}

// nodeTone is how a node's state reads: down is bad, late a warning.
func nodeTone(s collector.NodeState) tone {
	switch s {
	case collector.NodeDown:
		return toneBad
	case collector.NodeLate:
		return toneWarn
	case collector.NodeStopped, collector.NodeUnknown:
		return toneMuted
	}
	return toneOK
}

func (m *Model) nodeProblem(n *collector.Node) bool {
	return n.State == collector.NodeDown || n.State == collector.NodeLate || m.nodeAlerts[keyOf(n.Database, n.ID)] > 0 || m.dbDown(n.Database)
}

func (m *Model) nodeRows() []row {
	ns := make([]*collector.Node, 0, len(m.snap.Nodes))
	for i := range m.snap.Nodes {
		n := &m.snap.Nodes[i]
		if m.problems && !m.nodeProblem(n) || !m.inView(n.Database) {
			continue
		}
		if m.filter != "" && !m.matchesFilter(append([]string{n.ID, n.Hostname, n.Database}, n.Scopes...)...) {
			continue
		}
		ns = append(ns, n)
	}
	by := nodeSorts[m.nodeSort.col]
	desc := m.nodeSort.desc
	slices.SortStableFunc(ns, func(a, b *collector.Node) int {
		c := by.cmp(m, a, b)
		if c == 0 {
			c = cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Database, b.Database))
		}
		if desc {
			return -c
		}
		return c
	})
	m.nodes.sortCol, m.nodes.sortDesc = by.col, desc
	rows := make([]row, len(ns))
	for i, n := range ns {
		rows[i] = row{key: keyOf(n.Database, n.ID), cells: m.nodeCells(n)}
		if m.dbDown(n.Database) {
			m.lastKnown(rows[i].cells, ndDatabase, -1, "")
		}
	}
	return rows
}

func (m *Model) nodeCells(n *collector.Node) []cell {
	c := make([]cell, len(nodeColumns))
	c[ndDatabase] = cell{text: n.Database}
	c[ndID] = cell{text: n.ID}
	c[ndHost] = cell{text: n.Hostname}
	if n.OSPID > 0 {
		c[ndPID] = cell{text: strconv.Itoa(n.OSPID)}
		if n.State == collector.NodeDown || n.State == collector.NodeStopped {
			c[ndPID].tone = toneMuted // a pid that no longer runs pgleader
		}
	}
	c[ndState] = cell{text: show.NodeState(n.State), tone: nodeTone(n.State)}
	if k := m.nodeAlerts[keyOf(n.Database, n.ID)]; k > 0 && c[ndState].tone != toneBad {
		c[ndState] = cell{text: "▲ " + plural(k, "alert"), tone: toneWarn}
	}
	c[ndPriority] = priorityCell(n)
	c[ndRoles] = cell{text: rolesText(n)}
	seen := cell{text: human.Cell(n.LastSeenAge)}
	if n.LastSeen.IsZero() {
		seen = cell{text: "n/a", tone: toneMuted} // replayed: not recorded
	}
	if n.State == collector.NodeDown || n.State == collector.NodeLate {
		seen.tone = nodeTone(n.State)
	}
	c[ndSeen] = seen
	c[ndVersion] = cell{text: n.Version}
	if n.Supervisor != nil {
		c[ndVersion] = cell{text: n.Version + " ▸" + n.Supervisor.Command} // a pgleader run node: its command
	}
	return c
}

// priorityCell is a node's priority, marked when the node may not be handed a
// scope (collector.Node.Eligible): "0 never leads", "1 not live"; a preferred
// node (it fails back): "2 preferred".
func priorityCell(n *collector.Node) cell {
	p := strconv.Itoa(n.Priority)
	switch {
	case n.Priority <= 0:
		return cell{text: p + " never leads", tone: toneMuted}
	case n.State == collector.NodeStopped, n.State == collector.NodeUnknown:
		return cell{text: p, tone: toneMuted} // its state says it all (replayed: unknown, not "not live")
	case !n.Eligible():
		return cell{text: p + " not live", tone: toneMuted}
	case n.FailbackAfter > 0:
		return cell{text: p + " preferred"}
	}
	return cell{text: p}
}

// follower is a scope's follower and its row of the snapshot's nodes (known
// is false when the snapshot has none).
type follower struct {
	id    string
	node  collector.Node
	known bool
}

// rankedFollowers returns a scope's followers (node ids of database db), the
// best handover target first: the eligible ones (collector.Node.Eligible) by
// priority, highest first, then by node id; then the others, by node id.
func (m *Model) rankedFollowers(db string, ids []string) []follower {
	fs := make([]follower, len(ids))
	for i, id := range ids {
		n, ok := findNode(m.snap, keyOf(db, id))
		fs[i] = follower{id: id, node: n, known: ok}
	}
	slices.SortStableFunc(fs, func(a, b follower) int {
		ea, eb := a.known && a.node.Eligible(), b.known && b.node.Eligible()
		switch {
		case ea != eb:
			if ea {
				return -1
			}
			return 1
		case ea && a.node.Priority != b.node.Priority:
			return cmp.Compare(b.node.Priority, a.node.Priority)
		}
		return cmp.Compare(a.id, b.id)
	})
	return fs
}

// rolesText is a node's roles, leaderships first: "billing:L reports:F".
// Only a live node follows (collector.Scope.Followers counts no other): a
// late or down one shows what it still leads and "follows none"
// ("billing:L · follows none"). When the list is wider than the ROLES column
// it gives way to a count and the scopes led, "leads 100 of 1000: scope-0000
// scope-0010 …", built only as far as the column shows: a node of a
// thousand scopes costs what one of ten does.
func rolesText(n *collector.Node) string {
	if n.State == collector.NodeStopped || (len(n.Scopes) == 0 && len(n.Leads) == 0) {
		return "—"
	}
	if n.State == collector.NodeUnknown {
		// Replayed, before its current lifetime: what it led is known (its
		// terms), whether it followed is not.
		return unknownRoles(n)
	}
	if !n.Live {
		led := "follows none"
		if len(n.Leads) > 0 {
			led = rolesText(&collector.Node{Leads: n.Leads, Live: true}) + " · " + led
		}
		return led
	}
	limit := nodeColumns[ndRoles].max
	var b strings.Builder
	item := func(s, role string) bool {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
		b.WriteString(role)
		return b.Len() <= limit
	}
	leads := make(map[string]bool, min(len(n.Leads), limit))
	fits := true
	for _, s := range n.Leads {
		leads[s] = true
		if fits = item(s, ":L"); !fits {
			break
		}
	}
	for _, s := range n.Scopes {
		if !fits {
			break
		}
		if !leads[s] {
			fits = item(s, ":F")
		}
	}
	if fits {
		return b.String()
	}
	b.Reset()
	b.WriteString("leads " + strconv.Itoa(len(n.Leads)) + " of " + strconv.Itoa(max(len(n.Scopes), len(n.Leads))))
	for i, s := range n.Leads {
		if b.Len() > limit {
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}

// unknownRoles is the roles of a node whose state is unknown (replayed):
// "billing:L reports:?".
func unknownRoles(n *collector.Node) string {
	var b strings.Builder
	for _, s := range n.Leads {
		b.WriteString(s + ":L ")
	}
	for _, s := range n.Scopes {
		if !slices.Contains(n.Leads, s) {
			b.WriteString(s + ":? ")
		}
		if b.Len() > nodeColumns[ndRoles].max {
			break
		}
	}
	return strings.TrimSpace(b.String())
}

func (m *Model) termRows() []row {
	var problem map[string]bool
	if m.problems {
		problem = map[string]bool{}
		for i := range m.snap.Scopes {
			if sc := &m.snap.Scopes[i]; m.scopeProblem(sc) {
				problem[keyOf(sc.Database, sc.Name)] = true
			}
		}
	}
	terms := m.snap.Terms
	rows := make([]row, 0, len(terms))
	for _, t := range terms {
		if problem != nil && !problem[keyOf(t.Database, t.Scope)] || !m.inView(t.Database) {
			continue
		}
		if !m.matchesFilter(t.Scope, t.Holder, t.Database) {
			continue
		}
		rows = append(rows, row{key: keyOf(t.Database, t.Scope) + "\x00" + strconv.FormatInt(t.Epoch, 10), cells: termCells(t)})
	}
	return rows
}

func termCells(t collector.Term) []cell {
	c := make([]cell, len(termColumns))
	c[tmDatabase] = cell{text: t.Database}
	c[tmEpoch] = cell{text: show.Epoch(t.Epoch)}
	c[tmScope] = cell{text: t.Scope}
	c[tmLeader] = cell{text: t.Holder}
	c[tmStarted] = cell{text: fmtClock(t.AcquiredAt)}
	c[tmHeld] = cell{text: human.Cell(t.HeldFor)}
	switch {
	case t.Open() && t.Silent:
		// Open on record, but its holder leads no more (crashed, frozen, cut
		// off) and no successor has closed the term yet: never "(leading)".
		c[tmEnded] = cell{text: silentText(t), tone: toneBad}
	case t.Open():
		c[tmEnded] = cell{text: "(leading)", tone: toneOK}
	default:
		text := string(t.EndedBy)
		if t.HandedTo != "" {
			text += " → " + t.HandedTo // handed_over, to whom
		}
		c[tmEnded] = cell{text: text, tone: endedTone(t)}
	}
	if t.HandoverGap > 0 {
		c[tmGap] = cell{text: gapText(t.HandoverGap)}
	} else {
		c[tmGap] = cell{text: "—", tone: toneMuted}
	}
	return c
}

// silentText is an open term's state when its holder leads no more: "holder
// silent since 21:53:58" (its last sign of life, the view's local time).
func silentText(t collector.Term) string {
	if t.LastSign.IsZero() {
		return "holder silent"
	}
	return "holder silent since " + fmtClock(t.LastSign)
}

// endedTone: a clean hand-over (or an open term) is normal; a crash or a silent
// leader is bad; anything else is worth a look.
func endedTone(t collector.Term) tone {
	switch {
	case t.EndedBy == "" || t.EndedBy.Clean():
		return toneNone
	case t.EndedBy == "crashed", t.EndedBy == "heartbeat_timeout":
		return toneBad
	default:
		return toneWarn
	}
}

// gapText prints a handover gap with millisecond resolution below a second (a
// failover's gap is milliseconds: 18ms, not 0.0s), in a narrow cell above.
func gapText(d time.Duration) string {
	if d < time.Second {
		return human.Duration(d)
	}
	return human.Cell(d)
}

func sortTermsByStart(ts []collector.Term) {
	sort.SliceStable(ts, func(i, j int) bool {
		if !ts[i].AcquiredAt.Equal(ts[j].AcquiredAt) {
			return ts[i].AcquiredAt.Before(ts[j].AcquiredAt)
		}
		return ts[i].Epoch < ts[j].Epoch
	})
}
