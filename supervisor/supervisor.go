package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/monotime"
)

// Restart is what happens when the child exits on its own while leading.
type Restart string

// Restart policies.
const (
	// RestartNever: the scope is released and Run returns the child's exit code.
	RestartNever Restart = "never"
	// RestartOnFailure: a non-zero exit restarts the child (with backoff); exit 0
	// is done, as with RestartNever.
	RestartOnFailure Restart = "on-failure"
	// RestartAlways: the child is restarted (with backoff) whatever its exit.
	RestartAlways Restart = "always"
)

// DrainMargin is the time between SIGKILL at the end of the command's drain and
// the Elector's release of the term: a killed group is gone (reaped) well
// within it, so the successor's command never overlaps this one.
const DrainMargin = time.Second

// LossHold is the Elector's Config.HoldGuardOnLoss under a supervisor: after a
// lost session, the node keeps its guard, and so every successor's gate
// closed, until the killed child's group is reaped (milliseconds; a child stuck
// in the kernel at most this long).
const LossHold = 500 * time.Millisecond

// Restart backoff: doubles from the first to the last, reset once a child has
// run for backoffReset.
const (
	backoffFirst = 100 * time.Millisecond
	backoffLast  = 30 * time.Second
	backoffReset = 10 * time.Second
)

// Config describes one supervised command.
type Config struct {
	// Scope is the scope the command runs under; the Elector must campaign for it.
	Scope string
	// Command is the program and its arguments; Command[0] is resolved with
	// exec.LookPath by Check.
	Command []string
	// Guard is how to start a guard process: the pgleader binary and GuardArg
	// (the command is appended after "--").
	Guard []string
	// Env is the child's base environment (default os.Environ()); the
	// leadership variables are added to it.
	Env []string
	// Restart is the policy for a child that exits while leading (default never).
	Restart Restart
	// DrainTimeout: after SIGTERM, how long the child's group may run before
	// SIGKILL (default: the Elector's Config.DrainTimeout less DrainMargin). The
	// Elector's must be at least DrainTimeout + DrainMargin: it releases the term
	// when its own drain time is over, and the group must be gone by then.
	DrainTimeout time.Duration
	// Once runs the command at most once: when it exits (whatever its code) the
	// scope is released and Run returns its code. Wait bounds the wait for
	// leadership; with Wait 0, Run waits only for the first claim round.
	Once bool
	Wait time.Duration
	// Ledger, with OncePer or RunKey, makes Once hold across hosts: a run that
	// completed (exit 0) for the current period (or key) is not run again. A
	// run that failed, or whose term ended first, did not complete: a host that
	// wins the scope later runs it again, so hosts that fire together with a
	// Wait retry a failed run, each in turn, for as long as their Wait lasts.
	Ledger  *Ledger
	OncePer time.Duration
	RunKey  string
	// SkippedExit is the code Run returns when Once did not run the command
	// (another node led past Wait, or the period's run had completed): 0 by
	// default, like flock -n; another code tells "skipped" from "ran" (flock -E).
	SkippedExit int
	// Listen is the local API's address, passed to the child as PGLEADER_LISTEN.
	Listen string
	// Events is the node's events file, passed to the child as PGLEADER_EVENTS
	// (a child may append lines of its own: one write(2) per line, O_APPEND).
	// The guard records there a child it killed because the supervisor died.
	Events string
	// Recorder, if set, records the child's starts and exits (the events file).
	Recorder Recorder
	// RecordExit, if set, records in the term's row that the child ended on its
	// own while the term was led (code: exit status or 128+signal; cause: exit
	// or signal), before the term ends or the child restarts: history then says
	// the term ended after its child crashed, not that it was shut down cleanly.
	// ExitRecorderTo returns one (pgleader.term_child_exit). An error is logged.
	RecordExit func(ctx context.Context, tok election.Token, code int, cause string) error
	// Report, if set, is called with the new Status at every change (the child
	// started, exited, restarted; a drain). It must not block: pgleader run hands
	// the latest to a goroutine that records it in pgleader.nodes.supervisor.
	Report func(Status)
	Log    *slog.Logger
}

// Recorder records what the supervisor does to the child.
type Recorder interface {
	// Child records a child's start or exit; mono is when it happened
	// (CLOCK_MONOTONIC ns; for an exit, when the guard reaped the child).
	// reaped, for an exit, is when the guard reaped it (0: unknown).
	Child(event, scope string, epoch int64, pid, code int, cause string, mono, reaped int64)
}

// Child events.
const (
	EventChildStarted = "child_started"
	EventChildExited  = "child_exited"
)

// ErrNotRun reports that Once did not run the command: another node led the
// scope, or the period's run had already completed. Run returns it with exit
// code 0.
var ErrNotRun = errors.New("pgleader: the command was not run")

// Check resolves and validates the configuration before anything starts: a
// command that cannot be executed is refused here, never after winning.
func (c *Config) Check() error {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return errors.New("no command: put it after --, e.g. pgleader run --scope nightly -- /usr/local/bin/job")
	}
	path, err := exec.LookPath(c.Command[0])
	if err != nil {
		return fmt.Errorf("cannot run %q: %v; give an executable file or a program on PATH", c.Command[0], errors.Unwrap(err))
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return fmt.Errorf("cannot run %q: not an executable file", c.Command[0])
	}
	c.Command = append([]string{path}, c.Command[1:]...)
	switch c.Restart {
	case "":
		c.Restart = RestartNever
	case RestartNever, RestartOnFailure, RestartAlways:
	default:
		return fmt.Errorf("invalid restart policy %q: use never, on-failure or always", c.Restart)
	}
	if c.Once && c.Restart != RestartNever {
		return errors.New("--once runs the command once: it takes no --restart policy")
	}
	if (c.OncePer > 0 || c.RunKey != "") && (!c.Once || c.Ledger == nil) {
		return errors.New("a run period or key needs Once and a Ledger")
	}
	if c.OncePer < 0 || (c.OncePer > 0 && c.OncePer < time.Second) {
		return fmt.Errorf("invalid --once-per %v: a period of at least 1s, e.g. 24h", c.OncePer)
	}
	if c.Wait < 0 {
		return fmt.Errorf("invalid --wait %v: 0 (one claim round) or a positive duration", c.Wait)
	}
	if c.SkippedExit < 0 || c.SkippedExit > 255 {
		return fmt.Errorf("invalid --skipped-exit %d: an exit code, 0 to 255", c.SkippedExit)
	}
	if c.SkippedExit != 0 && !c.Once {
		return errors.New("--skipped-exit applies to --once (a run that may be skipped): add --once, --once-per or --once-key")
	}
	if len(c.Guard) == 0 {
		return errors.New("no guard command")
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Status is the supervisor's state, for the local API and status.
type Status struct {
	Command  string `json:"command"` // the command's base name (never its arguments: they may hold secrets)
	State    string `json:"state"`   // waiting, running, draining, backoff, done
	PID      int    `json:"pid,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Restarts int    `json:"restarts"`
	LastExit *int   `json:"last_exit,omitempty"`
	// LastExitCause is how the last child ended: exit or signal (on its own),
	// killed, drained, deadline or guard_gone (stopped when the term ended).
	LastExitCause string `json:"last_exit_cause,omitempty"`
	// LastExitEpoch is the term the last child ran in.
	LastExitEpoch int64 `json:"last_exit_epoch,omitempty"`
}

// Supervisor runs a command while its node leads a scope.
type Supervisor struct {
	cfg   Config
	e     *election.Elector
	guard *guardProc

	mu     sync.Mutex
	status Status

	pid atomic.Int64 // the running child's group, 0 if none

	parent context.Context // Run's: ended when pgleader run is stopped

	// exits receives the child's exits (and the guard's disappearance).
	exits chan report
}

// New checks cfg and returns a Supervisor for the scope cfg.Scope of e (which
// must not be started yet).
func New(e *election.Elector, cfg Config) (*Supervisor, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(e.Scopes(), func(sc *election.Scope) bool { return sc.Name() == cfg.Scope }) {
		return nil, fmt.Errorf("the elector does not campaign for scope %q", cfg.Scope)
	}
	d := e.Config().DrainTimeout
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = d - DrainMargin
	}
	if cfg.DrainTimeout <= 0 || cfg.DrainTimeout+DrainMargin > d {
		return nil, fmt.Errorf("the elector's drain timeout (%v) must exceed the command's (%v) by %v: the term is released when it ends, and the command's group must be gone by then", d, cfg.DrainTimeout, DrainMargin)
	}
	s := &Supervisor{cfg: cfg, e: e, exits: make(chan report, 4)}
	s.status = Status{Command: filepath.Base(cfg.Command[0]), State: "waiting"}
	return s, nil
}

// Status returns a copy of the supervisor's state.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	return st
}

func (s *Supervisor) setState(state string, pid int, epoch int64) {
	s.mu.Lock()
	s.status.State, s.status.PID, s.status.Epoch = state, pid, epoch
	st := s.status
	s.mu.Unlock()
	if s.cfg.Report != nil {
		s.cfg.Report(st)
	}
}

// Run starts the guard and the Elector, runs the command under the policy until
// ctx ends or the policy says it is done, and returns the exit code `pgleader
// run` should exit with. It returns only after the Elector has stopped (every
// scope released) and the guard has exited, with no child left running.
func (s *Supervisor) Run(ctx context.Context) (int, error) {
	g, err := startGuard(append(append(append([]string(nil), s.cfg.Guard...), "--"), s.cfg.Command...))
	if err != nil {
		return 1, err
	}
	s.guard, s.parent = g, ctx
	go s.readReports()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := s.e.Start(runCtx); err != nil {
		return 1, errors.Join(err, g.close())
	}
	// Registered now: replace what an earlier process of this node id recorded.
	s.setState("waiting", 0, 0)
	// The gate's deadline, renewed by every heartbeat, goes to the guard: a
	// frozen supervisor cannot renew it, and the guard kills the group then.
	s.e.Observe(func(ev election.Event) {
		if s.pid.Load() == 0 {
			return
		}
		for _, t := range ev.Terms {
			if t.Scope == s.cfg.Scope && ev.TrustUntilMonoNS > 0 {
				_ = g.deadline(ev.TrustUntilMonoNS)
			}
		}
		if ev.Scope == s.cfg.Scope && ev.TrustUntilMonoNS > 0 {
			_ = g.deadline(ev.TrustUntilMonoNS)
		}
	})

	code, runErr := 0, error(nil)
	var once sync.Once
	finish := func(c int, err error) {
		once.Do(func() { code, runErr = c, err; stop() })
	}
	if s.cfg.Once {
		if !s.awaitTurn(runCtx, finish) {
			return s.end(code, runErr)
		}
	}
	leadErr := s.e.Scope(s.cfg.Scope).Lead(runCtx, func(lctx context.Context, tok election.Token) error {
		return s.term(lctx, tok, finish)
	})
	stop()
	return s.end(code, errors.Join(runErr, leadErr))
}

// end waits for the Elector to release everything and the guard to exit.
func (s *Supervisor) end(code int, err error) (int, error) {
	werr := s.e.Wait()
	gerr := s.guard.close()
	s.setState("done", 0, 0)
	if errors.Is(err, ErrNotRun) {
		return s.cfg.SkippedExit, nil
	}
	if err = errors.Join(err, werr, gerr); err != nil && code == 0 {
		code = 1
	}
	return code, err
}

// awaitTurn, for Once, waits until this node leads the scope (true), or until
// another node is seen leading it past Wait (false, finishing with ErrNotRun).
func (s *Supervisor) awaitTurn(ctx context.Context, finish func(int, error)) bool {
	sc := s.e.Scope(s.cfg.Scope)
	cfg := s.e.Config()
	// With Wait 0, one claim round: a free scope is claimed within a heartbeat
	// interval of the node's first claims (a candidate of higher priority may
	// defer it that long). The round is counted from the node's first heartbeat,
	// which follows its session's opening and first claims, not from the start of
	// the process: on a loaded host the session may take longer than a round to
	// open (seen: a cron host exiting "no leader" before it had claimed at all).
	// Until then the bound is the time a session may take to open.
	var deadline time.Time
	if s.cfg.Wait > 0 {
		deadline = time.Now().Add(s.cfg.Wait)
	} else {
		deadline = time.Now().Add(sessionUpBound)
	}
	roundFrom := time.Time{}
	for {
		if sc.Role() == election.RoleLeader {
			return true
		}
		if node, epoch := sc.Leader(); node != "" && node != s.e.NodeID() && s.cfg.Wait == 0 {
			s.cfg.Log.Info("another node leads: not running the command", "scope", s.cfg.Scope, "leader", node, "epoch", epoch)
			finish(0, ErrNotRun)
			return false
		}
		if s.cfg.Wait == 0 && roundFrom.IsZero() && !s.e.Health().LastHeartbeat.IsZero() {
			roundFrom = time.Now()
			deadline = roundFrom.Add(cfg.HeartbeatInterval + cfg.HeartbeatTimeout)
		}
		if ctx.Err() != nil {
			finish(0, nil)
			return false
		}
		if time.Now().After(deadline) {
			node, epoch := sc.Leader()
			if node == "" {
				finish(1, fmt.Errorf("no leader of scope %q within --wait %v: is the database reachable?", s.cfg.Scope, s.cfg.Wait))
				return false
			}
			s.cfg.Log.Info("another node leads: not running the command", "scope", s.cfg.Scope, "leader", node, "epoch", epoch, "waited", s.cfg.Wait)
			finish(0, ErrNotRun)
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// recordExitTimeout bounds the recording of a child's exit in its term: the
// term's end (or the child's restart) waits for it at most this long.
const recordExitTimeout = 2 * time.Second

// sessionUpBound bounds, with --wait 0, the wait for the node's session to open
// and make its first claims (the engine gives a session 10 s to open).
const sessionUpBound = 15 * time.Second

// readReports turns the guard's reports into the supervisor's state and its
// exits channel; the guard's disappearance is an exit with cause "guard_gone".
func (s *Supervisor) readReports() {
	for line := range s.guard.reports {
		r := parseReport(line)
		switch r.kind {
		case "started":
			s.pid.Store(int64(r.pid))
			s.exits <- r
		case "failed", "exited":
			s.pid.Store(0)
			s.exits <- r
		}
	}
	if pid := s.pid.Swap(0); pid != 0 {
		killGroup(int(pid))
	}
	s.exits <- report{kind: "exited", code: 137, cause: "guard_gone"}
	close(s.exits)
}

// term runs the command during one term (one call of Lead's function).
func (s *Supervisor) term(ctx context.Context, tok election.Token, finish func(int, error)) error {
	var key string
	if s.cfg.Ledger != nil {
		done, k, err := s.cfg.Ledger.Begin(ctx, tok, s.cfg.OncePer, s.cfg.RunKey)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			finish(1, err)
			return nil
		}
		if done != nil {
			s.cfg.Log.Info("this period's run already completed: not running the command", "scope", tok.Scope,
				"run_key", k, "completed_by", done.Holder, "epoch", done.Epoch, "at", done.At)
			finish(0, ErrNotRun)
			return nil
		}
		key = k
	}
	backoff := backoffFirst
	for restarts := 0; ; restarts++ {
		started := time.Now()
		code, cause, err := s.runChild(ctx, tok, key)
		if err != nil {
			finish(1, err)
			return nil
		}
		switch cause {
		case "killed", "drained", "deadline", "guard_gone":
			if s.cfg.Once && s.parent.Err() == nil {
				// Not a stop of pgleader run: the term ended under the command
				// (lost, resigned, handed over). It did not complete; say so.
				why := error(errors.New(cause))
				if ctx.Err() != nil {
					why = context.Cause(ctx)
				}
				finish(1, fmt.Errorf("the command was stopped before it completed: leadership of %s ended (%v)", tok.Scope, why))
			}
			return ctx.Err() // leadership ended, or a stop: Lead decides what follows
		}
		// The child exited on its own while leading.
		if s.cfg.RecordExit != nil {
			rctx, cancel := context.WithTimeout(ctx, recordExitTimeout)
			if err := s.cfg.RecordExit(rctx, tok, code, cause); err != nil {
				s.cfg.Log.Warn("could not record the command's exit in the term", "scope", tok.Scope, "epoch", tok.Epoch, "exit_code", code, "err", err)
			}
			cancel()
		}
		if s.cfg.Ledger != nil {
			if err := s.cfg.Ledger.End(ctx, tok, key, code); err != nil {
				s.cfg.Log.Warn("could not record the run's end", "scope", tok.Scope, "run_key", key, "err", err)
			}
		}
		if s.cfg.Once || s.cfg.Restart == RestartNever || (s.cfg.Restart == RestartOnFailure && code == 0) {
			finish(code, nil)
			return nil
		}
		if time.Since(started) >= backoffReset {
			backoff = backoffFirst
		}
		s.mu.Lock()
		s.status.Restarts++
		s.mu.Unlock()
		s.setState("backoff", 0, tok.Epoch)
		s.cfg.Log.Info("restarting the command", "scope", tok.Scope, "exit_code", code, "after", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tok.Draining():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffLast)
	}
}

// runChild starts the command and waits for it to exit, stopping it when the
// term ends. cause is "exit" or "signal" when the child ended on its own,
// "killed" (the gate closed), "drained" (a stop), "deadline" (the guard's gate
// deadline passed) or "guard_gone".
func (s *Supervisor) runChild(ctx context.Context, tok election.Token, key string) (code int, cause string, err error) {
	env := append(append([]string(nil), s.cfg.Env...),
		"PGLEADER_SCOPE="+tok.Scope,
		"PGLEADER_EPOCH="+strconv.FormatInt(tok.Epoch, 10),
		"PGLEADER_NODE_ID="+s.e.NodeID(),
		"PGLEADER_HOLDER="+tok.Holder)
	if s.cfg.Listen != "" {
		env = append(env, "PGLEADER_LISTEN="+s.cfg.Listen)
	}
	if s.cfg.Events != "" {
		env = append(env, "PGLEADER_EVENTS="+s.cfg.Events)
	}
	if key != "" {
		env = append(env, "PGLEADER_RUN_KEY="+key)
	}
	// Arm the guard with the gate's deadline before the child exists: read the
	// clock first, so the deadline is never later than the gate's.
	now := monotime.Now()
	if rem := s.e.Scope(tok.Scope).TrustRemaining(); rem > 0 {
		if err := s.guard.deadline(now + int64(rem)); err != nil {
			return 0, "", fmt.Errorf("the guard process is gone: %w", err)
		}
	} else if ctx.Err() != nil {
		return 0, "killed", nil
	}
	if err := s.guard.start(env); err != nil {
		return 0, "", fmt.Errorf("the guard process is gone: %w", err)
	}
	r, ok := <-s.exits
	if !ok || r.kind == "exited" {
		return 137, "guard_gone", nil
	}
	if r.kind == "failed" {
		return 0, "", fmt.Errorf("cannot start %s: %s", s.cfg.Command[0], r.msg)
	}
	pid := r.pid
	s.setState("running", pid, tok.Epoch)
	s.record(EventChildStarted, tok, pid, 0, "", monotime.Now(), 0)
	s.cfg.Log.Info("command started", "scope", tok.Scope, "epoch", tok.Epoch, "pid", pid)

	var stopped time.Time
	var killedAt int64 // mono ns of this loop's own SIGKILL to the group
	how := ""
	draining, done := tok.Draining(), ctx.Done()
	var drainTimer <-chan time.Time
	for {
		select {
		case r, ok := <-s.exits:
			if !ok {
				r = report{code: 137, cause: "guard_gone", mono: monotime.Now()}
			}
			code, cause = r.code, r.cause
			if how != "" && (cause == "exit" || cause == "signal" || cause == "kill") {
				cause = how
			}
			s.mu.Lock()
			c := code
			s.status.LastExit, s.status.LastExitCause, s.status.LastExitEpoch = &c, cause, tok.Epoch
			s.mu.Unlock()
			s.setState("waiting", 0, tok.Epoch)
			_ = s.guard.deadline(0)
			mono := r.mono
			if killedAt != 0 && (mono == 0 || killedAt < mono) {
				mono = killedAt // SIGKILLed here first, without the guard's round trip
			}
			if cause != "deadline" { // the guard recorded that one: this process was frozen
				s.record(EventChildExited, tok, pid, code, cause, mono, r.reaped)
			}
			attrs := []any{"scope", tok.Scope, "epoch", tok.Epoch, "pid", pid, "exit_code", code, "cause", cause}
			if !stopped.IsZero() {
				attrs = append(attrs, "stopped_in", time.Since(stopped).Round(time.Microsecond))
			}
			s.cfg.Log.Info("command ended", attrs...)
			return code, cause, nil
		case <-done:
			// The gate closed (or the drain time is over): not one more moment.
			done = nil
			if killedAt == 0 {
				killedAt = monotime.Now()
			}
			killGroup(pid)
			_ = s.guard.kill()
			if how == "" || how == "drained" {
				how = "killed"
			}
			if stopped.IsZero() {
				stopped = time.Now()
			}
			s.setState("stopping", pid, tok.Epoch)
		case <-draining:
			draining = nil
			if how == "killed" {
				// A loss closes Draining as well as the gate: whichever this
				// loop sees first, the group is killed, never only asked.
				continue
			}
			how, stopped = "drained", time.Now()
			_ = s.guard.term()
			drainTimer = time.After(s.cfg.DrainTimeout)
			s.setState("draining", pid, tok.Epoch)
			s.cfg.Log.Info("stopping the command: SIGTERM to its group", "scope", tok.Scope, "pid", pid, "drain_timeout", s.cfg.DrainTimeout)
		case <-drainTimer:
			drainTimer = nil
			s.cfg.Log.Warn("drain timeout: SIGKILL to the command's group", "scope", tok.Scope, "pid", pid)
			if killedAt == 0 {
				killedAt = monotime.Now()
			}
			killGroup(pid)
			_ = s.guard.kill()
		}
	}
}

func (s *Supervisor) record(event string, tok election.Token, pid, code int, cause string, mono, reaped int64) {
	if s.cfg.Recorder != nil {
		if mono == 0 {
			mono = monotime.Now()
		}
		s.cfg.Recorder.Child(event, tok.Scope, tok.Epoch, pid, code, cause, mono, reaped)
	}
}
