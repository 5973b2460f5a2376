// Package replay rebuilds the cluster as it was at a past instant from what
// the database keeps of its history (collector.ReadHistory): pgleader.terms,
// pgleader.audit, and the current rows of leader_state and nodes. What that
// history holds, and so what a replayed collector.Snapshot can and cannot say
// (Unknown lists the fields it cannot rebuild):
//
//   - Scopes: a scope is shown from its first term on, and not while retired
//     (the scope_retired and scope_revived audit rows; without them
//     leader_state.retired_at). A scope that never had a term is not shown.
//   - Leader, epoch, tenure, handover gap, previous term: exact, from the term
//     open at the instant (acquired_at ≤ at < released_at). A term its holder
//     never closed is closed on record by its successor, at the successor's
//     claim; the holder's last heartbeat is known from the successor's handover
//     gap, so from that heartbeat plus the holder's trust window on the scope
//     shows as having no leader ("was n1"), as it had.
//   - Heartbeat ages: not recorded. Only a term's last heartbeat is known (its
//     release, the successor's handover gap, or leader_state for the current
//     term): after it the age is exact, before it unknown (a pause that ended
//     is not in any table). Likewise a node's last_seen.
//   - Nodes: only the newest row per node survives a restart. Its current
//     lifetime (registered_at, or started_at before schema 10, to stopped_at or
//     last_seen) is known: live while it was seen later, then late or down by
//     its own timing, or stopped. Before that lifetime a node is live where it
//     held a term; otherwise its state is unknown (collector.NodeUnknown).
//     Nothing audits a registration: node_joined is a notification, not a
//     row. Candidate lists, priorities and timing are today's.
//   - Not rebuilt at all: lock holders other than the term's holder, waiters,
//     foreign sessions (interference), the lock table's size, the collector's
//     health, and every alert but no_leader (stale leader, split brain,
//     flapping and the rest need observations nobody recorded).
//
// A History holds the rows of one window (collector.ReplayWindow on either
// side of an instant, by default) and rebuilds any instant of it without
// reading again: At, and Events, Transitions, Prev and Next to step through
// an incident. It needs no database: the rows are collector.HistoryRows.
//
//	rows, err := collector.ReadHistory(ctx, conn, at, collector.ReplayWindow)
//	snap := replay.New(rows).At(at)
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/protocol"
)

// Unknown names the JSON fields of a replayed Snapshot that are not rebuilt:
// they hold zero values (or today's values, for candidate lists and timing,
// see the package doc) and every view shows them as unknown.
var Unknown = []string{
	"scopes[].heartbeat_age (exact only after the term's last heartbeat)",
	"scopes[].waiters", "scopes[].interference", "scopes[].lock_pids (inferred: the term's holder)",
	"nodes[].last_seen_age (exact only after the node's last sighting)",
	"nodes[].backend_pid", "nodes[].session_alive", "nodes[].supervisor",
	"locks", "fence_rejected", "timeline", "health",
	"alerts other than no_leader",
}

// History is what a replay rebuilds from: the rows of a window of time, read
// once. At rebuilds the Snapshot of any instant within [From, To]; Events and
// Transitions serve stepping through it. A History is not modified after New
// (At only counts its snapshots) and may be shared.
type History struct {
	// From and To bound the window read (To at most DBNow).
	From, To time.Time
	// DBNow is the database's now() of the read.
	DBNow time.Time
	// Earliest is the oldest term or audit row (zero: none).
	Earliest time.Time
	// Before and After are the nearest transitions outside the window (zero:
	// none), to read the next window from.
	Before, After time.Time

	scopes  []collector.HistoryScope
	terms   map[string][]collector.Term // per scope, by acquired_at: two before From, the window, one after To
	audit   []auditRow                  // [From, To], by time
	retired map[string]bool             // retired at From, by the audit rows before it
	nodes   []collector.HistoryNode
	seq     atomic.Uint64
}

// auditRow is an audit row with what a replay takes from it: its event, as
// the collector makes it, and, for a handover's request or withdrawal, its
// target.
type auditRow struct {
	collector.HistoryAudit
	event   collector.Event
	isEvent bool
	to      string // detail.to
}

// New builds a History from the rows of a window (collector.ReadHistory).
func New(r collector.HistoryRows) *History {
	h := &History{From: r.From, To: r.To, DBNow: r.DBNow, Earliest: r.Earliest, Before: r.Before, After: r.After,
		scopes: slices.Clone(r.Scopes), nodes: slices.Clone(r.Nodes), terms: map[string][]collector.Term{}, retired: map[string]bool{}}
	for k, v := range r.Retired {
		h.retired[k] = v
	}
	h.setTerms(r.Terms)
	for _, a := range r.Audit {
		row := auditRow{HistoryAudit: a}
		row.event, row.isEvent = a.Event()
		var d struct {
			To string `json:"to"`
		}
		_ = json.Unmarshal(a.Detail, &d) // as a read does: a malformed detail keeps zero values
		row.to = d.To
		h.audit = append(h.audit, row)
	}
	slices.SortStableFunc(h.audit, func(a, b auditRow) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return h
}

// setTerms files terms per scope, oldest first, each once.
func (h *History) setTerms(terms []collector.Term) {
	seen := map[int64]bool{}
	for _, t := range terms {
		if seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		h.terms[t.Scope] = append(h.terms[t.Scope], t)
	}
	for _, ts := range h.terms {
		slices.SortFunc(ts, func(a, b collector.Term) int {
			return cmp.Or(a.AcquiredAt.Compare(b.AcquiredAt), cmp.Compare(a.Epoch, b.Epoch))
		})
	}
}

// Contains reports whether at lies within the window read.
func (h *History) Contains(at time.Time) bool { return !at.Before(h.From) && !at.After(h.To) }

// lastSign is the last instant a term's holder is known to have led: its own
// release, or, for a term its successor closed, its last heartbeat (the
// successor's start minus its handover gap), or for the open current term
// leader_state's last heartbeat. Zero when unknown (an open term that is not
// leader_state's).
func (h *History) lastSign(sc *collector.HistoryScope, ts []collector.Term, i int) time.Time {
	t := ts[i]
	switch {
	case t.Open():
		if sc != nil && sc.Epoch == t.Epoch && sc.Holder == t.Holder {
			return sc.LastHeartbeat
		}
		return time.Time{}
	case t.EndedBy == protocol.ReasonResigned || t.EndedBy == protocol.ReasonShutdown || t.EndedBy == protocol.ReasonHandedOver:
		return t.ReleasedAt
	}
	if i+1 < len(ts) && ts[i+1].AcquiredAt.Equal(t.ReleasedAt) {
		// Closed by its successor's claim: its last heartbeat is the
		// successor's start minus its handover gap.
		return ts[i+1].AcquiredAt.Add(-ts[i+1].HandoverGap)
	}
	return t.ReleasedAt // released by its holder
}

// trustWindow is the window after a holder's last heartbeat within which it
// still counted as leading: the scope's registered trust window (today's),
// else the default; in lease mode its lease, which is what ends a lease
// holder's leadership (collector.Scope.HasLeader).
func trustWindow(sc *collector.HistoryScope) time.Duration {
	if sc.Mode == "lease" && sc.Timing.SessionLease > 0 {
		return sc.Timing.SessionLease
	}
	if sc.Timing.TrustWindow > 0 {
		return sc.Timing.TrustWindow
	}
	return collector.DefaultTrustWindow
}

// termAt is the state of one scope's terms at an instant.
type termAt struct {
	cur      *collector.Term // the latest term begun at or before the instant (nil: none)
	prev     *collector.Term // the one before it
	open     bool            // cur was open at the instant (on record)
	alive    bool            // and its holder led then (not past its last heartbeat + W)
	lastSign time.Time       // cur's last sign of leadership (zero: unknown)
}

func (h *History) termAt(sc *collector.HistoryScope, at time.Time) termAt {
	ts := h.terms[sc.Name]
	i := -1
	for j := range ts {
		if ts[j].AcquiredAt.After(at) {
			break
		}
		i = j
	}
	if i < 0 {
		return termAt{}
	}
	r := termAt{cur: &ts[i]}
	if i > 0 {
		r.prev = &ts[i-1]
	}
	r.open = r.cur.Open() || r.cur.ReleasedAt.After(at)
	r.lastSign = h.lastSign(sc, ts, i)
	r.alive = r.open && (r.lastSign.IsZero() || !at.After(r.lastSign.Add(trustWindow(sc))))
	return r
}

// retiredAt reports whether the scope was retired at the instant.
func (h *History) retiredAt(sc *collector.HistoryScope, at time.Time) bool {
	state, known := h.retired[sc.Name]
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if a.Scope == sc.Name && (a.Kind == "scope_retired" || a.Kind == "scope_revived") {
			state, known = a.Kind == "scope_retired", true
		}
	}
	if !known {
		return !sc.RetiredAt.IsZero() && !sc.RetiredAt.After(at)
	}
	return state
}

// At rebuilds the Snapshot of the instant at (the package doc says what it
// holds). An instant outside [From, To] is rebuilt from what the window holds,
// which may lack its terms: read a History around it instead.
func (h *History) At(at time.Time) *collector.Snapshot {
	snap := &collector.Snapshot{Seq: h.seq.Add(1), At: at, DBTime: at, FenceRejected: map[string]uint64{},
		Health: collector.Health{Source: collector.SourceReplay, SlotLagBytes: -1}}
	info := &collector.ReplayInfo{At: at, DBNow: h.DBNow, From: h.From, To: h.To, Earliest: h.Earliest,
		Unknown: slices.Clone(Unknown)}
	info.Prev, info.Next = h.Prev(at), h.Next(at)
	snap.Replay = info
	if h.Earliest.IsZero() || at.Before(h.Earliest) {
		info.Notes = append(info.Notes, "before the first record: no term or audit row is older than this instant")
	}

	leading := map[string][]string{} // node → scopes it led at the instant
	states := map[string]termAt{}
	for i := range h.scopes {
		sc := &h.scopes[i]
		if sc.First.IsZero() || sc.First.After(at) {
			continue
		}
		if h.retiredAt(sc, at) {
			snap.Retired++
			continue
		}
		st := h.termAt(sc, at)
		states[sc.Name] = st
		if st.alive {
			leading[st.cur.Holder] = append(leading[st.cur.Holder], sc.Name)
		}
	}
	snap.Nodes = h.nodesAt(at, leading, &info.Notes)
	live := map[string]bool{}
	for _, n := range snap.Nodes {
		if n.Live {
			live[n.ID] = true
		}
	}
	for i := range h.scopes {
		sc := &h.scopes[i]
		st, ok := states[sc.Name]
		if !ok {
			continue
		}
		s := h.scopeAt(sc, st, at, snap.Nodes, live)
		snap.Alerts = append(snap.Alerts, s.Alerts...)
		snap.Scopes = append(snap.Scopes, s)
	}
	// A snapshot's alerts are sorted critical first, then by kind, scope and
	// node: every replayed alert is a no_leader (critical, no node), so by
	// scope.
	slices.SortFunc(snap.Alerts, func(a, b collector.Alert) int { return cmp.Compare(a.Scope, b.Scope) })
	snap.Terms = h.termsAt(at)
	return snap
}

// scopeAt is one scope at the instant.
func (h *History) scopeAt(sc *collector.HistoryScope, st termAt, at time.Time, nodes []collector.Node, live map[string]bool) collector.Scope {
	s := collector.Scope{Name: sc.Name, LockKey: sc.LockKey, Mode: sc.Mode, Timing: sc.Timing, Followers: []string{}}
	cur := st.cur
	s.Epoch = cur.Epoch
	if st.open {
		t := *cur
		t.ReleasedAt, t.EndedBy, t.HandedTo = time.Time{}, "", ""
		t.HeldFor = at.Sub(t.AcquiredAt)
		s.OpenTerm = &t
		s.Leader, s.LeaderHost, s.HolderPID = cur.Holder, cur.Hostname, cur.HolderPID
		s.AcquiredAt, s.Tenure = cur.AcquiredAt, at.Sub(cur.AcquiredAt)
		s.LeaderLive = st.alive
		if st.alive {
			s.LockPIDs = []int{max(cur.HolderPID, 1)} // the term's holder: inferred, not observed
		}
	} else {
		s.ReleasedAt = cur.ReleasedAt
	}
	if !st.lastSign.IsZero() && !at.Before(st.lastSign) {
		// After the term's last heartbeat its age is exact.
		s.LastHeartbeat, s.HeartbeatAge = st.lastSign, at.Sub(st.lastSign)
	}
	if !st.alive {
		since := st.lastSign
		if since.IsZero() && !st.open {
			since = cur.ReleasedAt
		}
		if !since.IsZero() && !since.After(at) {
			s.LeaderlessFor = at.Sub(since)
		}
	}
	for _, n := range nodes {
		if n.Live && n.ID != s.Leader && slices.Contains(n.Scopes, sc.Name) {
			s.Followers = append(s.Followers, n.ID)
		}
	}
	if st.open {
		s.HandoverTo = h.handoverAt(sc.Name, cur.Epoch, at)
	}
	for _, t := range h.terms[sc.Name] {
		if !t.AcquiredAt.After(at) && at.Sub(t.AcquiredAt) <= collector.DefaultFlapWindow {
			s.Changes++
		}
	}
	switch {
	case st.alive:
		s.Verdict = collector.VerdictOK
	case !st.open && cur.EndedBy == protocol.ReasonShutdown && !h.candidateLive(sc.Name, nodes):
		s.Verdict = collector.VerdictIdle
	default:
		s.Verdict = collector.VerdictNoLeader
		if s.LeaderlessFor >= collector.DefaultNoLeaderAfter {
			what := fmt.Sprintf("the term of %s (epoch %d) ended %s", cur.Holder, cur.Epoch, cmp.Or(string(cur.EndedBy), "unknown"))
			if st.open {
				what = fmt.Sprintf("term %d of %s was open on record, its holder silent since %s", cur.Epoch, cur.Holder,
					st.lastSign.Format("15:04:05.000"))
			}
			s.Alerts = []collector.Alert{{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: sc.Name,
				Summary: fmt.Sprintf("%s had had no leader for %s: %s", sc.Name, human.Duration(s.LeaderlessFor), what),
				Hint:    "replayed: see pgleader history and the audit rows of that time",
				Runbook: collector.AlertNoLeader.Runbook(), Since: at.Add(-s.LeaderlessFor)}}
		}
	}
	return s
}

// candidateLive reports whether a live node lists the scope among its
// (today's) candidate scopes.
func (h *History) candidateLive(scope string, nodes []collector.Node) bool {
	return slices.ContainsFunc(nodes, func(n collector.Node) bool { return n.Live && slices.Contains(n.Scopes, scope) })
}

// handoverAt is the target of a handover requested of the term of epoch and
// not withdrawn by the instant ("" when none).
func (h *History) handoverAt(scope string, epoch int64, at time.Time) string {
	to := ""
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if a.Scope != scope || a.Epoch != epoch {
			continue
		}
		switch a.Kind {
		case "handover_requested":
			to = a.to
		case "handover_cancelled":
			to = ""
		}
	}
	return to
}

// nodesAt is the nodes at the instant. notes collects what limits them.
func (h *History) nodesAt(at time.Time, leading map[string][]string, notes *[]string) []collector.Node {
	out := []collector.Node{}
	var earlier []string
	for _, rn := range h.nodes {
		n := rn.Node
		n.Scopes = slices.Clone(n.Scopes)
		if n.Scopes == nil {
			n.Scopes = []string{}
		}
		leads := leading[n.ID]
		if n.StartedAt.After(at) && len(leads) == 0 {
			continue // not registered yet
		}
		n.Leads = slices.Clone(leads)
		if n.Leads == nil {
			n.Leads = []string{}
		}
		n.Reported = slices.Clone(n.Leads)
		lastSeen, stopped := n.LastSeen, n.StoppedAt
		n.LastSeen, n.StoppedAt, n.LastSeenAge = time.Time{}, time.Time{}, 0
		switch {
		case at.Before(rn.Registered):
			// An earlier lifetime: only its terms tell.
			if len(leads) > 0 {
				n.State = collector.NodeLive
			} else {
				n.State = collector.NodeUnknown
				earlier = append(earlier, n.ID)
			}
		case !stopped.IsZero() && !stopped.After(at):
			n.StoppedAt, n.LastSeen = stopped, lastSeen
			n.State = collector.NodeStopped
		case !lastSeen.Before(at):
			n.State = collector.NodeLive // seen again later in this lifetime
		default:
			n.LastSeen, n.LastSeenAge = lastSeen, at.Sub(lastSeen)
			n.State = n.JudgeState(collector.DefaultTrustWindow)
		}
		n.Live = n.State == collector.NodeLive
		out = append(out, n)
	}
	if len(earlier) > 0 {
		*notes = append(*notes, fmt.Sprintf("%d node(s) registered again after this instant (%s): their state then is unknown unless they held a term",
			len(earlier), joinShort(earlier, 5)))
	}
	return out
}

// joinShort joins the first n of xs, counting the rest.
func joinShort(xs []string, n int) string {
	s := ""
	for i, x := range xs {
		if i == n {
			return s + fmt.Sprintf(" +%d more", len(xs)-n)
		}
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}

// termsAt is the terms begun by the instant, newest first
// (collector.DefaultRecentTerms of them, plus every term of the window's
// scopes that was open then), each as it stood then: a term that ended later
// is open, held for so far.
func (h *History) termsAt(at time.Time) []collector.Term {
	var out []collector.Term
	for _, ts := range h.terms {
		for _, t := range ts {
			if t.AcquiredAt.After(at) {
				break
			}
			if t.Open() || t.ReleasedAt.After(at) {
				t.ReleasedAt, t.EndedBy, t.HandedTo = time.Time{}, "", ""
				t.HeldFor = at.Sub(t.AcquiredAt)
			} else {
				t.HeldFor = t.ReleasedAt.Sub(t.AcquiredAt)
			}
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b collector.Term) int {
		return cmp.Or(b.AcquiredAt.Compare(a.AcquiredAt), cmp.Compare(b.ID, a.ID))
	})
	if len(out) > collector.DefaultRecentTerms*4 {
		out = out[:collector.DefaultRecentTerms*4]
	}
	return out
}

// Transitions is every instant in the window at which the replayed picture
// changes, sorted, each once.
func (h *History) Transitions() []time.Time {
	var ts []time.Time
	add := func(t time.Time) {
		if !t.IsZero() && h.Contains(t) {
			ts = append(ts, t)
		}
	}
	for _, sc := range h.scopes {
		terms := h.terms[sc.Name]
		for i, t := range terms {
			add(t.AcquiredAt)
			add(t.ReleasedAt)
			if sign := h.lastSign(&sc, terms, i); !sign.IsZero() && (t.Open() || sign.Before(t.ReleasedAt)) {
				if w := sign.Add(trustWindow(&sc)); t.Open() || w.Before(t.ReleasedAt) {
					add(w.Add(time.Millisecond)) // the first instant it no longer led
				}
			}
		}
	}
	for _, a := range h.audit {
		add(a.At)
	}
	for _, n := range h.nodes {
		add(n.Registered)
		add(n.StoppedAt)
		if n.StoppedAt.IsZero() && n.LastSeen.Before(h.DBNow) {
			add(n.LastSeen.Add(time.Millisecond)) // the first instant after its last sighting
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(ts, func(a, b time.Time) bool { return a.Equal(b) })
}

// Prev is the last transition before at: in the window, else Before (zero:
// none).
func (h *History) Prev(at time.Time) time.Time {
	ts := h.Transitions()
	i, _ := slices.BinarySearchFunc(ts, at, func(a, b time.Time) int { return a.Compare(b) })
	if i > 0 {
		return ts[i-1]
	}
	return h.Before
}

// Next is the first transition after at: in the window, else After (zero:
// none).
func (h *History) Next(at time.Time) time.Time {
	ts := h.Transitions()
	i, found := slices.BinarySearchFunc(ts, at, func(a, b time.Time) int { return a.Compare(b) })
	if found {
		i++
	}
	if i < len(ts) {
		return ts[i]
	}
	return h.After
}

// Events is the last n events of the window up to the instant, oldest first:
// the audit rows (as the collector maps them) and the registrations and clean
// stops of nodes' current lifetimes.
func (h *History) Events(at time.Time, n int) []collector.Event {
	var evs []collector.Event
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if a.isEvent {
			evs = append(evs, a.event)
		}
	}
	for _, rn := range h.nodes {
		if h.Contains(rn.Registered) && !rn.Registered.After(at) {
			evs = append(evs, collector.Event{At: rn.Registered, Kind: collector.EventNodeJoined, Node: rn.ID, Detail: "registered (" + rn.Hostname + ")"})
		}
		if !rn.StoppedAt.IsZero() && h.Contains(rn.StoppedAt) && !rn.StoppedAt.After(at) {
			evs = append(evs, collector.Event{At: rn.StoppedAt, Kind: collector.EventNodeLeft, Node: rn.ID, Reason: "stopped"})
		}
	}
	slices.SortStableFunc(evs, func(a, b collector.Event) int { return a.At.Compare(b.At) })
	if n > 0 && len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	return evs
}
