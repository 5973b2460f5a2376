package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/internal/names"
	"github.com/pgleader/pgleader/migrations"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionlog"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/workload"
)

// nodeFlags are the flags of `pgleader node`.
type nodeFlags struct {
	scopes          []string
	id              string
	idSet           bool // --id given: an explicitly empty id is invalid, not the default
	versionTag      string
	interval        time.Duration
	timeout         time.Duration
	trust           time.Duration
	lease           time.Duration
	drain           time.Duration
	priority        int
	preferred       time.Duration
	mode            string
	leaderDSN       string
	events          string
	workInterval    time.Duration
	eventHeartbeats bool // --events-heartbeats (default true)
	listen          listenFlags
	hooks           nodeHooks // zero unless a lab build's --test-* flags set them
}

// nodeHooks are the fault-test hooks of the node's workload. Only a lab build
// (-tags pgleader_lab, node_lab.go) has flags that set them; in the shipped
// binary they stay zero, so its workload always fences and never pauses.
type nodeHooks struct {
	pauseWrite time.Duration // workload.Workload.PauseBeforeWrite
	skipFence  bool          // workload.Workload.UnsafeSkipFence
}

// config is the election configuration the flags describe (not yet validated).
func (f *nodeFlags) config(dsn string) election.Config {
	id := f.id
	if !f.idSet {
		id = names.DefaultNodeID()
	}
	return election.Config{
		DSN: dsn, NodeID: id, Version: f.versionTag, Scopes: f.scopes,
		HeartbeatInterval: f.interval, HeartbeatTimeout: f.timeout,
		TrustWindow: f.trust, SessionLease: f.lease, DrainTimeout: f.drain,
		Priority: f.priority, NeverLead: f.priority == 0, Mode: election.Mode(f.mode),
		FailbackAfter: f.preferred,
	}
}

func (a *app) nodeCommand() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node --scope NAME [--scope NAME …]",
		Short: "Campaign for leadership of one or more scopes until stopped",
		Long: `node runs one candidate: it campaigns for every --scope, holds the scopes it
wins with heartbeats, and hands them over when stopped. SIGTERM or SIGINT drains
(in-flight work gets --drain-timeout), releases every scope (followers take over at
once) and exits 0; a second signal exits at once. SIGUSR1 hands over every scope
the node leads without stopping it (it rejoins as a candidate after a cooldown).

Timing must satisfy heartbeat-interval + heartbeat-timeout < trust-window <
session-lease, with session-lease − trust-window ≥ 100ms: a leader that stops
heartbeating closes its gate (trust window) before the server frees its lock
(session lease). Problems with the database or the configuration are reported
before anything starts.

--events FILE appends one JSON object per line (mono_ns, time, node, scope, event,
epoch, …) for each engine event (acquired, gate_open, heartbeat_ok,
heartbeat_failed, gate_closed, lost, resigned, leader_observed) and workload
outcome (action_ok, action_rejected, action_unknown). The file is created with
mode 0600; a symbolic link, a file of another user, a hard link or a file group
or others may write is refused (exit 2).

--priority N ranks this node among the candidates of its scopes: when a scope is
free, the live candidate of highest priority wins it (not whoever claims first);
0 makes an observer that never leads. pgleader handover moves a scope on demand.
There is no automatic failback unless a node asks for it: --preferred (or
--preferred=D) makes this node take back its scopes from a live leader of lower
priority, by a handover, once it has been up for D (default 30s) and the leader's
term is as old; at most one failback per scope per D, never to a lower priority,
and never undoing an operator's handover.

Behind a connection pooler: lock mode needs its own sessions, so give it
--leader-dsn (PostgreSQL directly, or a session pooler) and let --dsn go through
the pooler for the workload; a transaction pooler on the leadership path is
refused at start (exit 2). Where only a transaction pooler is reachable, run every
candidate with --mode lease (docs/poolers.md).

--listen ADDR serves the local API (docs/any-language.md): GET /v1/leader/{scope}
answers 200 while this node leads; /v1/transitions streams the transitions, a
keepalive every 500ms and the leader's remaining trust (no line for over 1s:
treat the node as not leading). It holds at most --listen-max-conns connections
and --listen-max-streams streams, answering more with 503 at once; a request
addressed by a Host other than a loopback address, localhost or the --listen
host is refused (421), and POST /v1/resign/{scope} (--listen-allow-resign) needs
the header X-Pgleader: 1 and refuses cross-site requests.

--work-interval D runs the demo workload: while leading a scope, one fenced write
into pgleader.demo_actions every D.`,
		Example: `  pgleader node --dsn postgres://app@db:5432/app --scope billing
  pgleader node --scope billing --scope reports --id worker-1 \
      --events /tmp/worker-1.jsonl --work-interval 100ms`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			f.idSet = cmd.Flags().Changed("id")
			return a.runNode(cmd.Context(), &f)
		}),
	}
	f.register(cmd)
	_ = cmd.MarkFlagRequired("scope")
	cmd.AddCommand(a.forgetCommand())
	return cmd
}

// register adds the flags of `pgleader node` to cmd (run has them all too).
func (f *nodeFlags) register(cmd *cobra.Command) {
	def := election.DefaultConfig()
	fl := cmd.Flags()
	fl.StringArrayVar(&f.scopes, "scope", nil, "scope `NAME` to campaign for; repeat for several (required; 1–200 bytes of printable UTF-8: no control or text-direction characters)")
	fl.StringVar(&f.id, "id", "", "node `ID`, unique among live candidates (default <hostname>-<pid>-<6 random hex>)")
	fl.StringVar(&f.versionTag, "version-tag", buildVersion(), "`VERSION` of the service, recorded in pgleader.nodes (shown by status and top)")
	fl.DurationVar(&f.interval, "heartbeat-interval", def.HeartbeatInterval, "how often the leader confirms its terms")
	fl.DurationVar(&f.timeout, "heartbeat-timeout", def.HeartbeatTimeout, "a heartbeat slower than this closes the gate and abandons the session")
	fl.DurationVar(&f.trust, "trust-window", def.TrustWindow, "how long after a successful heartbeat started the gate stays open")
	fl.DurationVar(&f.lease, "session-lease", def.SessionLease, "idle_session_timeout of the leadership session: when the server frees a frozen node's locks")
	fl.DurationVar(&f.drain, "drain-timeout", def.DrainTimeout, "on shutdown, how long in-flight work may run before it is cancelled")
	fl.StringVar(&f.mode, "mode", string(election.ModeLock), "`MODE` of leadership: lock (session advisory locks; needs a direct or session-pooled connection) or lease (lease rows; works through a transaction pooler)")
	fl.StringVar(&f.leaderDSN, "leader-dsn", "", "connection string (`DSN`) of the leadership sessions when --dsn goes through a pooler: PostgreSQL itself or a session pooler (default: --dsn); the workload keeps writing, fenced, through --dsn")
	fl.IntVar(&f.priority, "priority", 1, "`N`: a free scope goes to the live candidate of highest priority; 0 never leads (an observer that still heartbeats and shows in status)")
	fl.DurationVar(&f.preferred, "preferred", 0, "take back this node's scopes from a live leader of lower priority once up for `D` (--preferred alone: 30s; default 0: no failback)")
	fl.Lookup("preferred").NoOptDefVal = "30s"
	fl.StringVar(&f.events, "events", "", "append engine and workload events to `FILE`, one JSON object per line (default none)")
	fl.BoolVar(&f.eventHeartbeats, "events-heartbeats", true, "write heartbeat_ok lines to the --events file (false: leave them out; a leader writes two a second, ~33 MB a day)")
	f.listen.register(cmd)
	fl.DurationVar(&f.workInterval, "work-interval", 0, "while leading, perform one fenced demo write every `D` (default 0: no workload)")
	addHookFlags(cmd, &f.hooks)
}

// nodeSetup is what `pgleader node` and `pgleader run` share once the checks
// have passed: the Elector (not started) and the events file.
type nodeSetup struct {
	t      cli.Target // --dsn: the workload's (and a supervised run's ledger's) database
	lead   cli.Target // the leadership sessions' database (--leader-dsn, else --dsn)
	cfg    election.Config
	e      *election.Elector
	events *eventlog.Writer
}

// checkNode validates the flags without touching the database or any file.
func (a *app) checkNode(f *nodeFlags) (t, lead cli.Target, cfg election.Config, err error) {
	if t, err = a.resolve(); err != nil {
		return t, lead, cfg, err
	}
	lead = t
	if f.leaderDSN != "" {
		a.warn(cli.PasswordWarning("--leader-dsn", f.leaderDSN))
		if lead, err = cli.ResolveDSN(f.leaderDSN); err != nil {
			return t, lead, cfg, cli.BadInput("--leader-dsn: %v", err)
		}
		a.warn(cli.PassfileWarning(lead.DSN))
	}
	cfg = f.config(lead.DSN)
	cfg.Logger = a.log
	if f.idSet && f.id == "" {
		return t, lead, cfg, &election.ConfigError{Field: "NodeID", Rule: `must not be empty (--id ""): omit --id for the default <hostname>-<pid>-<random>`}
	}
	if f.workInterval < 0 {
		return t, lead, cfg, cli.BadInput("invalid --work-interval %v: must be positive, or 0 for no workload", f.workInterval)
	}
	return t, lead, cfg, cfg.Validate()
}

// setupNode waits for the database, creates the Elector and opens the events
// file (created only now: bad input leaves nothing behind). It returns nil, nil
// when ctx ended first.
func (a *app) setupNode(ctx context.Context, f *nodeFlags, t, lead cli.Target, cfg election.Config) (*nodeSetup, error) {
	// The checks wait out a database in the middle of a failover, and report
	// anything else at once (exit 2; ErrTooManyScopes names the settings); Start
	// repeats them, cheaply, before it campaigns.
	if err := dbcheck.Await(ctx, lead.Config, len(cfg.Scopes), migrations.Latest, a.log); err != nil {
		if ctx.Err() != nil {
			return nil, nil // stopped before starting
		}
		return nil, err
	}
	e, err := election.New(cfg)
	if err != nil {
		return nil, err
	}
	ns := &nodeSetup{t: t, lead: lead, cfg: cfg, e: e}
	if f.events != "" {
		if ns.events, err = eventlog.Open(f.events, cfg.NodeID); errors.Is(err, eventlog.ErrUnsafeFile) {
			return nil, cli.BadInput("--events: %v", err)
		} else if err != nil {
			return nil, cli.BadInput("cannot use --events %s: %v; pass a writable file path", f.events, err)
		}
		if !f.eventHeartbeats {
			ns.events.OmitHeartbeats()
		}
		e.Observe(electionlog.Observer(ns.events), election.Synchronous()) // the file records an event before the engine acts on it
	}
	return ns, nil
}

// signalContext is ctx ended by SIGTERM or SIGINT; a second signal takes the
// default action (exit at once).
func (a *app) signalContext(parent context.Context, node string) (context.Context, func()) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	onSignal := context.AfterFunc(ctx, func() {
		stop()
		a.log.Info("stopping: draining and handing over", "node", node)
	})
	return ctx, func() { onSignal(); stop() } // onSignal first: returning is not a signal
}

// runNode checks everything it can before it starts, then runs the elector (and
// the workload) until a signal, and drains.
func (a *app) runNode(parent context.Context, f *nodeFlags) error {
	t, lead, cfg, err := a.checkNode(f)
	if err != nil {
		return err
	}
	ln, err := f.listen.open()
	if err != nil {
		return err
	}
	ctx, stop := a.signalContext(parent, cfg.NodeID)
	defer stop()
	ns, err := a.setupNode(ctx, f, t, lead, cfg)
	if ns == nil || err != nil {
		closeListener(ln)
		return err
	}
	e, events := ns.e, ns.events
	stopHUP := a.reopenOnSIGHUP(events)
	defer stopHUP()
	// The API outlives ctx until the Elector has drained: a load balancer sees
	// the gate close (503), not a refused connection, during the drain.
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	waitAPI := a.serveAPI(apiCtx, ln, &f.listen, e, nil, nil)
	defer waitAPI()
	defer stopAPI()

	// The workload outlives ctx until the elector has drained, so writes in flight
	// at shutdown complete instead of being cancelled.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	workDone := make(chan error, 1)
	if f.workInterval > 0 {
		pooled := f.leaderDSN != "" || cfg.Mode == election.ModeLease // --dsn may go through a pooler
		pool, err := workload.NewPool(t.Config, cfg.NodeID, int32(min(len(cfg.Scopes), 4)), cfg.SessionLease, pooled)
		if err != nil {
			stopWork()
			return errors.Join(err, closeEvents(events))
		}
		defer pool.Close()
		w := &workload.Workload{Pool: pool, Scopes: e.Scopes(), Node: cfg.NodeID,
			Interval: f.workInterval, Log: a.log, PauseBeforeWrite: f.hooks.pauseWrite, UnsafeSkipFence: f.hooks.skipFence}
		if events != nil {
			w.Recorder = events
		}
		go func() { workDone <- w.Run(workCtx) }()
	} else {
		workDone <- nil
	}

	stopResign := resignOnSIGUSR1(ctx, e, a.log)
	runErr := e.Run(ctx)
	stopResign()
	stopWork()
	workErr := <-workDone
	return errors.Join(runErr, workErr, closeEvents(events))
}

func closeListener(ln net.Listener) {
	if ln != nil {
		_ = ln.Close()
	}
}

// reopenOnSIGHUP reopens the events file on each SIGHUP (logrotate), until the
// returned function is called. Without an events file SIGHUP is logged and
// ignored: it never stops a node without its drain.
func (a *app) reopenOnSIGHUP(w *eventlog.Writer) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				if w == nil {
					a.log.Info("SIGHUP: no --events file to reopen; ignored")
					continue
				}
				if err := w.Reopen(); err != nil {
					a.log.Warn("SIGHUP: could not reopen the events file; still writing the old one", "err", err)
				} else {
					a.log.Info("SIGHUP: events file reopened")
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}

func closeEvents(w *eventlog.Writer) error {
	if w == nil {
		return nil
	}
	return w.Close()
}

// resignOnSIGUSR1 resigns every scope the elector leads on each SIGUSR1, until the
// returned function is called.
func resignOnSIGUSR1(ctx context.Context, e *election.Elector, log *slog.Logger) func() {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-usr1:
				for _, s := range e.Scopes() {
					rctx, cancel := context.WithTimeout(ctx, e.Config().DrainTimeout+e.Config().SessionLease)
					err := s.Resign(rctx)
					cancel()
					switch {
					case err == nil:
						log.Info("resigned on SIGUSR1", "scope", s.Name(), "node", e.NodeID())
					case !errors.Is(err, election.ErrNotLeader):
						log.Warn("resign on SIGUSR1 failed", "scope", s.Name(), "node", e.NodeID(), "err", err)
					}
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
		<-finished
	}
}
