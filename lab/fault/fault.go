// Package fault is the lab's catalogue of faults: every way the benchmarks
// (lab/bench), the chaos harness (lab/chaos) and the demo (demo/) strike a
// pgleader cluster is defined here once — its name, what it does and how it is
// applied — and they apply it from here.
//
// The names those commands show are theirs and stay as they are, each a contract
// of its own: bench's --scenarios (crash, graceful, frozen, …), chaos's scenario
// names (kill9, stop-long, net-hang, …) and the demo's keys (K, Z, H, …). Each
// maps onto a fault of this catalogue; a scenario adds its own schedule (when to
// strike, how long a fault holds, what must follow).
//
// A Fault strikes a Target: the fields it needs, and no others, must be set (the
// catalogue's doc comments say which). Apply returns when it struck, on the
// CLOCK_MONOTONIC clock of the nodes' events, so a takeover is measured from that
// moment. A fault that holds (a freeze, a network fault) lasts until Undo.
//
// The package links neither toxiproxy nor the lab's servers: the demo ships in
// the production binary and applies its faults from here too. Network faults act
// on any Link (lab/faultnet's Proxy and Namespace, the demo's own forwarder).
package fault

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/monotime"
)

// Fault is one kind of fault.
type Fault struct {
	// Name is the fault's kind as a history records it (checker.Fault.Kind).
	Name string
	// About says what the fault does, in one line.
	About string

	// apply and undo return when they struck: a process fault, when its signal
	// was sent; any other, when it began (timed).
	apply func(ctx context.Context, t Target) (int64, error)
	undo  func(ctx context.Context, t Target) (int64, error) // nil: nothing to undo
}

// Target is what a fault strikes. Each fault reads the fields its doc comment
// names.
type Target struct {
	Node   Process // a node's process (the leader's, usually)
	Scope  string  // the scope struck (Terminate, Handover)
	Admin  Execer  // a session on the database with the right to terminate backends (Terminate)
	Link   Link    // the node's path to PostgreSQL (network faults)
	Server Server  // a PostgreSQL server (Restart, Crash, Promote)
	Bin    string  // the pgleader binary (Handover)
	DSN    string  // the database, for commands (Handover)
	To     string  // the node that takes over (Handover)
}

// Process is a node's process: lab/cluster's Node.
type Process interface {
	// Signal sends sig and returns the CLOCK_MONOTONIC time just before.
	Signal(sig syscall.Signal) (int64, error)
	// Kill sends SIGKILL, waits until the process is gone, and returns when the
	// signal was sent.
	Kill() (int64, error)
}

// Execer runs a statement: a *pgx.Conn.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Link is a node's path to PostgreSQL that can fail. Heal undoes every fault on
// it. Each network fault needs one more method, named in its doc comment:
// lab/faultnet's Proxy has Hang, Reset and Latency, its Namespace has Cut, the
// demo's forwarder has Hang.
type Link interface {
	Heal() error
}

// Server is a PostgreSQL server: lab/pgserver's Server.
type Server interface {
	// Restart stops the server in mode (pg_ctl's -m) and starts it again.
	Restart(ctx context.Context, mode string) error
	// Stop stops the server in mode.
	Stop(mode string) error
	// Promote makes a standby a primary and returns once it accepts writes.
	Promote(ctx context.Context) error
}

// Apply strikes t and returns when, on the CLOCK_MONOTONIC clock; for a fault
// applied in steps (a restart, a handover), when its first step began. The
// fault is applied once Apply returns: a restarted server is up again, a killed
// process gone, a handover command done.
func (f Fault) Apply(ctx context.Context, t Target) (int64, error) { return f.apply(ctx, t) }

// Undo ends a fault that holds and returns when it began to; for any other
// fault it does nothing.
func (f Fault) Undo(ctx context.Context, t Target) (int64, error) {
	if f.undo == nil {
		return monotime.Now(), nil
	}
	return f.undo(ctx, t)
}

// signal is a fault that sends sig to Target.Node.
func signal(sig syscall.Signal) func(context.Context, Target) (int64, error) {
	return func(_ context.Context, t Target) (int64, error) { return t.Node.Signal(sig) }
}

// timed is a fault that does fn, struck when fn began.
func timed(fn func(ctx context.Context, t Target) error) func(context.Context, Target) (int64, error) {
	return func(ctx context.Context, t Target) (int64, error) {
		at := monotime.Now()
		return at, fn(ctx, t)
	}
}

// The process faults: Target.Node.
var (
	// Kill9 kills the process (SIGKILL) and waits until it is gone: a crash,
	// with no time to release anything.
	Kill9 = Fault{Name: "kill9", About: "kill -9 of a node: it releases nothing, its sessions end with it",
		apply: func(_ context.Context, t Target) (int64, error) { return t.Node.Kill() }}
	// SIGTERM asks the node to stop: it drains, hands over what it leads and
	// exits.
	SIGTERM = Fault{Name: "sigterm", About: "SIGTERM of a node: it drains, hands over what it leads and exits",
		apply: signal(syscall.SIGTERM)}
	// Resign makes the node resign every scope it leads (SIGUSR1); it stays a
	// candidate.
	Resign = Fault{Name: "resign", About: "SIGUSR1 of a node: it resigns every scope it leads and stays a candidate",
		apply: signal(syscall.SIGUSR1)}
	// Freeze stops the process (SIGSTOP) until Undo (SIGCONT): a pause of the
	// whole process, as a long GC pause or a stopped VM makes it.
	Freeze = Fault{Name: "freeze", About: "SIGSTOP of a node until SIGCONT: its trust runs out, then the server drops its session",
		apply: signal(syscall.SIGSTOP), undo: signal(syscall.SIGCONT)}
)

// The database faults.
var (
	// Terminate ends the leadership session of Target.Scope's holder on the
	// server (pg_terminate_backend through Target.Admin); the node's process
	// lives on.
	Terminate = Fault{Name: "terminate", About: "pg_terminate_backend of a scope's leadership session; the node's process lives on",
		apply: timed(func(ctx context.Context, t Target) error {
			_, err := t.Admin.Exec(ctx, "SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope = $1", t.Scope)
			return err
		})}
	// Handover hands Target.Scope over to Target.To with `pgleader handover`
	// (Target.Bin, on Target.DSN), and returns once the command does: the
	// target leads.
	Handover = Fault{Name: "handover", About: "pgleader handover of a scope to a chosen follower",
		apply: timed(func(ctx context.Context, t Target) error {
			out, err := exec.CommandContext(ctx, t.Bin, "handover", t.Scope, "--to", t.To, "--timeout", "10s", "--dsn", t.DSN).CombinedOutput()
			if err != nil {
				return fmt.Errorf("pgleader handover %s --to %s: %w: %s", t.Scope, t.To, err, out)
			}
			return nil
		})}
	// Crash stops Target.Server as a crash does (pg_ctl stop -m immediate) and
	// leaves it down: the first half of a failover.
	Crash = Fault{Name: "pg-crash", About: "PostgreSQL stopped as by a crash (-m immediate) and left down",
		apply: timed(func(_ context.Context, t Target) error { return t.Server.Stop("immediate") })}
	// Promote promotes Target.Server, a streaming standby, to primary: the
	// second half of a failover.
	Promote = Fault{Name: "pg-promote", About: "a streaming standby promoted to primary",
		apply: timed(func(ctx context.Context, t Target) error { return t.Server.Promote(ctx) })}
)

// Restart restarts Target.Server in mode (pg_ctl's -m: fast, or immediate for a
// crash and recovery): every session ends. Its name is pg-<mode>.
func Restart(mode string) Fault {
	return Fault{Name: "pg-" + mode, About: "PostgreSQL restarted with -m " + mode + ": every session ends",
		apply: timed(func(ctx context.Context, t Target) error { return t.Server.Restart(ctx, mode) })}
}

// The network faults: Target.Link, healed by Undo.
var (
	// NetHang silences the link (Target.Link's Hang() error) until Undo: no
	// FIN, no RST, nothing arrives; only the application's own deadlines notice.
	NetHang = Fault{Name: "net-hang", About: "a node's path to PostgreSQL goes silent (no FIN, no RST) until healed",
		apply: onLink("hang", hanger.Hang), undo: onLink("heal", Link.Heal)}
	// NetReset resets every connection on the link (Target.Link's Reset() error),
	// and every new one, until Undo.
	NetReset = Fault{Name: "net-reset", About: "every connection of a node's path to PostgreSQL is reset, new ones too, until healed",
		apply: onLink("reset", resetter.Reset), undo: onLink("heal", Link.Heal)}
	// Partition drops every packet both ways (Target.Link's Cut() error, a
	// network namespace) until Undo: a true silent partition.
	Partition = Fault{Name: "partition", About: "a node's network drops every packet both ways until healed",
		apply: onLink("cut", cutter.Cut), undo: onLink("heal", Link.Heal)}
)

// The methods of a Link that network faults need besides Heal.
type (
	hanger   interface{ Hang() error }
	resetter interface{ Reset() error }
	cutter   interface{ Cut() error }
)

// Latency delays every chunk on the link by d±jitter each way (Target.Link's
// Latency(d, jitter time.Duration) error) until Undo, which removes the delay.
func Latency(d, jitter time.Duration) Fault {
	type latency interface {
		Latency(d, jitter time.Duration) error
	}
	return Fault{Name: "latency", About: fmt.Sprintf("%v±%v latency each way on a node's path to PostgreSQL until removed", d, jitter),
		apply: onLink("delay", func(l latency) error { return l.Latency(d, jitter) }),
		undo:  onLink("delay", func(l latency) error { return l.Latency(0, 0) })}
}

// onLink is a network fault: do, on Target.Link, which must be an L (a link
// with the method the fault needs).
func onLink[L any](what string, do func(L) error) func(context.Context, Target) (int64, error) {
	return timed(func(_ context.Context, t Target) error {
		l, ok := t.Link.(L)
		if !ok {
			return fmt.Errorf("fault: a %T cannot %s", t.Link, what)
		}
		return do(l)
	})
}
