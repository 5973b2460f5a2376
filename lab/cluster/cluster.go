// Package cluster runs `pgleader node` processes on one host and follows their
// event files: the shared harness of the process-level fault tests, `pgleader bench`,
// the chaos runner and the demo (one way to start, break and watch nodes).
//
// Nodes are real processes, so faults are real: SIGKILL, SIGSTOP/SIGCONT, SIGTERM.
// Their events files share CLOCK_MONOTONIC timestamps with this process, so a fault
// stamped here with monotime.Now can be compared with a node's gate_open.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/child"
	"github.com/pgleader/pgleader/lab/history"
)

// Options configure a Cluster.
type Options struct {
	Bin      string   // the pgleader binary
	DSN      string   // database every node uses
	Dir      string   // where events files (<id>.jsonl) and logs (<id>.log) go
	Scopes   []string // scopes every node campaigns for
	NodeArgs []string // extra arguments for every node (timing, --work-interval, …)
	Env      []string // extra environment for every node
	// Wrap, when set, returns a command prefix for node id (e.g. `ip netns exec NS`,
	// which execs the node in place, so the process id stays the node's).
	Wrap func(id string) []string
	// ForgetHeartbeats keeps heartbeat_ok records out of Events (Poll still
	// returns them). A node leading a thousand scopes writes two thousand a
	// second; a long-running caller that needs no full history (the interactive
	// demo) would otherwise grow without bound.
	ForgetHeartbeats bool
	// Supervise, when set, starts every node as `pgleader run … -- Supervise…`
	// instead of `pgleader node`: the node runs that command while it leads
	// (one scope only).
	Supervise []string
}

// Cluster is a set of node processes and the merged stream of their events.
type Cluster struct {
	opts Options

	mu      sync.Mutex
	nodes   map[string]*Node
	order   []*Node
	tails   []*eventlog.Tail
	events  []eventlog.Record // every record read so far, in read order
	pending []eventlog.Record // process_exit records not yet returned by Poll
}

// ProcessExit is the event of the synthetic record the cluster adds when a node's
// process has exited. Its mono_ns is when Kill sent SIGKILL, for a node killed that
// way (the process executes nothing once the signal is delivered, microseconds
// later, and no successor can claim before that death frees the locks), else when
// the exit was observed (the process was gone by then, perhaps for milliseconds). A
// dead process's gates are closed, whatever its last trust_until said
// (history.GateIntervals honours it).
const ProcessExit = history.ProcessExit

// Node is one `pgleader node` process.
type Node struct {
	ID     string
	Events string // events file path
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // exit status, once exited
	frozen bool
	killed atomic.Int64 // mono ns when Kill sent SIGKILL (0: not killed by Kill)
}

// New returns an empty cluster.
func New(opts Options) *Cluster {
	return &Cluster{opts: opts, nodes: map[string]*Node{}}
}

// Start launches a node with id and extra arguments after the cluster's NodeArgs.
// An id may be reused after its previous process exited; its events file is
// appended to.
func (c *Cluster) Start(id string, extra ...string) (*Node, error) {
	return c.StartBin(c.opts.Bin, id, extra...)
}

// StartBin is Start with the binary bin instead of Options.Bin: a rolling upgrade
// runs nodes of two releases side by side.
func (c *Cluster) StartBin(bin, id string, extra ...string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.nodes[id]; old != nil && !old.Exited() {
		return nil, fmt.Errorf("node %s is still running", id)
	}
	return c.startLocked(bin, id, id, extra)
}

// StartTwin launches a second process under the node id of a running one (a node
// restarted while its old process is still around, e.g. paused). The twin writes
// its own events file, <id>.twin<k>.jsonl, so the two processes stay apart in the
// records (Record.Source); Node(id) keeps returning the first.
func (c *Cluster) StartTwin(id string, extra ...string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := 1; ; k++ {
		key := fmt.Sprintf("%s.twin%d", id, k)
		if n := c.nodes[key]; n == nil || n.Exited() {
			return c.startLocked(c.opts.Bin, id, key, extra)
		}
	}
}

// StartCommand launches a process of another implementation of the node under
// id (the conformance kit's foreign node): argv returns its command line, given
// the path of the events file it must append to. Options.NodeArgs, Scopes and
// Wrap do not apply; Env does. It is followed, faulted and stopped as any node.
func (c *Cluster) StartCommand(id string, argv func(events string) []string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.nodes[id]; old != nil && !old.Exited() {
		return nil, fmt.Errorf("node %s is still running", id)
	}
	events := filepath.Join(c.opts.Dir, id+".jsonl")
	args := argv(events)
	if len(args) == 0 {
		return nil, fmt.Errorf("node %s: empty command line", id)
	}
	return c.spawnLocked(exec.Command(args[0], args[1:]...), id, id, events)
}

// startLocked starts a process of bin with node id, tracked (and its events file
// named) as key.
func (c *Cluster) startLocked(bin, id, key string, extra []string) (*Node, error) {
	events := filepath.Join(c.opts.Dir, key+".jsonl")
	verb := "node"
	if len(c.opts.Supervise) > 0 {
		verb = "run"
	}
	args := []string{verb, "--dsn", c.opts.DSN, "--id", id, "--events", events}
	for _, s := range c.opts.Scopes {
		args = append(args, "--scope", s)
	}
	args = append(args, c.opts.NodeArgs...)
	args = append(args, extra...)
	if len(c.opts.Supervise) > 0 {
		args = append(append(args, "--"), c.opts.Supervise...)
	}
	cmd := exec.Command(bin, args...)
	if c.opts.Wrap != nil {
		if prefix := c.opts.Wrap(id); len(prefix) > 0 {
			cmd = exec.Command(prefix[0], append(append(prefix[1:len(prefix):len(prefix)], bin), args...)...)
		}
	}
	return c.spawnLocked(cmd, id, key, events)
}

// spawnLocked starts cmd as the process of node id, tracked as key, its output
// in <key>.log, and follows its events file.
func (c *Cluster) spawnLocked(cmd *exec.Cmd, id, key, events string) (*Node, error) {
	logf, err := os.OpenFile(filepath.Join(c.opts.Dir, key+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), c.opts.Env...)
	// Own process group: a Ctrl-C meant for the harness reaches the nodes only
	// through Close, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	waited, err := child.Start(cmd) // Pdeathsig is per thread: see package child
	if err != nil {
		return nil, fmt.Errorf("start node %s: %w", id, err)
	}
	n := &Node{ID: id, Events: events, cmd: cmd, exited: make(chan struct{})}
	go func() {
		n.err = <-waited
		at := monotime.Now()
		if k := n.killed.Load(); k != 0 {
			at = k
		}
		c.mu.Lock()
		c.pending = append(c.pending, eventlog.Record{MonoNS: at, Node: id, Event: ProcessExit,
			Time: time.Now().UTC().Format(time.RFC3339Nano), Reason: fmt.Sprint(n.err),
			Source: filepath.Base(events)})
		c.mu.Unlock()
		close(n.exited)
	}()
	if _, seen := c.nodes[key]; !seen {
		c.tails = append(c.tails, eventlog.NewTail(events))
	}
	c.nodes[key] = n
	c.order = append(c.order, n)
	return n, nil
}

// Node returns the latest process started with id, or nil.
func (c *Cluster) Node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// Running returns the nodes whose processes have not exited.
func (c *Cluster) Running() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if !n.Exited() {
			out = append(out, n)
		}
	}
	return out
}

// PID returns the node's process id.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (n *Node) Exited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to exit and returns its exit error.
func (n *Node) Wait(d time.Duration) error {
	select {
	case <-n.exited:
		return n.err
	case <-time.After(d):
		return fmt.Errorf("node %s did not exit within %v", n.ID, d)
	}
}

// Signal sends sig to the node's process. It returns the CLOCK_MONOTONIC time
// just before the signal was sent.
func (n *Node) Signal(sig syscall.Signal) (int64, error) {
	at := monotime.Now()
	err := n.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		n.frozen = err == nil
	case syscall.SIGCONT:
		n.frozen = false
	}
	return at, err
}

// Kill sends SIGKILL and waits for the process to be gone. It returns when the
// signal was sent.
func (n *Node) Kill() (int64, error) {
	at := monotime.Now()
	n.killed.Store(at)
	_, err := n.Signal(syscall.SIGKILL)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return at, err
	}
	<-n.exited
	return at, nil
}

// Close stops every node (SIGKILL; frozen ones are thawed first) and waits.
func (c *Cluster) Close() {
	c.mu.Lock()
	nodes := append([]*Node(nil), c.order...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n.Exited() {
			continue
		}
		if n.frozen {
			_, _ = n.Signal(syscall.SIGCONT)
		}
		_, _ = n.Kill()
	}
}

// Poll reads the records appended to every node's file since the last call and
// returns them (in mono_ns order); they are also kept for Events.
func (c *Cluster) Poll() ([]eventlog.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := c.pending
	c.pending = nil
	for _, t := range c.tails {
		rs, err := t.Next()
		if err != nil {
			return fresh, err
		}
		fresh = append(fresh, rs...)
	}
	eventlog.SortByMono(fresh)
	for _, r := range fresh {
		if !c.opts.ForgetHeartbeats || r.Event != "heartbeat_ok" {
			c.events = append(c.events, r)
		}
	}
	return fresh, nil
}

// Events returns every record read so far, sorted by mono_ns.
func (c *Cluster) Events() []eventlog.Record {
	c.mu.Lock()
	out := append([]eventlog.Record(nil), c.events...)
	c.mu.Unlock()
	eventlog.SortByMono(out)
	return out
}

// pollEvery paces WaitFor. Figures come from the records' own timestamps, so a
// coarser poll costs no accuracy, and it leaves the CPU to the nodes being measured.
const pollEvery = 5 * time.Millisecond

// WaitFor polls the nodes' files until a new record satisfies match, and returns it.
// Records read while waiting stay available through Events.
func (c *Cluster) WaitFor(ctx context.Context, match func(eventlog.Record) bool) (eventlog.Record, error) {
	for {
		fresh, err := c.Poll()
		if err != nil {
			return eventlog.Record{}, err
		}
		for _, r := range fresh {
			if match(r) {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return eventlog.Record{}, fmt.Errorf("waiting for an event: %w", ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// Leader returns the node whose gate for scope is open according to the events read
// so far ("" if none), with its epoch.
func (c *Cluster) Leader(scope string) (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var l Leadership
	for _, r := range c.events {
		if r.Scope == scope || r.Event == ProcessExit {
			l.Apply(r)
		}
	}
	return l.Leader(scope)
}

// Leadership folds event records, in mono_ns order, into the open gates of every
// scope: the one way the harnesses tell who leads. A caller that follows many
// scopes feeds it Poll's fresh records instead of rescanning Events.
type Leadership struct {
	open map[string]map[string]int64 // scope → node → epoch of its open gate
}

// Apply folds one record in.
func (l *Leadership) Apply(r eventlog.Record) {
	if l.open == nil {
		l.open = map[string]map[string]int64{}
	}
	switch r.Event {
	case "gate_open":
		if l.open[r.Scope] == nil {
			l.open[r.Scope] = map[string]int64{}
		}
		l.open[r.Scope][r.Node] = r.Epoch
	case "gate_closed", "lost", "resigned":
		delete(l.open[r.Scope], r.Node)
	case ProcessExit: // a dead process's gates are all closed
		for _, nodes := range l.open {
			delete(nodes, r.Node)
		}
	}
}

// Leader returns the node with the highest-epoch open gate for scope ("" if none)
// and that epoch.
func (l *Leadership) Leader(scope string) (string, int64) {
	var node string
	var epoch int64
	for n, e := range l.open[scope] {
		if e > epoch {
			node, epoch = n, e
		}
	}
	return node, epoch
}
