package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/internal/names"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/internal/retry"
	"github.com/pgleader/pgleader/protocol"
)

// Elector campaigns for its scopes on behalf of one node (process). Create it with
// New, run it with Run, and use the scopes through Scope.
type Elector struct {
	cfg    Config
	base   *pgx.ConnConfig
	log    *slog.Logger
	osPid  int // this process, with processStarted: what a registration records
	scopes map[string]*Scope
	order  []*Scope
	ring   *ring

	mode mode // how it leads (mode.go)
	obs  observers
	test testHooks // nil hooks but in the package's own tests

	started       atomic.Bool                   // Start got past its checks
	lastHeartbeat atomic.Pointer[heartbeatMark] // the last successful heartbeat (Health)

	startOnce sync.Once
	stopped   chan struct{} // closed when the Elector has stopped (after Start's work, or a failed start)
	runErr    error         // why it stopped, for Wait; set before stopped is closed

	sessMu    sync.Mutex
	sess      *session
	sessReady chan struct{} // closed when sess is set; replaced when it is lost
}

// New validates cfg and returns an Elector. It does not connect: Start (or Run)
// does, and reports what keeps it from campaigning.
func New(cfg Config) (*Elector, error) {
	return newElector(cfg, modeOf)
}

// modeOf is the mode a Config asks for.
func modeOf(e *Elector) mode {
	switch {
	case e.cfg.Mode == ModeStandalone:
		return standaloneMode{e}
	case e.cfg.Mode == ModeLease:
		return leaseMode{database{e}}
	}
	return lockMode{database{e}}
}

// newElector validates cfg and returns an Elector in the mode newMode gives it.
func newElector(cfg Config, newMode func(*Elector) mode) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NodeID == "" {
		cfg.NodeID = names.DefaultNodeID()
	}
	e := &Elector{cfg: cfg, log: cfg.Logger, osPid: os.Getpid(), scopes: map[string]*Scope{},
		stopped: make(chan struct{}), sessReady: make(chan struct{})}
	e.ring = newRing(e)
	e.mode = newMode(e)
	base, err := e.mode.connConfig()
	if err != nil {
		return nil, err
	}
	e.base = base
	keys := map[int64]string{}
	for _, name := range cfg.Scopes {
		key, ok := cfg.LockKeys[name]
		if !ok {
			key = protocol.LockKey(name)
		}
		if other, dup := keys[key]; dup {
			return nil, &ConfigError{Field: "LockKeys", Rule: fmt.Sprintf("scopes %q and %q share lock key %d", other, name, key)}
		}
		keys[key] = name
		s := newScope(e, name, key)
		e.scopes[name] = s
		e.order = append(e.order, s)
	}
	return e, nil
}

// NodeID returns the node id this elector campaigns as.
func (e *Elector) NodeID() string { return e.cfg.NodeID }

// Config returns the validated configuration, defaults filled in.
func (e *Elector) Config() Config { return e.cfg }

// Scope returns the handle of a configured scope. For a name that is not in
// Config.Scopes it returns a handle whose methods return ErrUnknownScope.
func (e *Elector) Scope(name string) *Scope {
	if s, ok := e.scopes[name]; ok {
		return s
	}
	return &Scope{name: name}
}

// Scopes returns the handles of all scopes, in configuration order.
func (e *Elector) Scopes() []*Scope { return append([]*Scope(nil), e.order...) }

// Observe calls fn with every engine event (see Event and EventKind: the
// gates and terms of the --events file, and a service's view of them, elected
// and revoked) and returns the function that stops it. It is the one way to
// watch an Elector: metrics (electionprom), the events file (electionlog) and
// the local API's stream are built on it.
//
// By default fn runs on a goroutine of its own and receives the events through
// a queue of 4096: a slow observer never delays a heartbeat or a claim. When it
// falls that far behind, events are dropped and counted: the next one it
// receives carries the count in Event.Dropped (and a warning is logged). remove
// returns once the goroutine has delivered what was queued; after the Elector
// stops, the goroutine delivers what is queued and ends by itself. With
// Synchronous, the engine calls fn itself before it goes on.
//
// Observers may be added and removed at any time; each receives the events
// emitted while it is registered. One added before Start or Run receives every
// event from the first. Events of one scope arrive in order.
func (e *Elector) Observe(fn func(Event), opts ...ObserveOption) (remove func()) {
	var o observeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.sync {
		return e.obs.add(fn, false, nil, nil)
	}
	return e.obs.add(fn, true, e.stopped, e.log)
}

func (e *Elector) emit(ev Event) {
	if e.obs.empty() {
		return
	}
	ev.Node = e.cfg.NodeID
	ev.MonoNS = monotime.Now()
	ev.Time = time.Now()
	e.obs.emit(ev)
}

// Start checks what campaigning needs (see Check) and, once the checks pass,
// campaigns in the background until ctx ends; it returns as soon as the node
// campaigns. ctx is the Elector's lifetime, not only its start: when it ends the
// Elector drains — no new work is admitted, in-flight work (Do, Lead) gets up to
// Config.DrainTimeout, every led scope is released (term closed as "shutdown",
// followers take over at once), the node is marked stopped — and then stops;
// Wait reports when.
//
// Start returns promptly, wrapping ErrUnreachable, ErrUnsupportedServer,
// ErrSchemaMissing, ErrPermission or ErrTooManyScopes, what will not heal by
// itself: a bad DSN or password, a server that refuses connections, a missing
// schema, a role without the grants. A database in the middle of a restart or
// failover is waited out (see Check). After a failed start the Elector is
// stopped (Wait returns the same error). An Elector starts once; later calls
// return ErrClosed.
func (e *Elector) Start(ctx context.Context) error {
	first := false
	e.startOnce.Do(func() { first = true })
	if !first {
		return ErrClosed
	}
	if err := e.mode.start(ctx); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: stopped before it could start: %w", ErrClosed, context.Cause(ctx))
		}
		e.finish(err)
		return err
	}
	e.started.Store(true)
	go func() { e.finish(e.mode.run(ctx)) }()
	return nil
}

// Wait blocks until the Elector has stopped: after Start's context ended and the
// drain finished, or at once after a failed Start. It returns nil after a drain,
// or the error that kept the Elector from starting.
func (e *Elector) Wait() error {
	<-e.stopped
	return e.runErr
}

// Done returns a channel closed when the Elector has stopped (see Wait).
func (e *Elector) Done() <-chan struct{} { return e.stopped }

// Run is Start followed by Wait: it campaigns until ctx ends, drains, and returns
// nil; or returns at once what keeps the Elector from starting (see Start). A
// context that ends before the Elector started is not an error: Run returns nil.
// Run returns only after every goroutine the Elector started has stopped.
func (e *Elector) Run(ctx context.Context) error {
	if err := e.Start(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, ErrClosed) {
			return nil // cancelled before it started: nothing to drain
		}
		return err
	}
	return e.Wait()
}

// finish records why the Elector stopped and wakes Wait, Done and the scopes'
// waiters; subscriptions end.
func (e *Elector) finish(err error) {
	e.runErr = err
	close(e.stopped)
}

// campaignAll runs the campaign of every scope, the leadership session loop (in
// mode sm) and watch (the mode's watch of the other nodes, if it has one) until
// ctx ends, then drains and stops them all.
func (e *Elector) campaignAll(ctx context.Context, sm sessionMode, watch func(context.Context)) error {
	e.log.Info("campaigning", "node", e.cfg.NodeID, "scopes", e.cfg.Scopes,
		"heartbeat_interval", e.cfg.HeartbeatInterval, "heartbeat_timeout", e.cfg.HeartbeatTimeout,
		"trust_window", e.cfg.TrustWindow, "session_lease", e.cfg.SessionLease)

	sessCtx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
	var sessions sync.WaitGroup
	sessions.Go(func() { e.sessionLoop(sessCtx, sm) })
	if watch != nil {
		sessions.Go(func() { watch(sessCtx) })
	}

	var campaigns sync.WaitGroup
	for _, s := range e.order {
		campaigns.Go(func() { s.campaign(ctx) })
	}
	campaigns.Wait()

	// Not under sessMu: markStopped waits for the leadership connection, which a
	// heartbeat may hold, and nothing that waits while holding sessMu may sit
	// behind a statement (the listen loop's hints take it too: currentSession). A
	// stall here until the heartbeat timed out lost the session, and node_stopped
	// was never recorded: a clean stop looked like a crash (the collector
	// reported NO LEADER, not IDLE).
	e.sessMu.Lock()
	sess := e.sess
	e.sessMu.Unlock()
	if sess != nil {
		sess.markStopped()
	}
	stopSessions()
	sessions.Wait()
	e.log.Info("stopped", "node", e.cfg.NodeID)
	return nil
}

// sessionLoop keeps a leadership session up: open, heartbeat every I until lost,
// reopen with jittered backoff. It owns every session it opens.
func (e *Elector) sessionLoop(ctx context.Context, sm sessionMode) {
	failures := 0
	for ctx.Err() == nil {
		s, err := sm.open(ctx)
		if err != nil {
			failures++
			if ctx.Err() == nil {
				e.log.Warn("cannot open leadership session", "node", e.cfg.NodeID, "err", err, "attempt", failures)
			}
			sleepCtx(ctx, backoff(failures))
			continue
		}
		failures = 0
		e.setSession(s)
		e.ring.reread()
		e.log.Info("leadership session up", "node", e.cfg.NodeID, "backend_pid", s.lead.PgConn().PID(), "guard_key", s.guardKey)
		s.serve(ctx)
		e.clearSession(s)
		s.close()
		if ctx.Err() == nil {
			sleepCtx(ctx, time.Duration(rand.Int64N(int64(e.cfg.HeartbeatInterval/10)+1)))
		}
	}
}

func (e *Elector) setSession(s *session) {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	e.sess = s
	close(e.sessReady)
}

func (e *Elector) clearSession(s *session) {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	if e.sess == s {
		e.sess = nil
		e.sessReady = make(chan struct{})
	}
}

// currentSession returns the live session, or nil.
func (e *Elector) currentSession() *session {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	if e.sess == nil || e.sess.isLost() {
		return nil
	}
	return e.sess
}

// awaitSession returns the current live session, waiting for one; nil when ctx ends.
func (e *Elector) awaitSession(ctx context.Context) *session {
	for {
		e.sessMu.Lock()
		s, ready := e.sess, e.sessReady
		e.sessMu.Unlock()
		if s != nil && !s.isLost() {
			return s
		}
		if s != nil { // lost, not yet cleared
			select {
			case <-s.lost:
			case <-ctx.Done():
				return nil
			}
			sleepCtx(ctx, time.Millisecond)
			continue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		}
	}
}

// reconnect is the engine's backoff: at most a second, because a database that
// fails over is back within seconds and leadership should resume within a second
// of it (each retry is a connection attempt, cheap for the server).
var reconnect = retry.Backoff{Base: 25 * time.Millisecond, Max: time.Second}

// backoff is reconnect's delay after the n-th consecutive failure.
func backoff(n int) time.Duration { return reconnect.Delay(n) }

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) { retry.Sleep(ctx, d) }

// processStarted is when this process started (as near as the package's
// initialisation): the registration records it, so that a node id registered
// again by another process counts as a restart, and one registered again by
// this process after a lost session does not.
var processStarted = time.Now()
