package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgleader/pgleader/protocol"
)

var errSessionLost = errors.New("leadership session lost")

// session is one incarnation of a node's leadership: the leadership connection (the
// scopes' advisory locks and the node's beacon; claims, heartbeats, releases) and the
// guard connection (the guard lock). They are lost together: when either breaks,
// every term of the session ends, its gates close, and only then are the
// connections dropped, which frees the guard (see "No overlap" in the package doc).
type session struct {
	e         *Elector
	lead      *pgx.Conn
	guard     *pgx.Conn
	guardKey  int64
	beaconKey int64
	watches   []*sockWatch // under termsMu

	// Once the session is shared, the leadership connection belongs to leadLoop
	// (lead.go), which runs leadReqs one at a time: every statement on lead is a
	// leadDo request. Before that (open, warm) the opening goroutine uses it alone.
	leadReqs chan leadReq

	// The guard connection belongs to guardLoop, which runs guardReqs and pings the
	// leased guard. No session LISTENs: its replies are never behind notifications.
	guardReqs  chan guardReq
	guardLease bool      // idle_session_timeout armed on the guard session (guardLoop only)
	guardPing  time.Time // when guardLoop pings the leased guard next (guardLoop only)
	guardStmt  int64     // monotonic start of the guard's last statement (guardLoop only)

	// m is the session's mode. A lease-mode session (mode_lease.go) has lead as
	// its only connection (guard is nil), and leaseToken binds its calls to its
	// registration.
	m          sessionMode
	leaseToken int64
	leaseTimer *time.Timer // under termsMu: claims a watched lease when it runs out (mode_lease.go)

	batch  batchQueue    // claims and releases waiting for the next round trip
	ended  endedNodes    // nodes whose leadership session was seen to end (ended.go)
	hbKick chan struct{} // cap 1: heartbeat now (kickHeartbeat)

	hb       heartbeatRound // serving goroutine only (heartbeat), written in its leadDo request
	blockers blockers       // serving goroutine only (nameBlockers)
	fenced   fencedWaits    // serving goroutine only (endStaleFenced)

	termsMu sync.Mutex
	terms   map[*term]struct{}

	loops      sync.WaitGroup // leadLoop, guardLoop
	lostOnce   sync.Once
	guardHeld  chan struct{} // set in lose when the guard is held for lost work; closed when released
	lost       chan struct{}
	lostReason Reason
	ctx        context.Context // cancelled when the session is lost
	cancel     context.CancelFunc
}

// openLockSession opens a lock-mode session: leadership and guard connections,
// the guard and beacon locks taken, the node registered. (The node's third
// connection, the watch, belongs to the ring: ring.go.)
func (e *Elector) openLockSession(ctx context.Context) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lead, err := e.dial(cctx, "leadership", true, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: leadership session: %w", ErrUnreachable, err)
	}
	// The guard gets its lease (idle_session_timeout) only while the node leads
	// something; a follower's guard costs the server no statements at all.
	guard, err := e.dial(cctx, "guard", false, 0)
	if err != nil {
		lead.Close(context.Background())
		return nil, fmt.Errorf("%w: guard session: %w", ErrUnreachable, err)
	}
	s := &session{e: e, m: lockMode{database{e}}, lead: lead, guard: guard, guardKey: randomKey(), beaconKey: randomKey(),
		terms: map[*term]struct{}{}, lost: make(chan struct{}), guardReqs: make(chan guardReq, 16),
		leadReqs: make(chan leadReq), hbKick: make(chan struct{}, 1)}
	s.batch.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*session, error) {
		s.cancel()
		lead.Close(context.Background())
		guard.Close(context.Background())
		return nil, err
	}
	// A session that landed on a standby (a DSN or endpoint that does not select the
	// primary) could never claim; say so rather than fail on the first write.
	var standby bool
	if err := lead.QueryRow(cctx, "SELECT pg_catalog.pg_is_in_recovery()").Scan(&standby); err != nil {
		return fail(fmt.Errorf("read the server's role: %w", err))
	}
	if standby {
		return fail(fmt.Errorf("%w: %s:%d is a standby (in recovery); point the DSN at the primary: list every host with target_session_attrs=read-write, or use the read-write endpoint",
			ErrUnreachable, lead.Config().Host, lead.Config().Port))
	}
	if _, err := guard.Exec(cctx, "SELECT pgleader.session_lock($1)", s.guardKey); err != nil {
		return fail(fmt.Errorf("take guard lock: %w", err))
	}
	if _, err := lead.Exec(cctx, "SELECT pgleader.session_lock($1)", s.beaconKey); err != nil {
		return fail(fmt.Errorf("take beacon lock: %w", err))
	}
	c := e.cfg
	// Register (bound to this backend and login role); the registration rings
	// the node whose ring successor this one now is, so that it watches this one
	// from now on, not from its next heartbeat: a crash in between would go
	// unwatched.
	if _, err := lead.Exec(cctx, "SELECT pgleader.register_node($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
		c.NodeID, c.Hostname, e.osPid, c.Version, c.Scopes,
		c.HeartbeatInterval.Milliseconds(), c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds(),
		s.beaconKey, s.guardKey, c.priority(), c.ResignCooldown.Milliseconds(), c.failbackMS(), processStarted); err != nil {
		return fail(fmt.Errorf("register node: %w", err))
	}
	if c.priority() > 0 { // a node that never leads never claims: nothing to warm up
		if err := s.warm(cctx); err != nil {
			return fail(fmt.Errorf("warm up leadership session: %w", err))
		}
	}
	for _, conn := range []*pgx.Conn{lead, guard} {
		w := watchSocket(conn.PgConn().Conn(), func() { s.lose(protocol.ReasonLostConnection, errors.New("the server closed the connection")) })
		s.termsMu.Lock()
		s.watches = append(s.watches, w)
		s.termsMu.Unlock()
		if s.isLost() { // fired before it was registered
			w.stop()
		}
	}
	s.loops.Go(s.leadLoop)
	s.loops.Go(s.guardLoop)
	return s, nil
}

// warm runs the claim, heartbeat, release and await functions on a private
// scratch scope inside a transaction that is rolled back. PL/pgSQL compiles a function on its
// first call in a session and, with plan_cache_mode = force_generic_plan (see
// connConfig), plans each statement once, on its first execution (measured: a
// cold claim takes ≈8 ms, a warm one ≈1.5 ms); without this, the first claim of
// a session — the one on the failover path — would pay for it. The scratch
// scope is claimed twice, so that the second claim takes the path of a
// successor closing a term its holder left open, which is the path of a crash
// failover. The rollback leaves no rows, audit or notification; the scratch
// lock is a session lock (taken twice: locks stack), released by the two
// releases and not restored by the rollback.
func (s *session) warm(ctx context.Context) error {
	c := s.e.cfg
	// A scratch scope of its own, under its derived key: the database refuses a
	// row under any other key (schema version 12).
	scope := fmt.Sprintf("pgleader-warmup-%016x", uint64(randomKey()))
	key := protocol.LockKey(scope)
	tx, err := s.lead.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var epoch int64
	for i := range 2 {
		got, err := s.claimBatch(ctx, tx, []string{scope}, []int64{key}, nil)
		if err != nil {
			return err
		}
		if len(got) != 1 || !got[0].acquired || got[0].epoch == nil || (i == 1 && deref(got[0].prevClosed) != false) {
			return fmt.Errorf("scratch scope %s: claim %d not as expected", scope, i+1)
		}
		epoch = *got[0].epoch
	}
	if _, err := tx.Exec(ctx, heartbeatSQL, c.NodeID, []string{scope}, []int64{epoch},
		[]string{scope}, []int64{0}, []string{scope}); err != nil {
		return err
	}
	for i := range 2 {
		rel, err := s.releaseRows(ctx, tx, []releaseReq{{scope: scope, epoch: epoch, reason: protocol.ReasonResigned}})
		if err != nil || len(rel) != 1 || rel[0].ok != (i == 0) {
			return fmt.Errorf("release scratch scope: %v err=%v", rel, err)
		}
	}
	// And the wait of a claim retried after a dying holder (retryEnded), which
	// runs on the crash path: the scratch key is free again, so it returns at once.
	if _, err := await(ctx, tx, key, time.Millisecond); err != nil {
		return err
	}
	return tx.Rollback(ctx)
}

func (s *session) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// lose ends the session: first every term (gates closed), then the connections
// (which frees the guard lock and, if the server still has them, the scope locks).
func (s *session) lose(reason Reason, cause error) {
	s.lostOnce.Do(func() {
		s.lostReason = reason
		close(s.lost)
		s.cancel()
		s.termsMu.Lock()
		terms := make([]*term, 0, len(s.terms))
		for t := range s.terms {
			terms = append(terms, t)
		}
		s.terms = map[*term]struct{}{}
		watches := append([]*sockWatch(nil), s.watches...)
		s.termsMu.Unlock()
		var busy []<-chan struct{}
		for _, t := range terms {
			t.end(reason, false)
			if ch := t.busy(); ch != nil {
				busy = append(busy, ch)
			}
		}
		for _, w := range watches {
			w.stop()
		}
		// Closing the sockets is safe while a statement is in flight on another
		// goroutine (leadLoop's, guardLoop's); it fails, and its request is
		// answered. pgx.Conn.Close is called later by the owner (close), once the
		// loops have returned. lose never waits for leadLoop: it is called from
		// within requests too.
		_ = s.lead.PgConn().Conn().Close()
		if s.guard != nil {
			if hold := s.e.cfg.HoldGuardOnLoss; hold > 0 && len(busy) > 0 && reason != protocol.ReasonClosed {
				// The successor's gate waits for this guard: keep it until the
				// lost terms' work has returned (HoldGuardOnLoss).
				s.guardHeld = make(chan struct{})
				go func() {
					defer close(s.guardHeld)
					timer := time.NewTimer(hold)
					defer timer.Stop()
					for _, ch := range busy {
						select {
						case <-ch:
						case <-timer.C:
							s.e.log.Warn("work of a lost term still running: releasing the guard anyway", "node", s.e.cfg.NodeID, "hold", hold)
							_ = s.guard.PgConn().Conn().Close()
							return
						}
					}
					_ = s.guard.PgConn().Conn().Close()
				}()
			} else {
				_ = s.guard.PgConn().Conn().Close()
			}
		}
		level := slog.LevelWarn
		if reason == protocol.ReasonClosed {
			level = slog.LevelInfo
		}
		s.e.log.Log(context.Background(), level, "leadership session ended", "node", s.e.cfg.NodeID, "reason", reason,
			"cause", cause, "scopes_ended", len(terms))
	})
}

// close releases the connections' resources after lose, from the session's owner
// (sessionLoop), never from a leadDo request: it waits for leadLoop to return.
func (s *session) close() {
	s.lose(protocol.ReasonClosed, nil)
	s.loops.Wait() // leadLoop has answered its last request: lead is ours again
	s.termsMu.Lock()
	if s.leaseTimer != nil {
		s.leaseTimer.Stop()
	}
	s.termsMu.Unlock()
	s.lead.Close(context.Background())
	if s.guard != nil {
		if s.guardHeld != nil {
			<-s.guardHeld // bounded by HoldGuardOnLoss
		}
		s.guard.Close(context.Background())
	}
}

func (s *session) addTerm(t *term) bool {
	s.termsMu.Lock()
	defer s.termsMu.Unlock()
	if s.isLost() {
		return false
	}
	s.terms[t] = struct{}{}
	return true
}

// removeTerm forgets t and reports whether it was still registered.
func (s *session) removeTerm(t *term) bool {
	s.termsMu.Lock()
	defer s.termsMu.Unlock()
	_, ok := s.terms[t]
	delete(s.terms, t)
	return ok
}

// stmtCtx bounds a statement on the leadership session. It deliberately does not
// derive from Run's context: cancelling Run must drain, not cut the session.
func (s *session) stmtCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
