package tui

import (
	"cmp"
	"strings"

	"github.com/pgleader/pgleader/collector"
)

// sortState is a table's sort: an index into the table's sort orders and a
// direction.
type sortState struct {
	col  int
	desc bool
}

// scopeSorts lists the scope sort orders in the order s cycles through them.
// The first is the default: the worst verdict on top, a scope whose database
// cannot be read (its verdict last-known, "? was OK") as unknown, before
// what is known to be fine (verdictRank).
var scopeSorts = []struct {
	col int
	cmp func(m *Model, a, b *collector.Scope) int
}{
	{scVerdict, func(m *Model, a, b *collector.Scope) int { return cmp.Compare(m.verdictRank(a), m.verdictRank(b)) }},
	{scName, func(_ *Model, a, b *collector.Scope) int { return 0 }}, // the tie-break is the name
	{scLeader, func(_ *Model, a, b *collector.Scope) int { return cmp.Compare(a.Leader, b.Leader) }},
	{scEpoch, func(_ *Model, a, b *collector.Scope) int { return cmp.Compare(a.Epoch, b.Epoch) }},
	{scTenure, func(_ *Model, a, b *collector.Scope) int { return cmp.Compare(a.Tenure, b.Tenure) }},
	{scHeartbeat, func(_ *Model, a, b *collector.Scope) int { return cmp.Compare(a.HeartbeatAge, b.HeartbeatAge) }},
	{scAlerts, func(_ *Model, a, b *collector.Scope) int { return cmp.Compare(len(b.Alerts), len(a.Alerts)) }},
}

var nodeSorts = []struct {
	col int
	cmp func(m *Model, a, b *collector.Node) int
}{
	{ndID, func(_ *Model, a, b *collector.Node) int { return 0 }},
	{ndState, func(m *Model, a, b *collector.Node) int { return cmp.Compare(m.nodeStateRank(a), m.nodeStateRank(b)) }},
	{ndHost, func(_ *Model, a, b *collector.Node) int { return cmp.Compare(a.Hostname, b.Hostname) }},
	{ndRoles, func(_ *Model, a, b *collector.Node) int { return cmp.Compare(len(b.Leads), len(a.Leads)) }},
	{ndSeen, func(_ *Model, a, b *collector.Node) int { return cmp.Compare(a.LastSeenAge, b.LastSeenAge) }},
	{ndVersion, func(_ *Model, a, b *collector.Node) int { return cmp.Compare(a.Version, b.Version) }},
	{ndPriority, func(_ *Model, a, b *collector.Node) int { return cmp.Compare(b.Priority, a.Priority) }}, // highest first
}

// cycleSort moves the focused table to its next sort order, or reverses it.
func (m *Model) cycleSort(reverse bool) {
	var st *sortState
	var n int
	var name string
	switch m.focus {
	case paneScopes:
		st, n = &m.scopeSort, len(scopeSorts)
	case paneNodes:
		st, n = &m.nodeSort, len(nodeSorts)
	default:
		m.setStatus(m.focus.String()+" are in time order (newest "+map[bool]string{true: "first", false: "last"}[m.focus == paneTerms]+")", toneNone)
		return
	}
	if reverse {
		st.desc = !st.desc
	} else {
		st.col = (st.col + 1) % n
		st.desc = false
	}
	m.invalidate()
	m.ensureRows()
	if m.focus == paneScopes {
		name = scopeColumns[scopeSorts[st.col].col].title
	} else {
		name = nodeColumns[nodeSorts[st.col].col].title
	}
	dir := "ascending"
	if st.desc {
		dir = "descending"
	}
	m.setStatus("sorted by "+strings.ToLower(name)+", "+dir, toneNone)
}

// verdictRank is the scope's verdict rank (collector.Verdict.Rank), the
// unknown verdict's while its database cannot be read: its last-known verdict
// says nothing of now.
func (m *Model) verdictRank(sc *collector.Scope) int {
	if m.dbDown(sc.Database) {
		return collector.Verdict("").Rank()
	}
	return sc.Verdict.Rank()
}

// nodeStateRank orders node states worst first (collector.NodeState.Rank),
// a node whose database cannot be read between late and live: its state is
// last-known.
func (m *Model) nodeStateRank(n *collector.Node) int {
	if m.dbDown(n.Database) {
		return 2*collector.NodeLate.Rank() + 1
	}
	return 2 * n.State.Rank()
}
