package tui

import (
	"time"

	"github.com/pgleader/pgleader/collector"
)

// faultMoment is the collector's output at one moment of a fault: the
// snapshots in the order the dashboard received them (the last is current)
// and the events up to then.
type faultMoment struct {
	snaps  []*collector.Snapshot
	events []collector.Event
}

const (
	ms = time.Millisecond
	s1 = time.Second
)

// The faults, each at three moments: during the fault, right after the new
// leader is elected, and settled. node-1 leads billing and reports; the
// fault strikes it.
var faultMoments = map[string]map[string]func() faultMoment{
	"kill9":      {"during": kill9During, "after": kill9After, "settled": kill9Settled},
	"freeze":     {"during": freezeDuring, "after": freezeAfter, "settled": freezeSettled},
	"hung_link":  {"during": hungDuring, "after": hungAfter, "settled": hungSettled},
	"pg_restart": {"during": restartDuring, "after": restartAfter, "settled": restartSettled},
	"db_failover_standby": {"during": standbyDuring, "after": standbyAfter,
		"settled": standbySettled},
	"resign":   {"during": resignDuring, "after": resignAfter, "settled": resignSettled},
	"handover": {"during": handoverDuring, "after": handoverAfter, "settled": handoverSettled},
}

// --- kill -9 of node-1: its sessions end with the process; its successors'
// waits in pg_advisory_lock return within milliseconds (here 74 ms: a loaded
// 2-core demo), and they close its terms as crashed.

func kill9Events(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.fault(0, "kill -9 node-1 (pid 31001, leader of billing, epoch 42)")
	e.nodeLeft(15*ms, "node-1", "its leadership session ended; last seen 215ms ago")
	if upTo < 74*ms {
		return e.evs
	}
	e.closed(74*ms, "billing", "node-1", 42, "crashed", "node-3").elected(74*ms, "billing", "node-3", 43, "node-1", 42)
	e.closed(75*ms, "reports", "node-1", 7, "crashed", "node-2").elected(75*ms, "reports", "node-2", 8, "node-1", 7)
	return e.evs
}

func kill9During() faultMoment {
	c := newFaultCluster(200, 60*ms)
	c.silent("node-1", c.f.Add(-200*ms), true)
	// Seen leaderless first by the read 45 ms ago.
	c.lose("billing", c.f.Add(-200*ms), 45*ms)
	c.lose("reports", c.f.Add(-200*ms), 45*ms)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: kill9Events(c.f, 60*ms)}
}

func kill9Taken(seq uint64, ago time.Duration) *faultCluster {
	c := newFaultCluster(seq, ago)
	c.silent("node-1", c.f.Add(-200*ms), true)
	c.elect("billing", "node-3", 43, c.f.Add(74*ms), "crashed", 274*ms)
	c.elect("reports", "node-2", 8, c.f.Add(75*ms), "crashed", 275*ms)
	c.noFollower("reports", c.f.Add(78*ms), "node-1 down")
	return c
}

func kill9After() faultMoment {
	c := kill9Taken(201, 78*ms)
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: kill9Events(c.f, 78*ms)}
	e.firing(78*ms, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

func kill9Settled() faultMoment {
	c := kill9Taken(245, 45*s1)
	// Nobody restarted it: 30 s after its last heartbeat it is a stale node.
	c.staleNode("node-1", c.f.Add(29800*ms))
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: kill9Events(c.f, 45*s1)}
	e.firing(78*ms, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	e.firing(30*s1, alertOf(s, collector.AlertStaleNode, "", "node-1"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

// --- SIGSTOP of node-1: its heartbeats stop; past its trust window (1.5 s)
// it is late and its gates are closed, but the server keeps its session — and
// so the lock — until its session lease (2 s) ends it; then the successors
// close its terms as heartbeat_timeout. Thawed at 20 s, it rejoins as a
// follower.

func freezeEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.fault(0, "SIGSTOP node-1 (leader of billing): its trust window runs out, then the server drops its session; press Z again to thaw")
	e.late(1200*ms, "billing", "node-1", 42, 1300*ms).late(1200*ms, "reports", "node-1", 7, 1300*ms)
	if upTo < 1905*ms {
		return e.evs
	}
	e.closed(1905*ms, "billing", "node-1", 42, "heartbeat_timeout", "node-3").elected(1905*ms, "billing", "node-3", 43, "node-1", 42)
	e.closed(1906*ms, "reports", "node-1", 7, "heartbeat_timeout", "node-2").elected(1906*ms, "reports", "node-2", 8, "node-1", 7)
	e.nodeLeft(2*s1, "node-1", "its leadership session ended; last seen 2.1s ago")
	return e.evs
}

func freezeDuring() faultMoment {
	c := newFaultCluster(300, 1700*ms)
	c.silent("node-1", c.f.Add(-100*ms), false)
	c.hold("billing", c.f.Add(-100*ms))
	c.hold("reports", c.f.Add(-100*ms))
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: freezeEvents(c.f, 1700*ms)}
}

func freezeTaken(seq uint64, ago time.Duration) *faultCluster {
	c := newFaultCluster(seq, ago)
	c.silent("node-1", c.f.Add(-100*ms), true)
	c.elect("billing", "node-3", 43, c.f.Add(1905*ms), "heartbeat_timeout", 2005*ms)
	c.elect("reports", "node-2", 8, c.f.Add(1906*ms), "heartbeat_timeout", 2006*ms)
	return c
}

func freezeAfter() faultMoment {
	c := freezeTaken(301, 2*s1)
	c.noFollower("reports", c.f.Add(2*s1), "node-1 down")
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: freezeEvents(c.f, 2*s1)}
	e.firing(2*s1, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

func freezeSettled() faultMoment {
	c := freezeTaken(340, 40*s1)
	// Thawed at 20 s: a new leadership session, heartbeating as a follower.
	alive := true
	n := c.node("node-1")
	n.LastSeen, n.SessionAlive, n.BackendPID = c.now.Add(-300*ms), &alive, 7101
	delete(c.reported, "node-1")
	e := &faultEvents{f: c.f, evs: freezeEvents(c.f, 40*s1)}
	nf := collector.Alert{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: "reports", Node: "node-2",
		Summary: "reports is led by node-2 with no live follower: node-1 down", Runbook: "docs/runbooks.md#no_follower"}
	e.firing(2*s1, nf)
	e.fault(20*s1, "SIGCONT node-1: it wakes up, finds its gate closed and rejoins as a follower")
	e.nodeBack(20200*ms, "node-1", "came back").resolved(20200*ms, nf)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: e.evs}
}

// --- hung link: node-1's connections go silent (no FIN, no RST). Its
// heartbeats stop landing; it is late; the server ends its idle session
// after the lease and the successors take over; the terms end as
// lost_connection. Healed at 25 s, it comes back as a follower.

func hungEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.fault(0, "hung the database link of node-1 (leader of billing): no FIN, no RST, just silence; press H again to heal")
	e.late(800*ms, "billing", "node-1", 42, 1100*ms).late(800*ms, "reports", "node-1", 7, 1100*ms)
	if upTo < 1702*ms {
		return e.evs
	}
	e.closed(1702*ms, "billing", "node-1", 42, "lost_connection", "node-3").elected(1702*ms, "billing", "node-3", 43, "node-1", 42)
	e.closed(1703*ms, "reports", "node-1", 7, "lost_connection", "node-2").elected(1703*ms, "reports", "node-2", 8, "node-1", 7)
	e.nodeLeft(1800*ms, "node-1", "its leadership session ended; last seen 2.1s ago")
	return e.evs
}

func hungDuring() faultMoment {
	c := newFaultCluster(400, 1500*ms)
	c.silent("node-1", c.f.Add(-300*ms), false)
	c.hold("billing", c.f.Add(-300*ms))
	c.hold("reports", c.f.Add(-300*ms))
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: hungEvents(c.f, 1500*ms)}
}

func hungTaken(seq uint64, ago time.Duration) *faultCluster {
	c := newFaultCluster(seq, ago)
	c.silent("node-1", c.f.Add(-300*ms), true)
	c.elect("billing", "node-3", 43, c.f.Add(1702*ms), "lost_connection", 2002*ms)
	c.elect("reports", "node-2", 8, c.f.Add(1703*ms), "lost_connection", 2003*ms)
	return c
}

func hungAfter() faultMoment {
	c := hungTaken(401, 1800*ms)
	c.noFollower("reports", c.f.Add(1800*ms), "node-1 down")
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: hungEvents(c.f, 1800*ms)}
	e.firing(1800*ms, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

func hungSettled() faultMoment {
	c := hungTaken(440, 40*s1)
	alive := true
	n := c.node("node-1")
	n.LastSeen, n.SessionAlive, n.BackendPID = c.now.Add(-300*ms), &alive, 7102
	delete(c.reported, "node-1")
	e := &faultEvents{f: c.f, evs: hungEvents(c.f, 40*s1)}
	nf := collector.Alert{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: "reports", Node: "node-2",
		Summary: "reports is led by node-2 with no live follower: node-1 down", Runbook: "docs/runbooks.md#no_follower"}
	e.firing(1800*ms, nf)
	e.fault(25*s1, "healed the database link of node-1")
	e.nodeBack(25300*ms, "node-1", "came back").resolved(25300*ms, nf)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: e.evs}
}

// --- PostgreSQL restart (-m fast, 1.3 s): every session ends; the collector
// cannot read until the server is back and shows the last good data; then
// the first nodes back claim every scope and close the open terms as
// database_failover (the server started after their last heartbeat).

const restartErr = "failed to connect to `user=pgleader database=app`: 10.0.0.5:5432 (10.0.0.5): server error: FATAL: the database system is shutting down (SQLSTATE 57P03)"

func restartEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.source(400*ms, "live → disconnected")
	if upTo < 1300*ms {
		return e.evs
	}
	e.fault(1300*ms, "restarted PostgreSQL (-m fast) in 1.3s")
	e.source(1350*ms, "disconnected → live")
	e.closed(1400*ms, "billing", "node-1", 42, "database_failover", "node-2").elected(1400*ms, "billing", "node-2", 43, "node-1", 42)
	e.closed(1400*ms, "ledger", "node-2", 19, "database_failover", "node-2").elected(1400*ms, "ledger", "node-2", 20, "node-2", 19)
	e.closed(1401*ms, "reports", "node-1", 7, "database_failover", "node-2").elected(1401*ms, "reports", "node-2", 8, "node-1", 7)
	e.nodeLeft(1600*ms, "node-1", "its leadership session ended; last seen 1.8s ago")
	return e.evs
}

func restartDuring() faultMoment {
	// The last good read was 0.3 s before the shutdown; the collector has
	// failed to read since 0.4 s after it.
	c := newFaultClusterRead(500, t0.Add(300*ms), t0)
	good := c.snapshot()
	d := *good
	c.s = &d
	c.s.Seq++
	c.disconnected(restartErr, c.f.Add(400*ms))
	return faultMoment{snaps: []*collector.Snapshot{good, c.s}, events: restartEvents(c.f, 1200*ms)}
}

func restartTaken(seq uint64, ago time.Duration) *faultCluster {
	c := newFaultCluster(seq, ago)
	// node-2 came back first (1.4 s) and claimed every scope; node-3 is back
	// too; node-1 is not yet: its session died with the server.
	c.silent("node-1", c.f.Add(-200*ms), true)
	c.elect("billing", "node-2", 43, c.f.Add(1400*ms), "database_failover", 1600*ms)
	c.elect("ledger", "node-2", 20, c.f.Add(1400*ms), "database_failover", 1600*ms)
	c.elect("reports", "node-2", 8, c.f.Add(1401*ms), "database_failover", 1601*ms)
	return c
}

func restartAfter() faultMoment {
	c := restartTaken(502, 1600*ms)
	c.node("node-2").LastSeen = c.f.Add(1400 * ms)
	c.node("node-3").LastSeen = c.f.Add(1450 * ms)
	c.noFollower("reports", c.f.Add(1600*ms), "node-1 down")
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: restartEvents(c.f, 1600*ms)}
	e.firing(1600*ms, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

func restartSettled() faultMoment {
	c := restartTaken(530, 30*s1)
	alive := true
	n := c.node("node-1")
	n.LastSeen, n.SessionAlive, n.BackendPID = c.now.Add(-300*ms), &alive, 7201
	delete(c.reported, "node-1")
	e := &faultEvents{f: c.f, evs: restartEvents(c.f, 30*s1)}
	nf := collector.Alert{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: "reports", Node: "node-2",
		Summary: "reports is led by node-2 with no live follower: node-1 down", Runbook: "docs/runbooks.md#no_follower"}
	e.firing(1600*ms, nf)
	e.nodeBack(2100*ms, "node-1", "came back").resolved(2100*ms, nf)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: e.evs}
}

// --- database failover to a standby: the primary's host dies; the collector
// cannot read and, after 5 s, raises collector_down; the standby is promoted
// at 6 s (WAL timeline 2) and the nodes' multi-host DSN finds it; every epoch
// granted now is above 2^40 (shown t2·N), and the open terms end as
// database_failover.

const standbyErr = "dial tcp 10.0.0.5:5432: connect: connection refused"

var floor2 = collector.EpochFloor(2)

func standbyEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.source(100*ms, "live → disconnected")
	cd := collector.Alert{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical,
		Summary: "no successful read of app@10.0.0.5:5432 for 5.5s: " + standbyErr, Runbook: "docs/runbooks.md#collector_down"}
	e.firing(5100*ms, cd)
	if upTo < 6050*ms {
		return e.evs
	}
	e.source(6050*ms, "disconnected → live")
	e.add(6050*ms, collector.Event{Kind: collector.EventFailover, Epoch: floor2, Detail: "the database failed over: WAL timeline 1 → 2; every epoch granted from now on is above 1099511627776; terms and writes the old primary committed after its standby's last received WAL are not in this history"})
	e.resolved(6050*ms, cd)
	e.closed(6100*ms, "billing", "node-1", 42, "database_failover", "node-2").elected(6100*ms, "billing", "node-2", floor2+1, "node-1", 42)
	e.closed(6100*ms, "reports", "node-1", 7, "database_failover", "node-2").elected(6100*ms, "reports", "node-2", floor2+1, "node-1", 7)
	e.closed(6120*ms, "ledger", "node-2", 19, "database_failover", "node-3").elected(6120*ms, "ledger", "node-3", floor2+1, "node-2", 19)
	e.nodeLeft(6200*ms, "node-1", "its leadership session ended; last seen 6.5s ago")
	return e.evs
}

func standbyDuring() faultMoment {
	// The last good read, 0.4 s before the host died; re-published 5.5 s
	// later with collector_down.
	read := t0.Add(-5500 * ms)
	c := newFaultClusterRead(600, read.Add(400*ms), read)
	good := c.snapshot()
	d := *good
	c.s = &d
	c.s.Seq += 5
	c.disconnected(standbyErr, c.f.Add(100*ms))
	c.s.Alerts = []collector.Alert{{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical,
		Summary: "no successful read of app@10.0.0.5:5432 for 5.5s: " + standbyErr,
		Hint:    "check that the database is up and reachable from the collector's host (credentials, network, max_connections); the state shown is the last good read",
		Runbook: "docs/runbooks.md#collector_down", Since: c.f.Add(100 * ms)}}
	return faultMoment{snaps: []*collector.Snapshot{good, c.s}, events: standbyEvents(c.f, t0.Sub(c.f))}
}

func standbyTaken(seq uint64, ago time.Duration) *faultCluster {
	c := newFaultCluster(seq, ago)
	c.s.Timeline, c.s.EpochFloor = 2, floor2
	c.s.Health.Database = "app@10.0.0.6:5432"
	c.silent("node-1", c.f.Add(-300*ms), true)
	c.elect("billing", "node-2", floor2+1, c.f.Add(6100*ms), "database_failover", 6300*ms)
	c.elect("reports", "node-2", floor2+1, c.f.Add(6100*ms), "database_failover", 6300*ms)
	c.elect("ledger", "node-3", floor2+1, c.f.Add(6120*ms), "database_failover", 6320*ms)
	return c
}

func standbyAfter() faultMoment {
	c := standbyTaken(610, 6200*ms)
	c.node("node-2").LastSeen = c.f.Add(6100 * ms)
	c.node("node-3").LastSeen = c.f.Add(6120 * ms)
	c.noFollower("reports", c.f.Add(6200*ms), "node-1 down")
	s := c.snapshot()
	e := &faultEvents{f: c.f, evs: standbyEvents(c.f, 6200*ms)}
	e.firing(6200*ms, alertOf(s, collector.AlertNoFollower, "reports", "node-2"))
	return faultMoment{snaps: []*collector.Snapshot{s}, events: e.evs}
}

func standbySettled() faultMoment {
	c := standbyTaken(650, 40*s1)
	alive := true
	n := c.node("node-1")
	n.LastSeen, n.SessionAlive, n.BackendPID = c.now.Add(-300*ms), &alive, 7301
	delete(c.reported, "node-1")
	e := &faultEvents{f: c.f, evs: standbyEvents(c.f, 40*s1)}
	nf := collector.Alert{Kind: collector.AlertNoFollower, Severity: collector.SeverityWarning, Scope: "reports", Node: "node-2",
		Summary: "reports is led by node-2 with no live follower: node-1 down", Runbook: "docs/runbooks.md#no_follower"}
	e.firing(6200*ms, nf)
	e.nodeBack(6800*ms, "node-1", "came back").resolved(6800*ms, nf)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: e.evs}
}

// --- resign: an operator asks node-1 to resign billing (R); its next
// heartbeat releases the term (resigned) and a waiting follower claims it a
// couple of milliseconds later. The read the release's notification brings
// may land in between.

func resignEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.add(0, collector.Event{Kind: collector.EventResignRequested, Scope: "billing", Node: "node-1", Epoch: 42, Detail: "requested by alice via pgleader top"})
	e.released(300*ms, "billing", "node-1", 42, "resigned", "")
	if upTo < 302*ms {
		return e.evs
	}
	e.elected(302*ms, "billing", "node-3", 43, "node-1", 42)
	return e.evs
}

func resignDuring() faultMoment {
	c := newFaultCluster(700, 301*ms)
	c.release("billing", c.f.Add(300*ms), "resigned", "", 0)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: resignEvents(c.f, 301*ms)}
}

func resignTaken(seq uint64, ago time.Duration) faultMoment {
	c := newFaultCluster(seq, ago)
	c.release("billing", c.f.Add(300*ms), "resigned", "", 0)
	c.open("billing", 43, "node-3", c.f.Add(302*ms), 2*ms)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: resignEvents(c.f, ago)}
}

func resignAfter() faultMoment   { return resignTaken(701, 305*ms) }
func resignSettled() faultMoment { return resignTaken(740, 40*s1) }

// --- handover: pgleader handover billing --to node-3. node-1 holds on until
// its next heartbeat, which releases the term to node-3 (handed_over); node-3
// claims it a millisecond later.

func handoverEvents(f time.Time, upTo time.Duration) []collector.Event {
	e := &faultEvents{f: f}
	e.add(0, collector.Event{Kind: collector.EventHandoverRequested, Scope: "billing", Node: "node-1", Epoch: 42,
		Detail: "to node-3, requested by alice via pgleader handover"})
	if upTo < 400*ms {
		return e.evs
	}
	e.released(400*ms, "billing", "node-1", 42, "handed_over", "node-3")
	e.elected(401*ms, "billing", "node-3", 43, "node-1", 42)
	return e.evs
}

func handoverDuring() faultMoment {
	c := newFaultCluster(800, 200*ms)
	sc := c.scope("billing")
	sc.HandoverTo, sc.HandoverDeadline = "node-3", c.f.Add(10*s1)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: handoverEvents(c.f, 200*ms)}
}

func handoverTaken(seq uint64, ago time.Duration) faultMoment {
	c := newFaultCluster(seq, ago)
	c.release("billing", c.f.Add(400*ms), "handed_over", "node-3", 0)
	c.open("billing", 43, "node-3", c.f.Add(401*ms), 1*ms)
	return faultMoment{snaps: []*collector.Snapshot{c.snapshot()}, events: handoverEvents(c.f, ago)}
}

func handoverAfter() faultMoment   { return handoverTaken(801, 450*ms) }
func handoverSettled() faultMoment { return handoverTaken(840, 40*s1) }
