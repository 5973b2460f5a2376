package tui

import (
	"fmt"
	"slices"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
)

// The fault fixtures: one cluster — node-1, node-2, node-3; billing and ledger
// have all three as candidates, reports only node-1 and node-2 — seen by the
// collector at the moments of a fault. Before it, node-1 leads billing (epoch
// 42) and reports (epoch 7), node-2 leads ledger (epoch 19). Every snapshot is
// read at t0; the fault happened ago before, so the moments differ in ago.
// The builder derives what the collector derives (ages, node states,
// followers, Leads, verdicts) by the collector's rules, so a fixture states
// only the facts of its moment: who holds which lock, who was last seen when,
// which term ended how, which alerts fire.

// faultCands are the candidates of each scope.
var faultCands = map[string][]string{
	"billing": {"node-1", "node-2", "node-3"},
	"ledger":  {"node-1", "node-2", "node-3"},
	"reports": {"node-1", "node-2"},
}

// faultCluster builds one snapshot of the fault cluster.
type faultCluster struct {
	f   time.Time // the fault
	now time.Time // the read (database and collector time)
	s   *collector.Snapshot
	// reported: scopes a node's last heartbeat claimed (nodes.leads); set for
	// a node that stopped heartbeating, else its Leads.
	reported map[string][]string
}

func newFaultCluster(seq uint64, ago time.Duration) *faultCluster {
	return newFaultClusterRead(seq, t0.Add(-ago), t0)
}

// newFaultClusterRead is the cluster as read at read, the fault at f (which
// may come after the read: the last good read before it).
func newFaultClusterRead(seq uint64, f, read time.Time) *faultCluster {
	c := &faultCluster{f: f, now: read, reported: map[string][]string{}}
	h := health()
	h.LastPoll = read
	s := &collector.Snapshot{Seq: seq, At: read, DBTime: read, Health: h, FenceRejected: map[string]uint64{},
		Alerts: []collector.Alert{}, Locks: collector.LockStats{Advisory: 6, Waiting: 5, Capacity: 12800}, Timeline: 1}
	for i, id := range []string{"node-1", "node-2", "node-3"} {
		alive := true
		n := collector.Node{ID: id, Hostname: "host-" + id[5:], OSPID: 31001 + i, Version: "0.4.0",
			StartedAt: f.Add(-2 * time.Hour), LastSeen: read.Add(-300 * time.Millisecond), BackendPID: 7001 + i,
			Timing: timing, SessionAlive: &alive, Mode: "lock", Priority: 1}
		for _, sc := range []string{"billing", "ledger", "reports"} {
			if slices.Contains(faultCands[sc], id) {
				n.Scopes = append(n.Scopes, sc)
			}
		}
		s.Nodes = append(s.Nodes, n)
	}
	c.s = s
	// The terms before the fault, newest first.
	c.open("reports", 7, "node-1", f.Add(-70*time.Minute), 0)
	c.open("ledger", 19, "node-2", f.Add(-20*time.Minute), 12*time.Millisecond)
	c.s.Terms = append(c.s.Terms, collector.Term{ID: 41, Scope: "billing", Epoch: 41, Holder: "node-2", Hostname: "host-2",
		AcquiredAt: f.Add(-9 * time.Minute), ReleasedAt: f.Add(-3 * time.Minute), EndedBy: "resigned", HandoverGap: 2 * time.Millisecond})
	c.open("billing", 42, "node-1", f.Add(-3*time.Minute+2*time.Millisecond), 2*time.Millisecond)
	return c
}

func (c *faultCluster) node(id string) *collector.Node {
	for i := range c.s.Nodes {
		if c.s.Nodes[i].ID == id {
			return &c.s.Nodes[i]
		}
	}
	panic("no node " + id)
}

func (c *faultCluster) scope(name string) *collector.Scope {
	for i := range c.s.Scopes {
		if c.s.Scopes[i].Name == name {
			return &c.s.Scopes[i]
		}
	}
	panic("no scope " + name)
}

// open starts a term of holder at, holding the lock, heartbeating, and puts
// it first in Terms.
func (c *faultCluster) open(scope string, epoch int64, holder string, at time.Time, gap time.Duration) {
	n := c.node(holder)
	t := collector.Term{ID: epoch, Scope: scope, Epoch: epoch, Holder: holder, Hostname: n.Hostname, HolderPID: n.BackendPID,
		AcquiredAt: at, HandoverGap: gap}
	c.s.Terms = append([]collector.Term{t}, c.s.Terms...)
	sc := collector.Scope{Name: scope, LockKey: int64(len(scope)) * 7919, Mode: "lock", Timing: timing, Changes: 1}
	found := false
	for i := range c.s.Scopes {
		if c.s.Scopes[i].Name == scope {
			sc, found = c.s.Scopes[i], true
		}
	}
	sc.Epoch, sc.Leader, sc.LeaderHost, sc.HolderPID, sc.LockPIDs = epoch, holder, n.Hostname, n.BackendPID, []int{n.BackendPID}
	sc.AcquiredAt, sc.ReleasedAt, sc.LastHeartbeat, sc.HandoverTo, sc.HandoverDeadline = at, time.Time{}, c.now.Add(-200*time.Millisecond), "", time.Time{}
	sc.LeaderlessFor = 0
	if !found {
		c.s.Scopes = append(c.s.Scopes, sc)
		slices.SortFunc(c.s.Scopes, func(a, b collector.Scope) int { return compareStrings(a.Name, b.Name) })
		return
	}
	*c.scope(scope) = sc
}

// lose: the holder's session is gone (its lock is free) and the term is
// still open on record; the collector has seen the scope leaderless for
// leaderless. lastHB is the holder's last heartbeat.
func (c *faultCluster) lose(scope string, lastHB time.Time, leaderless time.Duration) {
	sc := c.scope(scope)
	sc.LockPIDs, sc.LastHeartbeat, sc.LeaderlessFor = nil, lastHB, leaderless
}

// hold: the holder still holds the lock, its last heartbeat at lastHB.
func (c *faultCluster) hold(scope string, lastHB time.Time) { c.scope(scope).LastHeartbeat = lastHB }

// release: the holder released the term at at (resign, handover).
func (c *faultCluster) release(scope string, at time.Time, reason collector.Reason, to string, leaderless time.Duration) {
	sc := c.scope(scope)
	c.endTerm(scope, at, reason, to)
	sc.Leader, sc.LeaderHost, sc.HolderPID, sc.LockPIDs, sc.AcquiredAt = "", "", 0, nil, time.Time{}
	sc.ReleasedAt, sc.LeaderlessFor = at, leaderless
}

// elect: holder claims the scope at at; an open term it finds ends as ended,
// closed at at by the claim.
func (c *faultCluster) elect(scope, holder string, epoch int64, at time.Time, ended collector.Reason, gap time.Duration) {
	if t := c.openTerm(scope); t != nil {
		c.endTerm(scope, at, ended, "")
	}
	c.open(scope, epoch, holder, at, gap)
	c.scope(scope).Changes++
}

func (c *faultCluster) openTerm(scope string) *collector.Term {
	for i := range c.s.Terms {
		if t := &c.s.Terms[i]; t.Scope == scope && t.Open() {
			return t
		}
	}
	return nil
}

func (c *faultCluster) endTerm(scope string, at time.Time, reason collector.Reason, to string) {
	t := c.openTerm(scope)
	t.ReleasedAt, t.EndedBy, t.HandedTo = at, reason, to
}

// silent: the node's last heartbeat landed at lastSeen; sessionGone says
// whether the server has ended its leadership session (beacon lock free).
// Its last heartbeat claimed the scopes it led then.
func (c *faultCluster) silent(id string, lastSeen time.Time, sessionGone bool) {
	n := c.node(id)
	var led []string
	for _, sc := range c.s.Scopes {
		if sc.Leader == id {
			led = append(led, sc.Name)
		}
	}
	if _, ok := c.reported[id]; !ok {
		c.reported[id] = led
	}
	n.LastSeen = lastSeen
	alive := !sessionGone
	n.SessionAlive = &alive
}

func (c *faultCluster) alert(a collector.Alert) {
	a.Runbook = "docs/runbooks.md#" + string(a.Kind)
	c.s.Alerts = append(c.s.Alerts, a)
}

// noFollower is the collector's no_follower alert for scope.
func (c *faultCluster) noFollower(scope string, since time.Time, gone ...string) {
	sc := c.scope(scope)
	c.alert(collector.Alert{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: scope, Node: sc.Leader,
		Summary: fmt.Sprintf("%s is led by %s with no live follower: %s", scope, sc.Leader, joinComma(gone)),
		Hint:    "one more failure leaves the scope without a leader: bring the late or down candidates back (pgleader status lists them), or start another",
		Since:   since})
}

// staleNode is the collector's stale_node alert for id.
func (c *faultCluster) staleNode(id string, since time.Time) {
	n := c.node(id)
	c.alert(collector.Alert{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: id,
		Summary: fmt.Sprintf("node %s (%s, os pid %d) was last seen %s ago and did not stop cleanly", id, n.Hostname, n.OSPID, human.Duration(c.now.Sub(n.LastSeen))),
		Hint:    fmt.Sprintf("the process died or cannot reach the database: check it on %s; if it is gone for good, forget it: pgleader node forget '%s'", n.Hostname, id),
		Since:   since})
}

// disconnected turns the snapshot into what the collector re-publishes while
// it cannot read (at t0): the last good data, the error since since (the
// first failed read).
func (c *faultCluster) disconnected(err string, since time.Time) {
	c.s.Health.Source = collector.SourceDisconnected
	c.s.Health.LastError, c.s.Health.LastErrorAt = err, since
	c.s.Health.PollErrors = uint64(t0.Sub(since)/time.Second) + 1
}

// snapshot derives what the collector derives and returns the snapshot.
func (c *faultCluster) snapshot() *collector.Snapshot {
	s := c.s
	now := s.DBTime
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.LastSeenAge = max(0, now.Sub(n.LastSeen))
		switch {
		case !n.StoppedAt.IsZero():
			n.State = collector.NodeStopped
		case n.SessionAlive != nil && !*n.SessionAlive, n.LastSeenAge > n.Timing.SessionLease:
			n.State = collector.NodeDown
		case n.LastSeenAge > n.Timing.TrustWindow:
			n.State = collector.NodeLate
		default:
			n.State = collector.NodeLive
		}
		n.Live = n.State == collector.NodeLive
	}
	leading := map[string][]string{}
	for i := range s.Scopes {
		sc := &s.Scopes[i]
		sc.Tenure, sc.HeartbeatAge = 0, 0
		if sc.Leader != "" {
			sc.Tenure = now.Sub(sc.AcquiredAt)
		}
		if !sc.LastHeartbeat.IsZero() {
			sc.HeartbeatAge = now.Sub(sc.LastHeartbeat)
		}
		if t := c.openTerm(sc.Name); t != nil {
			open := *t
			open.HeldFor = now.Sub(open.AcquiredAt)
			sc.OpenTerm = &open
		} else {
			sc.OpenTerm = nil
		}
		sc.LeaderLive = sc.HasLeader()
		sc.Followers = []string{}
		for _, id := range faultCands[sc.Name] {
			if n := c.node(id); n.Live && id != sc.Leader {
				sc.Followers = append(sc.Followers, id)
			}
		}
		sc.Waiters = len(sc.Followers)
		sc.Alerts = nil
		for _, a := range s.Alerts {
			if a.Scope == sc.Name {
				sc.Alerts = append(sc.Alerts, a)
			}
		}
		late := sc.HasLeader() && sc.HeartbeatAge > 2*sc.Timing.HeartbeatInterval
		switch {
		case !sc.HasLeader():
			sc.Verdict = collector.VerdictNoLeader
		case len(sc.Alerts) > 0 || late:
			sc.Verdict = collector.VerdictDegraded
		default:
			sc.Verdict = collector.VerdictOK
		}
		if sc.HasLeader() {
			leading[sc.Leader] = append(leading[sc.Leader], sc.Name)
		}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.Leads = leading[n.ID]
		if n.Leads == nil {
			n.Leads = []string{}
		}
		n.Reported = n.Leads
		if r, ok := c.reported[n.ID]; ok {
			n.Reported = r
		}
	}
	advisory := 0
	for _, sc := range s.Scopes {
		advisory += len(sc.LockPIDs)
	}
	for _, n := range s.Nodes {
		if n.SessionAlive != nil && *n.SessionAlive {
			advisory++ // its beacon lock
		}
	}
	s.Locks.Advisory = advisory
	for i := range s.Terms {
		t := &s.Terms[i]
		if t.Open() {
			t.HeldFor = now.Sub(t.AcquiredAt)
		} else {
			t.HeldFor = t.ReleasedAt.Sub(t.AcquiredAt)
		}
	}
	slices.SortStableFunc(s.Terms, func(a, b collector.Term) int { return b.AcquiredAt.Compare(a.AcquiredAt) })
	slices.SortStableFunc(s.Alerts, func(a, b collector.Alert) int {
		if (a.Severity == collector.SeverityCritical) != (b.Severity == collector.SeverityCritical) {
			if a.Severity == collector.SeverityCritical {
				return -1
			}
			return 1
		}
		return compareStrings(string(a.Kind)+a.Scope+a.Node, string(b.Kind)+b.Scope+b.Node)
	})
	return s
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// faultEvents are the events of the fault cluster: f is the fault.
type faultEvents struct {
	f   time.Time
	evs []collector.Event
}

func (e *faultEvents) add(d time.Duration, ev collector.Event) *faultEvents {
	ev.At = e.f.Add(d)
	ev.Seq = uint64(len(e.evs) + 1)
	e.evs = append(e.evs, ev)
	return e
}

func (e *faultEvents) fault(d time.Duration, detail string) *faultEvents {
	return e.add(d, collector.Event{Kind: eventFault, Scope: "billing", Detail: detail})
}

func (e *faultEvents) closed(d time.Duration, scope, holder string, epoch int64, reason collector.Reason, successor string) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventTermClosed, Scope: scope, Node: holder, Epoch: epoch, Reason: string(reason),
		Detail: "closed by successor " + successor})
}

func (e *faultEvents) elected(d time.Duration, scope, holder string, epoch int64, prev string, prevEpoch int64) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventElected, Scope: scope, Node: holder, Epoch: epoch, PrevHolder: prev,
		Detail: fmt.Sprintf("after %s (epoch %d)", prev, prevEpoch)})
}

func (e *faultEvents) released(d time.Duration, scope, holder string, epoch int64, reason collector.Reason, to string) *faultEvents {
	ev := collector.Event{Kind: collector.EventReleased, Scope: scope, Node: holder, Epoch: epoch, Reason: string(reason)}
	if to != "" {
		ev.Detail = "to " + to
	}
	return e.add(d, ev)
}

func (e *faultEvents) nodeLeft(d time.Duration, id, detail string) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventNodeLeft, Node: id, Reason: "down", Detail: detail})
}

func (e *faultEvents) nodeBack(d time.Duration, id, reason string) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventNodeJoined, Node: id, Reason: reason})
}

func (e *faultEvents) late(d time.Duration, scope, leader string, epoch int64, age time.Duration) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventHeartbeatLate, Scope: scope, Node: leader, Epoch: epoch,
		Detail: fmt.Sprintf("last heartbeat %s ago, interval %s", human.Duration(age), human.Duration(timing.HeartbeatInterval))})
}

func (e *faultEvents) firing(d time.Duration, a collector.Alert) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventAlertFiring, Scope: a.Scope, Node: a.Node, Alert: &a})
}

func (e *faultEvents) resolved(d time.Duration, a collector.Alert) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventAlertResolved, Scope: a.Scope, Node: a.Node, Alert: &a})
}

func (e *faultEvents) source(d time.Duration, change string) *faultEvents {
	return e.add(d, collector.Event{Kind: collector.EventSourceChanged, Detail: change})
}

// alertOf returns the snapshot's alert of kind on scope/node (for the
// alert_firing events that announced it).
func alertOf(s *collector.Snapshot, kind collector.AlertKind, scope, node string) collector.Alert {
	for _, a := range s.Alerts {
		if a.Kind == kind && a.Scope == scope && a.Node == node {
			return a
		}
	}
	panic(fmt.Sprintf("no %s alert on %q/%q", kind, scope, node))
}
