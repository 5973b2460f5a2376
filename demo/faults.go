package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/tui"
)

// Fault keys of the dashboard (capitals: the dashboard's own keys are lower case).
const (
	KeyKill    = "K"
	KeyFreeze  = "Z"
	KeyHang    = "H"
	KeyResign  = "G"
	KeyRestart = "B"
	KeyAdd     = "A"
	KeyRemove  = "D"
)

// lab is the running demo cluster: node processes, each behind its own proxy to
// PostgreSQL, and the bookkeeping the fault keys and the summary need.
type lab struct {
	c   *cluster.Cluster
	dsn string
	// nodeDSN is the nodes' login: on the throwaway server a member of the node
	// role (cluster.NodeLogin), as a service's nodes, so that their doorbells
	// ring (the owner may not signal a superuser's sessions); with --dsn, dsn.
	nodeDSN string
	srv     *pgserver.Server // nil with --dsn: no restart key
	scopes  []string
	work    time.Duration
	reap    func(pid int)
	notes   chan string // messages for the event log (failover times)

	mu       sync.Mutex
	lead     cluster.Leadership // who leads each scope, from the records observe saw
	proxies  map[string]*link
	frozen   map[string]bool      // node id → SIGSTOPped
	hung     map[string]bool      // node id → database link hung
	removed  map[string]bool      // removed on purpose: not restarted
	dead     map[string]time.Time // exited at (restarted after Options.Restart)
	next     int                  // number of the next added node
	faults   []checker.Fault
	failover []Failover
	pending  []*watch // faults waiting for a takeover
}

// Failover is one measured failover: from the fault to the successor's gate opening.
type Failover struct {
	Fault    string        `json:"fault"`
	Scope    string        `json:"scope"`
	From     string        `json:"from"`
	To       string        `json:"to"`
	Epoch    int64         `json:"epoch"`
	Duration time.Duration `json:"duration_ns"`
}

type watch struct {
	fault, scope, from string
	epoch              int64 // the faulted term
	at                 int64 // mono ns of the fault
	done               chan Failover
	also               []*watch // the other scopes the faulted node led
	strike             *strike
}

// strike is one fault and the takeovers it awaits, one per scope it struck.
// The event log gets a line per takeover when they are few, else one line once
// all are done: a node leading 300 scopes must not bury the log.
type strike struct {
	fault string
	n     int // watches registered
	took  []Failover
}

// noteEach is the most takeovers of one fault noted one by one.
const noteEach = 3

func (l *lab) note(format string, args ...any) {
	select {
	case l.notes <- fmt.Sprintf(format, args...):
	default: // the dashboard is behind: the line is dropped, never the demo
	}
}

// startNode starts node id behind a fresh proxy.
func (l *lab) startNode(id string) (*cluster.Node, error) {
	l.mu.Lock()
	p := l.proxies[id]
	l.mu.Unlock()
	if p == nil {
		var err error
		up, err := hostPort(l.dsn)
		if err != nil {
			return nil, err
		}
		if p, err = newLink(up); err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.proxies[id] = p
		l.mu.Unlock()
	}
	n, err := l.c.Start(id, "--dsn", withHost(cmp.Or(l.nodeDSN, l.dsn), p.Addr()))
	if err != nil {
		return nil, err
	}
	l.reap(n.PID())
	return n, nil
}

// leader returns the node leading scope according to the nodes' own events.
func (l *lab) leader(scope string) (*cluster.Node, int64, error) {
	l.mu.Lock()
	id, epoch := l.lead.Leader(scope)
	l.mu.Unlock()
	if id == "" {
		return nil, 0, fmt.Errorf("%s has no leader right now", scope)
	}
	n := l.c.Node(id)
	if n == nil || n.Exited() {
		return nil, 0, fmt.Errorf("%s: leader %s is not running", scope, id)
	}
	return n, epoch, nil
}

// expectTakeover registers a fault on scope's leader, and on the other scopes that
// node leads (the fault strikes them too); observe reports each takeover. It
// returns the watch of scope.
func (l *lab) expectTakeover(fault, scope, from string, epoch, at int64) *watch {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &strike{fault: fault}
	w := l.watchLocked(st, scope, from, epoch, at)
	for _, s := range l.scopes {
		if id, e := l.lead.Leader(s); s != scope && id == from {
			w.also = append(w.also, l.watchLocked(st, s, from, e, at))
		}
	}
	return w
}

// watchLocked registers the takeover of one term struck by st. l.mu is held.
func (l *lab) watchLocked(st *strike, scope, from string, epoch, at int64) *watch {
	w := &watch{fault: st.fault, scope: scope, from: from, epoch: epoch, at: at, done: make(chan Failover, 1), strike: st}
	st.n++
	l.pending = append(l.pending, w)
	return w
}

// observe feeds the nodes' events: a gate opening under a higher epoch completes the
// pending faults of its scope; process exits schedule restarts.
func (l *lab) observe(rs []eventlog.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		l.lead.Apply(r)
		switch r.Event {
		case "gate_open":
			keep := l.pending[:0]
			for _, w := range l.pending {
				if w.scope == r.Scope && r.Epoch > w.epoch {
					f := Failover{Fault: w.fault, Scope: w.scope, From: w.from, To: r.Node, Epoch: r.Epoch,
						Duration: time.Duration(r.MonoNS - w.at)}
					l.failover = append(l.failover, f)
					w.done <- f
					l.noteTakeover(w.strike, f)
					continue
				}
				keep = append(keep, w)
			}
			l.pending = keep
		case cluster.ProcessExit:
			if !l.removed[r.Node] {
				l.dead[r.Node] = time.Now()
			}
		}
	}
}

// noteTakeover puts a takeover in the event log: on its own line while the
// fault struck at most noteEach scopes, else as one line once all are done.
func (l *lab) noteTakeover(st *strike, f Failover) {
	// The figure first: an 80-column event log cuts the end of the line.
	if st.n <= noteEach {
		l.note("failover %s in %s: %s → %s (epoch %d) after %s", f.Scope, human.Duration(f.Duration), f.From, f.To, f.Epoch, f.Fault)
		return
	}
	st.took = append(st.took, f)
	if len(st.took) < st.n {
		return
	}
	ds := make([]time.Duration, len(st.took))
	to := map[string]int{}
	for i, t := range st.took {
		ds[i] = t.Duration
		to[t.To]++
	}
	slices.Sort(ds)
	var succ []string
	for _, id := range slices.Sorted(maps.Keys(to)) {
		succ = append(succ, fmt.Sprintf("%s ×%d", id, to[id]))
	}
	l.note("failover of %d scopes: %s median, %s max, after %s (to %s)", len(ds),
		human.Duration(ds[len(ds)/2]), human.Duration(ds[len(ds)-1]), st.fault, strings.Join(succ, ", "))
}

// restartDead starts again the nodes that died more than after ago.
func (l *lab) restartDead(after time.Duration) {
	l.mu.Lock()
	var due []string
	for id, at := range l.dead {
		if time.Since(at) >= after {
			due = append(due, id)
			delete(l.dead, id)
		}
	}
	l.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		if n := l.c.Node(id); n != nil && !n.Exited() {
			continue
		}
		if n, err := l.startNode(id); err == nil {
			l.note("%s restarted (pid %d)", id, n.PID())
		}
	}
}

// setAt sets the fault time of a watch registered just before the fault.
func (l *lab) setAt(w *watch, at int64) {
	l.mu.Lock()
	w.at = at
	for _, o := range w.also {
		o.at = at
	}
	l.mu.Unlock()
}

func (l *lab) record(kind, node string, start, end int64) {
	l.mu.Lock()
	l.faults = append(l.faults, checker.Fault{Kind: kind, Node: node, StartMono: start, EndMono: end})
	l.mu.Unlock()
}

// kill9 kills the leader of scope.
func (l *lab) kill9(ctx context.Context, scope string) (string, *watch, error) {
	n, epoch, err := l.leader(scope)
	if err != nil {
		return "", nil, err
	}
	w := l.expectTakeover("kill -9", scope, n.ID, epoch, monotime.Now())
	t0, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
	if err != nil {
		return "", nil, err
	}
	l.setAt(w, t0)
	l.record(fault.Kill9.Name, n.ID, t0, t0)
	return fmt.Sprintf("kill -9 %s (pid %d, leader of %s, epoch %d)", n.ID, n.PID(), scope, epoch), w, nil
}

// freeze SIGSTOPs the leader of scope, or thaws the node frozen earlier.
func (l *lab) freeze(ctx context.Context, scope string) (string, *watch, error) {
	l.mu.Lock()
	var thaw string
	for id, f := range l.frozen {
		if f {
			thaw = id
		}
	}
	l.mu.Unlock()
	if thaw != "" {
		t1, err := fault.Freeze.Undo(ctx, fault.Target{Node: l.c.Node(thaw)})
		if err != nil {
			return "", nil, err
		}
		l.mu.Lock()
		delete(l.frozen, thaw)
		l.mu.Unlock()
		l.record(fault.Freeze.Name, thaw, t1, t1)
		return fmt.Sprintf("SIGCONT %s: it wakes up, finds its gate closed and rejoins as a follower", thaw), nil, nil
	}
	n, epoch, err := l.leader(scope)
	if err != nil {
		return "", nil, err
	}
	w := l.expectTakeover("SIGSTOP", scope, n.ID, epoch, 0)
	t0, err := fault.Freeze.Apply(ctx, fault.Target{Node: n})
	if err != nil {
		return "", nil, err
	}
	l.setAt(w, t0)
	l.mu.Lock()
	l.frozen[n.ID] = true
	l.mu.Unlock()
	l.record(fault.Freeze.Name, n.ID, t0, t0)
	return fmt.Sprintf("SIGSTOP %s (leader of %s): its trust window runs out, then the server drops its session; press %s again to thaw", n.ID, scope, KeyFreeze), w, nil
}

// hang makes the database link of scope's leader silent, or heals the hung one.
func (l *lab) hang(ctx context.Context, scope string) (string, *watch, error) {
	l.mu.Lock()
	var heal string
	for id, h := range l.hung {
		if h {
			heal = id
		}
	}
	l.mu.Unlock()
	if heal != "" {
		l.mu.Lock()
		p := l.proxies[heal]
		delete(l.hung, heal)
		l.mu.Unlock()
		if _, err := fault.NetHang.Undo(ctx, fault.Target{Link: p}); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("healed the database link of %s", heal), nil, nil
	}
	n, epoch, err := l.leader(scope)
	if err != nil {
		return "", nil, err
	}
	l.mu.Lock()
	p := l.proxies[n.ID]
	l.mu.Unlock()
	if p == nil {
		return "", nil, fmt.Errorf("%s has no proxy", n.ID)
	}
	w := l.expectTakeover("hung link", scope, n.ID, epoch, monotime.Now())
	t0, err := fault.NetHang.Apply(ctx, fault.Target{Link: p})
	if err != nil {
		return "", nil, err
	}
	l.setAt(w, t0)
	l.mu.Lock()
	l.hung[n.ID] = true
	l.mu.Unlock()
	l.record(fault.NetHang.Name, n.ID, t0, t0)
	return fmt.Sprintf("hung the database link of %s (leader of %s): no FIN, no RST, just silence; press %s again to heal", n.ID, scope, KeyHang), w, nil
}

// resign asks scope's leader to hand over (SIGUSR1: every scope it leads).
func (l *lab) resign(ctx context.Context, scope string) (string, *watch, error) {
	n, epoch, err := l.leader(scope)
	if err != nil {
		return "", nil, err
	}
	w := l.expectTakeover("resign", scope, n.ID, epoch, monotime.Now())
	t0, err := fault.Resign.Apply(ctx, fault.Target{Node: n})
	if err != nil {
		return "", nil, err
	}
	l.setAt(w, t0)
	l.record(fault.Resign.Name, n.ID, t0, t0)
	return fmt.Sprintf("SIGUSR1 %s: it hands over every scope it leads", n.ID), w, nil
}

// restartPG restarts PostgreSQL (fast mode): every session drops; every scope gets a
// new epoch.
func (l *lab) restartPG(ctx context.Context) (string, error) {
	if l.srv == nil {
		return "", errors.New("restart needs the demo's own PostgreSQL (not available with --dsn)")
	}
	t0 := monotime.Now()
	st := &strike{fault: "PostgreSQL restart"} // every led scope, once
	for _, s := range l.scopes {
		if n, epoch, err := l.leader(s); err == nil {
			l.mu.Lock()
			l.watchLocked(st, s, n.ID, epoch, t0)
			l.mu.Unlock()
		}
	}
	restart := fault.Restart("fast")
	if _, err := restart.Apply(ctx, fault.Target{Server: l.srv}); err != nil {
		return "", err
	}
	l.reap(l.srv.PID())
	l.record(restart.Name, "", t0, monotime.Now())
	return fmt.Sprintf("restarted PostgreSQL (-m fast) in %s", human.Duration(time.Duration(monotime.Now()-t0))), nil
}

// addNode starts one more node.
func (l *lab) addNode() (string, error) {
	l.mu.Lock()
	l.next++
	id := fmt.Sprintf("node-%d", l.next)
	l.mu.Unlock()
	n, err := l.startNode(id)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("added %s (pid %d)", id, n.PID()), nil
}

// removeNode stops the newest running node that leads nothing (else the newest),
// with SIGTERM, and does not restart it.
func (l *lab) removeNode(ctx context.Context) (string, error) {
	running := l.c.Running()
	if len(running) <= 1 {
		return "", errors.New("one node left: keep it")
	}
	leads := map[string]bool{}
	l.mu.Lock()
	for _, s := range l.scopes {
		if id, _ := l.lead.Leader(s); id != "" {
			leads[id] = true
		}
	}
	l.mu.Unlock()
	slices.SortFunc(running, func(a, b *cluster.Node) int { return nodeNum(b.ID) - nodeNum(a.ID) })
	victim := running[0]
	for _, n := range running {
		if !leads[n.ID] {
			victim = n
			break
		}
	}
	l.mu.Lock()
	l.removed[victim.ID] = true
	if l.frozen[victim.ID] {
		_, _ = fault.Freeze.Undo(ctx, fault.Target{Node: victim})
		delete(l.frozen, victim.ID)
	}
	l.mu.Unlock()
	if _, err := fault.SIGTERM.Apply(ctx, fault.Target{Node: victim}); err != nil {
		return "", err
	}
	return fmt.Sprintf("removed %s (SIGTERM: it drains and hands over what it leads)", victim.ID), nil
}

func nodeNum(id string) int {
	var n int
	fmt.Sscanf(id, "node-%d", &n)
	return n
}

// dashboardFaults adapts the lab to the dashboard's fault keys.
type dashboardFaults struct{ l *lab }

// Keys lists the demo's fault keys.
func (f dashboardFaults) Keys() []tui.FaultKey {
	keys := []tui.FaultKey{
		{Key: KeyKill, Help: "kill -9 the leader"},
		{Key: KeyFreeze, Help: "freeze the leader (SIGSTOP) / thaw"},
		{Key: KeyHang, Help: "hang the leader's database link / heal"},
		{Key: KeyResign, Help: "leader resigns (SIGUSR1)"},
	}
	if f.l.srv != nil {
		keys = append(keys, tui.FaultKey{Key: KeyRestart, Help: "restart PostgreSQL"})
	}
	return append(keys, tui.FaultKey{Key: KeyAdd, Help: "add a node"}, tui.FaultKey{Key: KeyRemove, Help: "remove a node"})
}

// Do applies the fault bound to key to scope.
func (f dashboardFaults) Do(ctx context.Context, key, scope string) (string, error) {
	var (
		msg string
		err error
	)
	switch key {
	case KeyKill:
		msg, _, err = f.l.kill9(ctx, scope)
	case KeyFreeze:
		msg, _, err = f.l.freeze(ctx, scope)
	case KeyHang:
		msg, _, err = f.l.hang(ctx, scope)
	case KeyResign:
		msg, _, err = f.l.resign(ctx, scope)
	case KeyRestart:
		msg, err = f.l.restartPG(ctx)
	case KeyAdd:
		msg, err = f.l.addNode()
	case KeyRemove:
		msg, err = f.l.removeNode(ctx)
	default:
		err = fmt.Errorf("no fault on key %q", key)
	}
	return msg, err
}
