package conformance

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
)

// fault is one scenario: who leads when it strikes, what it does, who must
// lead next and how the struck term must have been released.
type fault struct {
	name, about string
	leader      string // "foreign" or "ref": who leads when it strikes
	next        string // "foreign", "ref" or "any": who must lead next
	reason      string // terms.release_reason of the struck term ("": the successor's choice)
	needsServer bool   // restarts PostgreSQL
	expect      checker.Footprint
	strike      func(ctx context.Context, e *env, n *cluster.Node, epoch int64) (strike, error)
}

var (
	takeover = checker.Footprint{Takeover: true, FaultApplied: true}
	resumed  = checker.Footprint{Resumed: true, FaultApplied: true}
)

var faults = []fault{
	{name: "kill9", about: "kill -9 of the foreign node while it leads; a reference node takes over; the foreign node restarts",
		leader: "foreign", next: "ref", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			if _, err := n.Kill(); err != nil {
				return strike{}, err
			}
			return strike{undo: e.restart(n.ID)}, nil
		}},
	{name: "sigterm", about: "SIGTERM of the foreign node while it leads: it drains, releases as shutdown, exits 0; a reference node takes over",
		leader: "foreign", next: "ref", reason: "shutdown", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			if _, err := n.Signal(syscall.SIGTERM); err != nil {
				return strike{}, err
			}
			return strike{undo: func(ctx context.Context) error {
				if err := n.Wait(waitBound); err != nil {
					e.broke("the foreign node did not exit 0 within %v of SIGTERM: %v", waitBound, err)
					_, _ = n.Kill()
				}
				return e.restart(n.ID)(ctx)
			}}, nil
		}},
	{name: "stop", about: "SIGSTOP of the foreign node while it leads, until a reference node took over, then SIGCONT: its gate closed first, it follows again",
		leader: "foreign", next: "ref", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			if _, err := n.Signal(syscall.SIGSTOP); err != nil {
				return strike{}, err
			}
			return strike{undo: func(ctx context.Context) error {
				e.pause(ctx, 100*time.Millisecond, 300*time.Millisecond)
				_, err := n.Signal(syscall.SIGCONT)
				return err
			}}, nil
		}},
	{name: "terminate", about: "pg_terminate_backend of the foreign node's leadership session; its process lives on, notices, and campaigns again",
		leader: "foreign", next: "any", expect: resumed,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			return strike{}, e.terminate(ctx)
		}},
	{name: "pg-restart", about: "PostgreSQL crashes (stop -m immediate) and starts while the foreign node leads: every session ends; leadership resumes",
		leader: "foreign", next: "any", needsServer: true, expect: resumed,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			if err := e.o.Server.Restart(ctx, "immediate"); err != nil {
				return strike{}, err
			}
			return strike{}, nil
		}},
	{name: "resign", about: "pgleader resign while the foreign node leads: it drains, releases as resigned, and sits out its cooldown",
		leader: "foreign", next: "ref", reason: "resigned", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, epoch int64) (strike, error) {
			out, err := exec.CommandContext(ctx, e.o.Bin, "resign", e.scope, "--epoch", strconv.FormatInt(epoch, 10), "--dsn", e.o.DSN).CombinedOutput()
			if err != nil {
				return strike{}, fmt.Errorf("pgleader resign: %w: %s", err, strings.TrimSpace(string(out)))
			}
			return strike{}, nil
		}},
	{name: "handover-from", about: "pgleader handover from the foreign node to a reference node: it releases as handed_over, that node leads next",
		leader: "foreign", next: "ref", reason: "handed_over", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			to := pick(e.rng, e.runningRefs())
			return strike{nextBy: to}, e.handover(ctx, to)
		}},
	{name: "handover-to", about: "pgleader handover from a reference node to the foreign node: the foreign node, and only it, claims the reserved scope",
		leader: "ref", next: "foreign", reason: "handed_over", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			return strike{nextBy: Foreign}, e.handover(ctx, Foreign)
		}},
	{name: "crash-to-foreign", about: "the other reference node is killed, then the leading one (kill -9): the foreign node, the only candidate left, takes over",
		leader: "ref", next: "foreign", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			other, err := e.killOther(n)
			if err != nil {
				return strike{}, err
			}
			// The foreign node's watch re-aims at the leader first (a crash of
			// the peer it watched, then a ring re-read): the takeover is then the
			// ring's, not the heartbeat's fallback.
			time.Sleep(300 * time.Millisecond)
			at, err := n.Kill()
			if err != nil {
				return strike{}, err
			}
			return strike{at: at, undo: func(ctx context.Context) error {
				if err := e.restart(other)(ctx); err != nil {
					return err
				}
				return e.restart(n.ID)(ctx)
			}}, nil
		}},
	{name: "frozen-to-foreign", about: "the other reference node is killed, the leading one frozen (SIGSTOP) and its leadership session terminated: the foreign node claims at once and must wait for the frozen node's guard (or its trust) before its gate opens",
		leader: "ref", next: "foreign", expect: takeover,
		strike: func(ctx context.Context, e *env, n *cluster.Node, _ int64) (strike, error) {
			other, err := e.killOther(n)
			if err != nil {
				return strike{}, err
			}
			at, err := n.Signal(syscall.SIGSTOP)
			if err != nil {
				return strike{}, err
			}
			if err := e.terminate(ctx); err != nil {
				_, _ = n.Signal(syscall.SIGCONT)
				return strike{}, err
			}
			return strike{at: at, undo: func(ctx context.Context) error {
				if _, err := n.Signal(syscall.SIGCONT); err != nil {
					return err
				}
				return e.restart(other)(ctx)
			}}, nil
		}},
}

// restart returns a function that starts node id again once its process is gone.
func (e *env) restart(id string) func(context.Context) error {
	return func(ctx context.Context) error {
		if n := e.c.Node(id); n != nil && !n.Exited() {
			if err := n.Wait(waitBound); err != nil {
				return err
			}
		}
		return e.start(id)
	}
}

// killOther kills the reference node that does not lead, so that the foreign
// node is the only candidate left, and returns its id.
func (e *env) killOther(leader *cluster.Node) (string, error) {
	for _, id := range refs {
		if id == leader.ID {
			continue
		}
		if n := e.c.Node(id); n != nil && !n.Exited() {
			t, err := n.Kill()
			e.faults = append(e.faults, checker.Fault{Kind: e.f.name + "-other", Node: id, StartMono: t, EndMono: t})
			return id, err
		}
	}
	return "", fmt.Errorf("no other reference node running beside %s", leader.ID)
}

// terminate ends the scope holder's leadership session with pg_terminate_backend.
func (e *env) terminate(ctx context.Context) error {
	var ok *bool
	err := e.admin.QueryRow(ctx, `SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope = $1`, e.scope).Scan(&ok)
	if err != nil {
		return err
	}
	if ok == nil || !*ok {
		return fmt.Errorf("no leadership session to terminate for %s (holder_pid not set)", e.scope)
	}
	return nil
}
