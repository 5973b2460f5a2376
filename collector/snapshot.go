package collector

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pgleader/pgleader/internal/human"
)

// apply turns one read into the next snapshot and the events between the last
// snapshot and it. now is the collector's clock at the start of the read; every
// age is computed in database time (r.Now), every duration the collector tracks
// itself (leaderless, grace, Since) in collector time.
func (st *state) apply(cfg *Config, r *dbRead, now time.Time, h Health) (*Snapshot, []Event, []Holder) {
	first := st.reads == 0
	st.reads++
	st.lastOK, st.downSince = now, time.Time{}
	var evs []Event
	evs = append(evs, st.sourceChange(h.Source, now)...)
	evs = append(evs, st.timelineChange(r.Timeline, now)...)
	if ev, reset := st.auditReset(r); reset {
		evs = append(evs, ev) // this read's audit rows are of the old ids: the next read replays
	} else {
		evs = append(evs, st.pollAudit(r)...)
	}
	st.noteTerms(r)
	st.behind = st.checkBehind(r, now)

	nodes, nodeEvs := st.applyNodes(cfg, r, now, first)
	evs = append(evs, nodeEvs...)
	byID := make(map[string]*Node, len(nodes))
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	ro := newRoster(nodes)

	var findings []finding
	scopes := make([]Scope, 0, len(r.Scopes))
	seen := map[string]bool{}
	foreign := map[string][]ForeignSession{}
	for _, i := range r.Interference {
		foreign[i.Scope] = append(foreign[i.Scope], i.ForeignSession)
	}
	retired := 0
	idle := map[string]bool{}
	for _, row := range r.Scopes {
		if !row.RetiredAt.IsZero() {
			retired++ // out of the views and the checks; its history stays
			continue
		}
		seen[row.Name] = true
		m := st.scopes[row.Name]
		isNew := m == nil
		if isNew {
			m = &scopeMem{}
			st.scopes[row.Name] = m
		}
		sc := buildScope(r, row, ro, byID)
		if row.Mode != "lease" { // a lock on a lease-mode scope's key blocks nobody
			sc.Interference = foreign[row.Name]
		}
		idle[row.Name] = isIdle(row, &sc, ro)
		st.trackLeaderless(&sc, row, m, r.Now, now, isNew)
		findings = append(findings, st.checkScope(cfg, r, row, &sc, m, ro, byID)...)
		if ev, ok := heartbeatLate(&sc, m, now); ok {
			evs = append(evs, ev)
		}
		scopes = append(scopes, sc)
	}
	for name := range st.scopes {
		if !seen[name] {
			delete(st.scopes, name)
		}
	}
	findings = append(findings, checkNodes(cfg, nodes)...)
	findings = append(findings, st.checkFence(cfg, r.Now)...)
	if f, ok := checkLockPressure(cfg, r); ok {
		findings = append(findings, f)
	}
	if f, ok := checkNotifyQueue(cfg, r); ok {
		findings = append(findings, f)
	}
	findings = append(findings, checkUnboundLeaders(r)...)

	alerts := st.settle(findings, now)
	byScope := map[string][]Alert{} // in the alerts' order
	for _, a := range alerts {
		if a.Scope != "" {
			byScope[a.Scope] = append(byScope[a.Scope], a)
		}
	}
	var orders []Holder
	for i := range scopes {
		sc := &scopes[i]
		sc.Alerts = byScope[sc.Name]
		sc.Verdict = verdict(sc, st.scopes[sc.Name].lateEpoch != 0, idle[sc.Name])
		if o, ok := st.evictOrder(cfg, sc, now); ok {
			orders = append(orders, o)
		}
	}
	evs = append(evs, st.alertChanges(alerts, now)...)

	// What a node reports leading (nodes.leads) lags when it froze or lost its
	// session; the snapshot shows what holds: the scopes whose open term and lock
	// are its. The checks above used the reports.
	leading := map[string][]string{}
	for _, sc := range scopes {
		if sc.HasLeader() {
			leading[sc.Leader] = append(leading[sc.Leader], sc.Name)
		}
	}
	for i := range nodes {
		nodes[i].Reported = nodes[i].Leads
		nodes[i].Leads = leading[nodes[i].ID]
		if nodes[i].Leads == nil {
			nodes[i].Leads = []string{}
		}
	}

	terms := withWindow(r.Terms, r.WindowTerms)
	settleTerms(terms, scopes, r.Now)
	if terms == nil {
		terms = []Term{}
	}
	st.snapSeq++
	snap := &Snapshot{
		Seq: st.snapSeq, At: now, DBTime: r.Now, Scopes: scopes, Nodes: nodes, Terms: terms, Alerts: alerts,
		Locks:    LockStats{Advisory: r.Advisory, Waiting: r.Waiting, Capacity: r.Capacity, Used: r.Used, NotifyQueue: r.NotifyQ},
		Timeline: st.timeline, EpochFloor: EpochFloor(st.timeline), Retired: retired,
		FenceRejected: maps.Clone(st.fenceCount), Health: h,
	}
	st.last = snap
	return snap, evs, orders
}

// down builds the snapshot re-published while the database cannot be read: the
// last good one with the new health and, after CollectorDownAfter,
// AlertCollectorDown. It returns nil before the first successful read.
func (st *state) down(cfg *Config, now time.Time, h Health) (*Snapshot, []Event) {
	if st.downSince.IsZero() {
		st.downSince = now
	}
	evs := st.sourceChange(h.Source, now)
	if st.last == nil {
		return nil, evs
	}
	var alerts []Alert
	for _, a := range st.last.Alerts {
		if a.Kind != AlertCollectorDown {
			alerts = append(alerts, a)
		}
	}
	if quiet := now.Sub(st.lastOK); quiet >= cfg.CollectorDownAfter {
		a := collectorDown(h, quiet, st.downSince)
		if prev, ok := st.active[a.Key()]; ok {
			a.Since = prev.Since
		}
		alerts = append(alerts, a)
	}
	sortAlerts(alerts)
	evs = append(evs, st.alertChanges(alerts, now)...)
	snap := *st.last
	st.snapSeq++
	snap.Seq, snap.Alerts, snap.Health = st.snapSeq, alerts, h
	return &snap, evs
}

func (st *state) sourceChange(src Source, now time.Time) []Event {
	prev := st.source
	st.source = src
	if prev == "" || prev == src {
		return nil
	}
	return []Event{{At: now, Kind: EventSourceChanged, Detail: string(prev) + " → " + string(src)}}
}

// timelineChange reports a new WAL timeline: the database failed over to a promoted
// standby (or was restored to a point in time). What the old primary committed
// after its standby's last received WAL is not in this database: the collector
// shows the history the new primary has, and says so once.
func (st *state) timelineChange(tl int64, now time.Time) []Event {
	prev := st.timeline
	if tl == 0 || tl == prev {
		return nil
	}
	st.timeline = tl
	if prev == 0 {
		return nil
	}
	return []Event{{At: now, Kind: EventFailover, Epoch: EpochFloor(tl), Detail: fmt.Sprintf(
		"the database failed over: WAL timeline %d → %d; every epoch granted from now on is above %d; terms and writes the old primary committed after its standby's last received WAL are not in this history",
		prev, tl, EpochFloor(tl))}}
}

// EpochFloor is the floor of a WAL timeline's epochs (schema version 6): every
// epoch granted on timeline tl is above (tl − 1)·2^40. 0 for timeline 1 or unknown.
func EpochFloor(tl int64) int64 {
	if tl <= 1 {
		return 0
	}
	return (tl - 1) << 40
}

// applyNodes derives LastSeenAge, State and Live, and the joined/left events
// (none on the first read: it only learns the baseline). A node leaves when it
// goes down or stops, and comes back when it is live or late again: a late node
// has not left (it may answer its next heartbeat), though it no longer counts as
// a follower.
func (st *state) applyNodes(cfg *Config, r *dbRead, now time.Time, first bool) ([]Node, []Event) {
	nodes := r.Nodes
	if nodes == nil {
		nodes = []Node{}
	}
	var evs []Event
	seen := make(map[string]bool, len(nodes))
	// Nodes that stopped, or went down, longer than NodeRetention ago leave
	// the views, the checks and the metrics (pgleader node forget removes one
	// at once): a restart under a generated id adds a node every time.
	nodes = slices.DeleteFunc(nodes, func(n Node) bool {
		return !n.LastSeen.IsZero() && r.Now.Sub(n.LastSeen) > cfg.NodeRetention
	})
	for i := range nodes {
		n := &nodes[i]
		seen[n.ID] = true
		n.LastSeenAge = max(0, r.Now.Sub(n.LastSeen))
		n.State = n.JudgeState(cfg.StaleNodeAfter)
		n.Live = n.State == NodeLive
		if sv := n.Supervisor; sv != nil && !n.Live {
			// A node that is not live says nothing of its child now.
			c := *sv
			c.State, c.PID = "unknown", 0
			n.Supervisor = &c
		}
		up := n.State == NodeLive || n.State == NodeLate
		prev, known := st.nodes[n.ID]
		st.nodes[n.ID] = nodeMem{live: up, startedAt: n.StartedAt}
		if first {
			continue
		}
		restarted := known && !n.StartedAt.Equal(prev.startedAt)
		switch {
		case up && !known:
			evs = append(evs, Event{At: n.StartedAt, Kind: EventNodeJoined, Node: n.ID, Reason: "registered"})
		case up && (!prev.live || restarted):
			ev := Event{At: n.LastSeen, Kind: EventNodeJoined, Node: n.ID, Reason: "came back"}
			if restarted {
				ev.At, ev.Reason = n.StartedAt, "restarted"
			}
			evs = append(evs, ev)
		case !up && known && prev.live:
			switch {
			case !n.StoppedAt.IsZero():
				evs = append(evs, Event{At: n.StoppedAt, Kind: EventNodeLeft, Node: n.ID, Reason: "stopped"})
			case n.SessionAlive != nil && !*n.SessionAlive:
				evs = append(evs, Event{At: now, Kind: EventNodeLeft, Node: n.ID, Reason: "down",
					Detail: "its leadership session ended; last seen " + human.Duration(n.LastSeenAge) + " ago"})
			default:
				evs = append(evs, Event{At: now, Kind: EventNodeLeft, Node: n.ID, Reason: "down",
					Detail: "silent for " + human.Duration(n.LastSeenAge) + ", longer than its session lease"})
			}
		}
	}
	for id, prev := range st.nodes {
		if !seen[id] {
			if prev.live && !first {
				evs = append(evs, Event{At: now, Kind: EventNodeLeft, Node: id, Reason: "removed"})
			}
			delete(st.nodes, id)
		}
	}
	return nodes, evs
}

// roster indexes the nodes by scope: who campaigns for it (Node.Scopes) and
// who reports leading it (Node.Leads as read, before the snapshot replaces
// them), each in node order. The per-scope work of a read then costs the
// scope's nodes, not every node's whole list: at 1,000 scopes and 10 nodes,
// looking each scope up in each node's list took 10 million string compares
// a read.
type roster struct {
	candidates map[string][]*Node
	claimants  map[string][]*Node
}

func newRoster(nodes []Node) roster {
	ro := roster{candidates: map[string][]*Node{}, claimants: map[string][]*Node{}}
	add := func(m map[string][]*Node, scope string, n *Node) {
		if l := m[scope]; len(l) > 0 && l[len(l)-1] == n {
			return // listed twice by one node: it counts once
		}
		m[scope] = append(m[scope], n)
	}
	for i := range nodes {
		n := &nodes[i]
		for _, s := range n.Scopes {
			add(ro.candidates, s, n)
		}
		for _, s := range n.Leads {
			add(ro.claimants, s, n)
		}
	}
	return ro
}

// buildScope fills the scope's fields from its row and the nodes.
func buildScope(r *dbRead, row scopeRow, ro roster, byID map[string]*Node) Scope {
	sc := Scope{Name: row.Name, LockKey: row.LockKey, Epoch: row.Epoch, HolderPID: row.HolderPID, Mode: row.Mode, BoundTo: row.BoundTo,
		LockPIDs: row.LockPIDs, Waiters: row.Waiters, LastHeartbeat: row.LastHeartbeat,
		ReleasedAt: row.ReleasedAt, Timing: row.Timing, Changes: row.Changes, Followers: []string{}}
	if row.open() {
		sc.Leader = row.Holder
		sc.AcquiredAt = row.AcquiredAt
		sc.Tenure = max(0, r.Now.Sub(row.AcquiredAt))
		if n := byID[row.Holder]; n != nil {
			sc.LeaderHost = n.Hostname
		} else if row.Latest != nil && row.Latest.Holder == row.Holder {
			sc.LeaderHost = row.Latest.Hostname
		}
	}
	if !row.LastHeartbeat.IsZero() {
		sc.HeartbeatAge = max(0, r.Now.Sub(row.LastHeartbeat))
	}
	if t := row.Latest; t != nil && t.Open() {
		open := *t
		markOpen(&open, &sc, r.Now)
		open.HeldFor = heldFor(open, r.Now)
		sc.OpenTerm = &open
	}
	for _, n := range ro.candidates[row.Name] {
		if n.Live && n.ID != sc.Leader {
			sc.Followers = append(sc.Followers, n.ID)
		}
	}
	if row.HandoverTo != "" && row.HandoverDeadline.After(r.Now) {
		sc.HandoverTo, sc.HandoverDeadline = row.HandoverTo, row.HandoverDeadline
	}
	sc.LeaderLive = sc.HasLeader()
	return sc
}

// isIdle reports a scope nobody is meant to lead: no leader, no term left open,
// no squatter, and none of its candidates alive or gone without stopping
// cleanly (they all stopped, or dropped it from their configuration).
func isIdle(row scopeRow, sc *Scope, ro roster) bool {
	if sc.HasLeader() || row.open() || len(sc.Interference) > 0 || len(row.LockPIDs) > 0 {
		return false
	}
	for _, n := range ro.candidates[row.Name] {
		if n.Live || n.StoppedAt.IsZero() {
			return false
		}
	}
	return true
}

// withWindow is the snapshot's terms: the recent ones (newest first, by id)
// and those of the window that are not among them, in the same order.
func withWindow(recent, window []Term) []Term {
	if len(window) == 0 {
		return recent
	}
	seen := make(map[int64]bool, len(recent))
	for _, t := range recent {
		seen[t.ID] = true
	}
	out := recent
	for _, t := range window {
		if !seen[t.ID] {
			seen[t.ID] = true
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Term) int { return cmp.Compare(b.ID, a.ID) })
	return out
}

// settleTerms gives each term its last sign of life, whether an open one's
// holder is silent, and how long it was held. An open term of a scope led now
// is held until dbNow; one whose holder leads no more (the scope shows no
// leader, or another epoch) is silent since its last heartbeat. A closed term
// without a recorded last sign (a schema before 17) takes it from its
// successor's handover gap when the successor is in terms.
func settleTerms(terms []Term, scopes []Scope, dbNow time.Time) {
	byName := make(map[string]*Scope, len(scopes))
	for i := range scopes {
		byName[scopes[i].Name] = &scopes[i]
	}
	next := map[string]*Term{} // terms are newest first: the successor is seen first
	for i := range terms {
		t := &terms[i]
		switch {
		case t.Open():
			markOpen(t, byName[t.Scope], dbNow)
		case t.LastSign.IsZero():
			if s := next[t.Scope]; s != nil && s.Epoch > t.Epoch && s.HandoverGap > 0 {
				t.LastSign = s.AcquiredAt.Add(-s.HandoverGap)
			}
		}
		t.HeldFor = heldFor(*t, dbNow)
		next[t.Scope] = t
	}
}

// markOpen sets an open term's last sign of life and whether its holder is
// silent: led now (the holder holds the scope and heartbeat within its trust
// window), its last sign is dbNow; else it is the last heartbeat on record.
func markOpen(t *Term, sc *Scope, dbNow time.Time) {
	if sc != nil && sc.Epoch == t.Epoch && sc.leadsNow() {
		t.LastSign, t.Silent = dbNow, false
		return
	}
	t.Silent = true
	if sc != nil && sc.Epoch == t.Epoch && !sc.LastHeartbeat.IsZero() {
		t.LastSign = sc.LastHeartbeat
	}
}

// heldFor is how long t's holder led (Term.HeldFor).
func heldFor(t Term, dbNow time.Time) time.Duration {
	switch {
	case t.Open() && !t.Silent:
		return max(0, dbNow.Sub(t.AcquiredAt))
	case !t.LastSign.IsZero():
		end := t.LastSign
		if !t.ReleasedAt.IsZero() && t.ReleasedAt.Before(end) {
			end = t.ReleasedAt
		}
		return max(0, end.Sub(t.AcquiredAt))
	case t.Open():
		return 0 // silent, and never seen: nothing known to be held
	}
	return max(0, t.ReleasedAt.Sub(t.AcquiredAt))
}

// trackLeaderless keeps the time since the scope last had a leader. A scope seen
// for the first time without a leader takes that time from the database — since
// its clean release, or since the dead holder's last heartbeat — so a collector
// restarted during an outage does not restart the clock; a scope never led counts
// from the moment the collector first saw it.
func (st *state) trackLeaderless(sc *Scope, row scopeRow, m *scopeMem, dbNow, now time.Time, isNew bool) {
	if sc.HasLeader() {
		m.leaderlessSince = time.Time{}
		return
	}
	if m.leaderlessSince.IsZero() {
		m.leaderlessSince = now
		if isNew {
			var ref time.Time
			switch {
			case !row.ReleasedAt.IsZero():
				ref = row.ReleasedAt
			case row.open():
				ref = row.LastHeartbeat
			}
			if !ref.IsZero() && dbNow.After(ref) {
				m.leaderlessSince = now.Add(-dbNow.Sub(ref))
			}
		}
	}
	sc.LeaderlessFor = max(0, now.Sub(m.leaderlessSince))
}
