package tui

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
)

// t0 is the fixtures' "now": DB time and collector time of every snapshot.
var t0 = time.Date(2025, 3, 14, 3, 12, 0, 0, time.UTC)

// fixedNow is the dashboard clock in tests: two seconds after the read.
func fixedNow() time.Time { return t0.Add(2 * time.Second) }

// fakeFeed is an in-memory Feed. Tests push snapshots and events; it records
// what the dashboard asked of it.
type fakeFeed struct {
	mu        sync.Mutex
	snap      *collector.Snapshot
	updates   chan *collector.Snapshot
	events    chan collector.Event
	interval  time.Duration
	set       []time.Duration
	refreshes int
	unsubs    int
}

func newFakeFeed(s *collector.Snapshot) *fakeFeed {
	return &fakeFeed{
		snap:     s,
		updates:  make(chan *collector.Snapshot, 1),
		events:   make(chan collector.Event, 64),
		interval: time.Second,
	}
}

func (f *fakeFeed) Snapshot() *collector.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeFeed) Updates() (<-chan *collector.Snapshot, func()) {
	return f.updates, func() { f.mu.Lock(); f.unsubs++; f.mu.Unlock() }
}

func (f *fakeFeed) Subscribe(int) (<-chan collector.Event, func()) {
	return f.events, func() { f.mu.Lock(); f.unsubs++; f.mu.Unlock() }
}

func (f *fakeFeed) Refresh() { f.mu.Lock(); f.refreshes++; f.mu.Unlock() }

func (f *fakeFeed) SetPollInterval(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.interval = d
	f.set = append(f.set, d)
}

func (f *fakeFeed) PollInterval() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.interval
}

// push publishes a snapshot, latest wins.
func (f *fakeFeed) push(s *collector.Snapshot) {
	f.mu.Lock()
	f.snap = s
	f.mu.Unlock()
	for {
		select {
		case f.updates <- s:
			return
		default:
			select {
			case <-f.updates:
			default:
			}
		}
	}
}

type evictCall struct{ scope, reason string }

// handoverCall is one Handover asked of fakeActions.
type handoverCall struct{ scope, to, via string }

// fakeActions records the actions asked of it: Evict calls in calls, Resign
// calls in resigns, Handover calls in handovers.
type fakeActions struct {
	mu        sync.Mutex
	calls     []evictCall
	resigns   []evictCall
	handovers []handoverCall
	err       error
}

func (a *fakeActions) Evict(_ context.Context, scope, reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, evictCall{scope, reason})
	return a.err
}

func (a *fakeActions) Resign(_ context.Context, scope, reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resigns = append(a.resigns, evictCall{scope, reason})
	return a.err
}

func (a *fakeActions) Handover(_ context.Context, scope, to, via string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handovers = append(a.handovers, handoverCall{scope, to, via})
	return a.err
}

// handoverCalls returns the Handover calls so far.
func (a *fakeActions) handoverCalls() []handoverCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.handovers)
}

// resignCalls returns the Resign calls so far.
func (a *fakeActions) resignCalls() []evictCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.resigns)
}

type faultCall struct{ key, scope string }

type fakeFaults struct {
	mu    sync.Mutex
	keys  []FaultKey // default: K and Z, as the demo's
	calls []faultCall
}

func (f *fakeFaults) Keys() []FaultKey {
	if f.keys != nil {
		return f.keys
	}
	return []FaultKey{{Key: "K", Help: "kill -9 leader"}, {Key: "Z", Help: "SIGSTOP leader"}}
}

func (f *fakeFaults) Do(_ context.Context, key, scope string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, faultCall{key, scope})
	return fmt.Sprintf("sent SIGKILL to the leader of %s", scope), nil
}

var timing = collector.Timing{
	HeartbeatInterval: 500 * time.Millisecond,
	HeartbeatTimeout:  500 * time.Millisecond,
	TrustWindow:       1500 * time.Millisecond,
	SessionLease:      2 * time.Second,
}

func health() collector.Health {
	return collector.Health{
		Source:        collector.SourceLive,
		Database:      "app@10.0.0.5:5432",
		ServerVersion: "15.6",
		LastPoll:      t0,
		PollDuration:  3 * time.Millisecond,
		Polls:         1200,
	}
}

func node(id, host string, pid int, leads []string, scopes ...string) collector.Node {
	return collector.Node{
		ID: id, Hostname: host, OSPID: pid, Version: "0.4.0",
		StartedAt: t0.Add(-2 * time.Hour), LastSeen: t0.Add(-300 * time.Millisecond),
		LastSeenAge: 300 * time.Millisecond, Scopes: scopes, Leads: leads, Timing: timing, Live: true, State: collector.NodeLive,
		Priority:  1, // the default
		LoginRole: "svc_" + strings.ReplaceAll(id, "-", "_"),
	}
}

func openTerm(scope string, epoch int64, holder, host string, pid int, since time.Duration, gap time.Duration) *collector.Term {
	return &collector.Term{
		ID: epoch, Scope: scope, Epoch: epoch, Holder: holder, Hostname: host, HolderPID: pid,
		AcquiredAt: t0.Add(-since), HandoverGap: gap, HeldFor: since,
	}
}

func closedTerm(scope string, epoch int64, holder string, from, to time.Duration, reason collector.Reason, gap time.Duration) collector.Term {
	return collector.Term{
		ID: epoch, Scope: scope, Epoch: epoch, Holder: holder, Hostname: "host-" + holder[len(holder)-1:],
		AcquiredAt: t0.Add(-from), ReleasedAt: t0.Add(-to), EndedBy: reason, HandoverGap: gap, HeldFor: from - to,
	}
}

func ledScope(name string, epoch int64, leader string, pid int, followers []string, open *collector.Term) collector.Scope {
	return collector.Scope{
		Name: name, LockKey: int64(len(name)) * 7919, Epoch: epoch, Leader: leader, LeaderHost: "host-" + leader[len(leader)-1:],
		HolderPID: pid, LockPIDs: []int{pid}, Waiters: len(followers), AcquiredAt: open.AcquiredAt,
		Tenure: t0.Sub(open.AcquiredAt), LastHeartbeat: t0.Add(-200 * time.Millisecond), HeartbeatAge: 200 * time.Millisecond,
		Timing: timing, Followers: followers, OpenTerm: open, Verdict: collector.VerdictOK,
	}
}

// healthySnapshot: two scopes, three nodes, all well.
func healthySnapshot() *collector.Snapshot {
	bt := openTerm("billing", 42, "node-a", "host-a", 4242, 3*time.Minute, 1800*time.Millisecond)
	rt := openTerm("reports", 7, "node-b", "host-b", 5151, 70*time.Minute, 0)
	return &collector.Snapshot{
		Seq: 100, At: t0, DBTime: t0,
		Scopes: []collector.Scope{
			ledScope("billing", 42, "node-a", 4242, []string{"node-b", "node-c"}, bt),
			ledScope("reports", 7, "node-b", 5151, []string{"node-a", "node-c"}, rt),
		},
		Nodes: []collector.Node{
			node("node-a", "host-a", 31001, []string{"billing"}, "billing", "reports"),
			node("node-b", "host-b", 31002, []string{"reports"}, "billing", "reports"),
			node("node-c", "host-c", 31003, nil, "billing", "reports"),
		},
		Terms: []collector.Term{
			*bt,
			closedTerm("billing", 41, "node-c", 4*time.Minute+30*time.Second, 3*time.Minute+1800*time.Millisecond, "crashed", 0),
			closedTerm("billing", 40, "node-b", 9*time.Minute, 4*time.Minute+31*time.Second, "resigned", 900*time.Millisecond),
			*rt,
		},
		Alerts:        []collector.Alert{},
		Locks:         collector.LockStats{Advisory: 2, Waiting: 4, Capacity: 12800},
		FenceRejected: map[string]uint64{},
		Health:        health(),
	}
}

// troubleSnapshot: billing in split brain, reports without a leader, node-c stale.
func troubleSnapshot() *collector.Snapshot {
	s := healthySnapshot()
	s.Seq = 101
	b := &s.Scopes[0]
	b.LockPIDs = []int{4242, 6262}
	b.Verdict = collector.VerdictSplitBrain
	sb := collector.Alert{
		Kind: collector.AlertSplitBrain, Severity: collector.SeverityCritical, Scope: "billing",
		Summary: "lock held by backends 4242 and 6262, holder_pid is 4242",
		Hint:    "terminate the backend that is not holder_pid; check fenced writes",
		Runbook: "docs/runbooks.md#split_brain", Since: t0.Add(-20 * time.Second),
	}
	b.Alerts = []collector.Alert{sb}
	r := &s.Scopes[1]
	r.Leader, r.LeaderHost, r.HolderPID, r.LockPIDs, r.OpenTerm = "", "", 0, nil, nil
	r.Tenure, r.HeartbeatAge, r.ReleasedAt = 0, 0, t0.Add(-42*time.Second)
	r.LeaderlessFor = 42 * time.Second
	r.Followers = []string{"node-a"}
	r.Verdict = collector.VerdictNoLeader
	nl := collector.Alert{
		Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: "reports",
		Summary: "no leader for 42s with 1 live candidate",
		Hint:    "check the candidates' logs and idle_session_timeout; pgleader status",
		Runbook: "docs/runbooks.md#no_leader", Since: t0.Add(-42 * time.Second),
	}
	r.Alerts = []collector.Alert{nl}
	s.Terms[3] = closedTerm("reports", 7, "node-b", 70*time.Minute, 42*time.Second, "heartbeat_timeout", 0)
	s.Nodes[1].Leads = nil
	s.Nodes[1].Live, s.Nodes[1].State = false, collector.NodeDown
	s.Nodes[1].LastSeen, s.Nodes[1].LastSeenAge = t0.Add(-44*time.Second), 44*time.Second
	sn := collector.Alert{
		Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: "node-b",
		Summary: "node-b not seen for 44s", Hint: "is the process alive? check its host",
		Runbook: "docs/runbooks.md#stale_node", Since: t0.Add(-14 * time.Second),
	}
	s.Alerts = []collector.Alert{sb, nl, sn}
	return s
}

// handoverSnapshot (schema 8): billing is being handed over to node-c, whose
// priority is 2; node-d campaigns for billing with priority 0 (never leads);
// archive is IDLE (its only candidate, node-e, stopped cleanly); two scopes
// are retired; reports' previous term was handed over to node-b.
func handoverSnapshot() *collector.Snapshot {
	s := healthySnapshot()
	s.Seq = 103
	s.Retired = 2
	b := &s.Scopes[0]
	b.HandoverTo, b.HandoverDeadline = "node-c", t0.Add(8*time.Second)
	b.Followers = []string{"node-b", "node-c", "node-d"}
	archive := collector.Scope{
		Name: "archive", LockKey: 8 * 7919, Epoch: 12, ReleasedAt: t0.Add(-2 * time.Hour),
		LeaderlessFor: 2 * time.Hour, Verdict: collector.VerdictIdle,
	}
	s.Scopes = append([]collector.Scope{archive}, s.Scopes...)
	s.Nodes[2].Priority = 2
	d := node("node-d", "host-d", 31004, nil, "billing")
	d.Priority = 0
	e := node("node-e", "host-e", 31005, nil, "archive")
	e.Live, e.State, e.StoppedAt, e.LastSeen, e.LastSeenAge = false, collector.NodeStopped, t0.Add(-2*time.Hour), t0.Add(-2*time.Hour), 2*time.Hour
	s.Nodes = append(s.Nodes, d, e)
	handed := closedTerm("reports", 6, "node-a", 3*time.Hour, 70*time.Minute, "handed_over", 0)
	handed.HandedTo = "node-b"
	s.Terms = append(s.Terms, handed, closedTerm("archive", 12, "node-e", 5*time.Hour, 2*time.Hour, "shutdown", 0))
	return s
}

// disconnectedSnapshot: the last good data, and the collector cannot read.
func disconnectedSnapshot() *collector.Snapshot {
	s := healthySnapshot()
	s.Seq = 102
	s.Health.Source = collector.SourceDisconnected
	s.Health.LastError = "dial tcp 10.0.0.5:5432: connect: connection refused"
	s.Health.LastErrorAt = t0.Add(time.Second)
	s.Health.PollErrors = 3
	s.Alerts = []collector.Alert{{
		Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical,
		Summary: "collector cannot read the database for 1s", Hint: "check the database and the network from the collector host",
		Runbook: "docs/runbooks.md#collector_down", Since: t0.Add(time.Second),
	}}
	return s
}

func sampleEvents() []collector.Event {
	return []collector.Event{
		{Seq: 1, At: t0.Add(-4*time.Minute - 31*time.Second), Kind: collector.EventReleased, Scope: "billing", Node: "node-b", Epoch: 40, Reason: "resigned"},
		{Seq: 2, At: t0.Add(-4*time.Minute - 30*time.Second), Kind: collector.EventElected, Scope: "billing", Node: "node-c", Epoch: 41, PrevHolder: "node-b"},
		{Seq: 3, At: t0.Add(-3 * time.Minute), Kind: collector.EventTermClosed, Scope: "billing", Node: "node-c", Epoch: 41, Reason: "crashed"},
		{Seq: 4, At: t0.Add(-3*time.Minute + 1800*time.Millisecond), Kind: collector.EventElected, Scope: "billing", Node: "node-a", Epoch: 42, PrevHolder: "node-c"},
	}
}

// bigSnapshot has nScopes scopes over nNodes nodes, three candidates per
// scope; every 17th scope is degraded and every 17th (another) has no leader.
func bigSnapshot(nScopes, nNodes int) *collector.Snapshot {
	return bigCluster{scopes: nScopes, nodes: nNodes, candidates: 3, troubled: true}.snapshot()
}

// bigCluster describes a synthetic snapshot for benchmarks and the tests at
// scale.
type bigCluster struct {
	scopes, nodes int
	candidates    int  // nodes campaigning for each scope, the leader included (capped at nodes)
	troubled      bool // every 17th scope degraded, every 17th (another) without a leader
}

func (c bigCluster) snapshot() *collector.Snapshot {
	s := &collector.Snapshot{Seq: 1, At: t0, DBTime: t0, Health: health(), FenceRejected: map[string]uint64{}}
	for i := 0; i < c.nodes; i++ {
		s.Nodes = append(s.Nodes, node(fmt.Sprintf("node-%03d", i), fmt.Sprintf("host-%02d", i%40), 20000+i, nil))
	}
	digits := max(3, len(itoa(c.scopes))) // scope-0000 … scope-0999 for a thousand
	cands := min(c.candidates, c.nodes)
	for i := 0; i < c.scopes; i++ {
		name := fmt.Sprintf("scope-%0*d", digits, i)
		li := i % c.nodes
		leader := s.Nodes[li].ID
		ot := openTerm(name, int64(i+1), leader, s.Nodes[li].Hostname, 1000+i, time.Duration(i+1)*7*time.Second, 300*time.Millisecond)
		var followers []string
		for k := 1; k < cands; k++ {
			followers = append(followers, s.Nodes[(li+k)%c.nodes].ID)
		}
		sc := ledScope(name, int64(i+1), leader, 1000+i, followers, ot)
		sc.HeartbeatAge = time.Duration(i%9) * 200 * time.Millisecond
		if c.troubled {
			switch i % 17 {
			case 3:
				sc.Verdict = collector.VerdictDegraded
			case 11:
				sc.Verdict = collector.VerdictNoLeader
				sc.Leader, sc.LockPIDs, sc.OpenTerm = "", nil, nil
			}
		}
		s.Scopes = append(s.Scopes, sc)
		if sc.Leader != "" {
			s.Nodes[li].Leads = append(s.Nodes[li].Leads, name)
			s.Terms = append(s.Terms, *ot)
		}
		for k := 0; k < cands; k++ {
			n := &s.Nodes[(li+k)%c.nodes]
			n.Scopes = append(n.Scopes, name)
		}
	}
	return s
}

var trailingSpace = regexp.MustCompile(`[ ]+\n`)

// plain strips escape codes and trailing blanks: what a reader sees.
func plain(s string) string {
	s = ansi.Strip(s)
	s = trailingSpace.ReplaceAllString(s+"\n", "\n")
	return strings.TrimRight(s, "\n") + "\n"
}

// What the mode shows, for the tests' assertions.
func scopeDetail(m *Model) string { return subjectIn(m, viewScope) }
func nodeDetail(m *Model) string  { return subjectIn(m, viewNode) }
func helpOpen(m *Model) bool      { return m.mode.overlay == overlayHelp || searching(m) }
func searching(m *Model) bool     { return m.mode.overlay == overlaySearch }
func filterOpen(m *Model) bool    { return m.mode.overlay == overlayFilter }
func picking(m *Model) bool       { return m.mode.overlay == overlayPicker }

// subjectIn is the key shown in detail view v ("" when v is not open).
func subjectIn(m *Model, v view) string {
	if m.mode.view != v {
		return ""
	}
	return m.mode.subject
}
