package election

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

var errSessionLost = errors.New("leadership session lost")

// session is one incarnation of a node's leadership: the leadership connection (the
// scopes' advisory locks, claims, heartbeats, releases) and the guard connection
// (the guard lock). They are lost together: when either breaks, every term of the
// session ends, its gates close, and only then are the connections dropped, which
// frees the guard (see "No overlap" in the package doc).
type session struct {
	e        *Elector
	lead     *pgx.Conn
	guard    *pgx.Conn
	guardKey int64
	watches  []*sockWatch // under termsMu

	mu sync.Mutex // serialises statements on lead

	guardMu    sync.Mutex // serialises statements on guard
	guardLease bool       // idle_session_timeout armed on the guard session

	termsMu sync.Mutex
	terms   map[*term]struct{}

	lostOnce   sync.Once
	lost       chan struct{}
	lostReason string
	ctx        context.Context // cancelled when the session is lost
	cancel     context.CancelFunc
}

func randomKey() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// connConfig returns the configuration of a dedicated connection with the session
// settings that bound failover.
func (e *Elector) connConfig(role string, leased bool) *pgx.ConnConfig {
	c := e.base.Copy()
	// Client-side keepalives too: a connection blocked in a wait (a follower's
	// await_release) must fail, not hang, when the path to the server goes silent.
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true,
		Idle: max(e.cfg.SessionLease, time.Second), Interval: time.Second, Count: 3}}
	c.DialFunc = dialer.DialContext
	p := c.RuntimeParams
	p["application_name"] = "pgleader " + role + " " + e.cfg.NodeID
	if len(p["application_name"]) > 63 {
		p["application_name"] = p["application_name"][:63]
	}
	// The server notices a vanished client during a statement within this interval.
	p["client_connection_check_interval"] = "1000"
	if leased {
		L := e.cfg.SessionLease
		p["idle_session_timeout"] = strconv.FormatInt(L.Milliseconds(), 10)
		// Keepalives must never end the session before the lease: idle starts at
		// ceil(L) seconds, then 3 probes 1 s apart.
		p["tcp_keepalives_idle"] = strconv.FormatInt(int64((L+time.Second-1)/time.Second), 10)
		p["tcp_keepalives_interval"] = "1"
		p["tcp_keepalives_count"] = "3"
	}
	return c
}

func (e *Elector) openSession(ctx context.Context) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lead, err := pgx.ConnectConfig(cctx, e.connConfig("leadership", true))
	if err != nil {
		return nil, fmt.Errorf("%w: leadership session: %v", ErrUnreachable, err)
	}
	// The guard gets its lease (idle_session_timeout) only while the node leads
	// something; a follower's guard costs the server no statements at all.
	guard, err := pgx.ConnectConfig(cctx, e.connConfig("guard", false))
	if err != nil {
		lead.Close(context.Background())
		return nil, fmt.Errorf("%w: guard session: %v", ErrUnreachable, err)
	}
	s := &session{e: e, lead: lead, guard: guard, guardKey: randomKey(),
		terms: map[*term]struct{}{}, lost: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*session, error) {
		s.cancel()
		lead.Close(context.Background())
		guard.Close(context.Background())
		return nil, err
	}
	if _, err := guard.Exec(cctx, "SELECT pg_advisory_lock($1)", s.guardKey); err != nil {
		return fail(fmt.Errorf("take guard lock: %w", err))
	}
	c := e.cfg
	if _, err := lead.Exec(cctx, `
		INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, backend_pid, scopes,
		       heartbeat_interval_ms, trust_window_ms, session_lease_ms)
		VALUES ($1, $2, $3, $4, pg_backend_pid(), $5, $6, $7, $8)
		ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
		       os_pid = EXCLUDED.os_pid, version = EXCLUDED.version,
		       backend_pid = EXCLUDED.backend_pid, scopes = EXCLUDED.scopes,
		       heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms,
		       trust_window_ms = EXCLUDED.trust_window_ms,
		       session_lease_ms = EXCLUDED.session_lease_ms,
		       last_seen = now(), stopped_at = NULL, leads = '{}'`,
		c.NodeID, c.Hostname, e.osPid, c.Version, c.Scopes,
		c.HeartbeatInterval.Milliseconds(), c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds()); err != nil {
		return fail(fmt.Errorf("register node: %w", err))
	}
	if err := s.warm(cctx); err != nil {
		return fail(fmt.Errorf("warm up leadership session: %w", err))
	}
	for _, conn := range []*pgx.Conn{lead, guard} {
		w := watchSocket(conn.PgConn().Conn(), func() { s.lose("lost_connection") })
		s.termsMu.Lock()
		s.watches = append(s.watches, w)
		s.termsMu.Unlock()
		if s.isLost() { // fired before it was registered
			w.stop()
		}
	}
	return s, nil
}

// warm runs the claim, heartbeat and release functions once on a private scratch
// scope inside a transaction that is rolled back. PL/pgSQL plans each statement on
// its first execution in a session (measured: a cold claim takes ≈8 ms, a warm one
// ≈1.5 ms); without this, the first claim of a session — the one on the failover
// path — would pay for it. The rollback leaves no rows, audit or notification; the
// scratch lock is a session lock, released by release() and not restored by the
// rollback.
func (s *session) warm(ctx context.Context) error {
	c := s.e.cfg
	key := randomKey()
	scope := fmt.Sprintf("pgleader-warmup-%016x", uint64(key))
	tx, err := s.lead.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var acquired bool
	var epoch *int64
	if err := tx.QueryRow(ctx, "SELECT acquired, epoch FROM pgleader.try_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		scope, key, c.NodeID, c.Hostname, s.guardKey, c.HeartbeatInterval.Milliseconds(), c.HeartbeatTimeout.Milliseconds(),
		c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds()).Scan(&acquired, &epoch); err != nil {
		return err
	}
	if !acquired || epoch == nil {
		return fmt.Errorf("scratch scope %s not acquired", scope)
	}
	if _, err := tx.Exec(ctx, "SELECT * FROM pgleader.heartbeat($1, $2, $3, $4)",
		c.NodeID, []string{scope}, []int64{*epoch}, []string{scope}); err != nil {
		return err
	}
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT pgleader.release($1, $2, $3, 'resigned')", scope, *epoch, c.NodeID).Scan(&ok); err != nil || !ok {
		return fmt.Errorf("release scratch scope: ok=%v err=%v", ok, err)
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
func (s *session) lose(reason string) {
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
		for _, t := range terms {
			t.end(reason, false)
		}
		for _, w := range watches {
			w.stop()
		}
		// Closing the sockets is safe while a statement is in flight on another
		// goroutine; pgx.Conn.Close is called later by the owner (close).
		_ = s.guard.PgConn().Conn().Close()
		_ = s.lead.PgConn().Conn().Close()
		level := slog.LevelWarn
		if reason == "closed" {
			level = slog.LevelInfo
		}
		s.e.log.Log(context.Background(), level, "leadership session ended", "node", s.e.cfg.NodeID, "reason", reason, "scopes_ended", len(terms))
	})
}

// close releases the connections' resources after lose, from the session's owner.
func (s *session) close() {
	s.lose("closed")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guardMu.Lock()
	defer s.guardMu.Unlock()
	s.lead.Close(context.Background())
	s.guard.Close(context.Background())
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

// heartbeat confirms every term of the session in one round trip on the leadership
// session, pings the guard session concurrently, and extends or ends the terms.
func (s *session) heartbeat() {
	e := s.e
	s.termsMu.Lock()
	terms := make([]*term, 0, len(s.terms))
	scopes := make([]string, 0, len(s.terms))
	epochs := make([]int64, 0, len(s.terms))
	led := map[*Scope]bool{}
	var settled []string
	for t := range s.terms {
		terms = append(terms, t)
		scopes = append(scopes, t.scope.name)
		epochs = append(epochs, t.epoch)
		led[t.scope] = true
		if t.isSettled() {
			settled = append(settled, t.scope.name)
		}
	}
	s.termsMu.Unlock()
	var follow []string
	for _, sc := range e.order {
		if !led[sc] {
			follow = append(follow, sc.name)
		}
	}

	s.mu.Lock()
	if s.isLost() {
		s.mu.Unlock()
		return
	}
	// The deadline starts once the session is ours: time spent queueing behind a
	// claim or a release is not the round trip's.
	ctx, cancel := s.stmtCtx(e.cfg.HeartbeatTimeout)
	defer cancel()
	start := monotime.Now()
	guardErr := make(chan error, 1)
	go func() { guardErr <- s.guardBeat(ctx) }()
	ok := make(map[string]bool, len(scopes))
	resign := map[string]bool{} // led scopes an operator asked to hand over (request_resign)
	type observation struct {
		scope  string
		epoch  int64
		holder *string
	}
	var seen []observation
	rows, err := s.lead.Query(ctx, "SELECT scope, led, ok, epoch, holder, resign FROM pgleader.heartbeat($1, $2, $3, $4, $5)",
		e.cfg.NodeID, scopes, epochs, follow, settled)
	if err == nil {
		var o observation
		var isLed, good, wantResign bool
		_, err = pgx.ForEachRow(rows, []any{&o.scope, &isLed, &good, &o.epoch, &o.holder, &wantResign}, func() error {
			if isLed {
				ok[o.scope] = good
				resign[o.scope] = wantResign
			} else {
				seen = append(seen, o)
			}
			return nil
		})
	}
	gErr := <-guardErr
	s.mu.Unlock()
	latency := monotime.Since(start)
	if err == nil && gErr != nil {
		err = fmt.Errorf("guard session: %w", gErr)
	}
	if err == nil && latency >= e.cfg.HeartbeatTimeout {
		err = fmt.Errorf("heartbeat took %v, timeout is %v", latency, e.cfg.HeartbeatTimeout)
	}
	if err != nil {
		reason := "heartbeat_timeout"
		if !errors.Is(err, context.DeadlineExceeded) && latency < e.cfg.HeartbeatTimeout {
			reason = "lost_connection"
		}
		for _, t := range terms {
			e.emit(Event{Kind: EventHeartbeatFailed, Scope: t.scope.name, Epoch: t.epoch, Reason: err.Error(), Latency: latency})
		}
		if len(terms) == 0 {
			e.emit(Event{Kind: EventHeartbeatFailed, Reason: err.Error(), Latency: latency})
		}
		e.log.Warn("heartbeat failed", "node", e.cfg.NodeID, "err", err, "latency", latency)
		s.lose(reason)
		return
	}
	for _, o := range seen {
		sc := e.scopes[o.scope]
		if o.holder == nil {
			sc.noteFree()
			continue
		}
		sc.noteHeld()
		if *o.holder != e.cfg.NodeID {
			sc.observe(*o.holder, o.epoch)
		}
	}
	for _, t := range terms {
		if ok[t.scope.name] {
			t.confirm(start, latency)
			if resign[t.scope.name] {
				t.requestResign()
			}
		} else if s.removeTerm(t) {
			// Still ours when the answer came: not a term released meanwhile.
			t.end("evicted", false)
		}
	}
}

// guardBeat keeps the guard session's lease in step with leadership: while the node
// leads any scope the guard has idle_session_timeout = L and is pinged with every
// heartbeat, so it expires together with the leadership session if the process
// freezes; otherwise the lease is disarmed and the guard left alone.
//
// Whether the node leads is read here, under guardMu, not taken from the caller: a
// heartbeat's snapshot of the terms may predate a claim whose lead() has already
// armed the lease (addTerm happens before that arming), and must not disarm it.
func (s *session) guardBeat(ctx context.Context) error {
	s.guardMu.Lock()
	defer s.guardMu.Unlock()
	s.termsMu.Lock()
	leading := len(s.terms) > 0
	s.termsMu.Unlock()
	switch {
	case leading && s.guardLease:
		return s.guard.Ping(ctx)
	case leading == s.guardLease:
		return nil
	}
	lease := "0"
	if leading {
		lease = strconv.FormatInt(s.e.cfg.SessionLease.Milliseconds(), 10)
	}
	// No arguments: pgx sends it with the simple protocol, one round trip. With an
	// argument its first use in a session costs a prepare round trip as well, and
	// arming happens inside a heartbeat's deadline: with 60–70 ms of round-trip
	// latency two trips come close to a 150 ms T (the suspected cause of one lost
	// lead right after an election in the latency-low chaos scenario).
	if _, err := s.guard.Exec(ctx, "SELECT set_config('idle_session_timeout', '"+lease+"', false)"); err != nil {
		return err
	}
	s.guardLease = leading
	return nil
}

// claimResult is one row of pgleader.try_claim.
type claimResult struct {
	acquired      bool
	epoch         *int64
	holder        *string
	prevHolder    *string
	prevEpoch     *int64
	prevClosed    *bool
	prevGuardKey  *int64
	prevGuardHeld *bool
	prevTrustMS   *int32
	prevReason    *string
	waitGuards    []int64 // guards whose holders may still trust a gate
	start, done   int64   // monotonic, around the round trip
}

func (s *session) tryClaim(sc *Scope) (claimResult, error) {
	e := s.e
	c := e.cfg
	ctx, cancel := s.stmtCtx(c.HeartbeatTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isLost() {
		return claimResult{}, errSessionLost
	}
	var r claimResult
	r.start = monotime.Now()
	err := s.lead.QueryRow(ctx, `SELECT acquired, epoch, holder, prev_holder, prev_epoch, prev_closed,
	        prev_guard_key, prev_guard_held, prev_trust_ms, prev_reason, wait_guards
	   FROM pgleader.try_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		sc.name, sc.key, c.NodeID, c.Hostname, s.guardKey,
		c.HeartbeatInterval.Milliseconds(), c.HeartbeatTimeout.Milliseconds(),
		c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds(),
	).Scan(&r.acquired, &r.epoch, &r.holder, &r.prevHolder, &r.prevEpoch, &r.prevClosed,
		&r.prevGuardKey, &r.prevGuardHeld, &r.prevTrustMS, &r.prevReason, &r.waitGuards)
	r.done = monotime.Now()
	if err != nil {
		s.reconcileLocked(sc.key, err)
	}
	return r, err
}

// reconcileLocked makes sure a failed claim or release left no advisory lock on key
// behind: try_claim gives the lock back in its exception handler, but a cancelled
// statement or a commit-time error escapes that handler, and a lock kept that way
// would stack under the next claim and outlive its release. Called with s.mu held.
func (s *session) reconcileLocked(key int64, cause error) {
	if isLockTimeout(cause) {
		return // raised inside try_claim's handler (which unlocked) or by release's row wait
	}
	if s.lead.IsClosed() {
		go s.lose("lost_connection")
		return
	}
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	if _, err := s.lead.Exec(ctx, "SELECT pgleader.unlock_held($1)", key); err != nil {
		s.e.log.Warn("cannot reconcile advisory lock after a failed statement; dropping the session",
			"node", s.e.cfg.NodeID, "key", key, "cause", cause, "err", err)
		go s.lose("lost_connection")
	}
}

// release closes a term cleanly in the database and unlocks its scope. Its row lock
// waits at most T/5 for the term's own fenced writers (then 55P03, for the caller to
// retry), so other scopes' heartbeats are never held up for long.
func (s *session) release(sc *Scope, epoch int64, reason string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isLost() {
		return false, errSessionLost
	}
	T := s.e.cfg.HeartbeatTimeout
	ctx, cancel := s.stmtCtx(T)
	defer cancel()
	var ok bool
	err := s.lead.QueryRow(ctx, "SELECT pgleader.release($1, $2, $3, $4, $5)",
		sc.name, epoch, s.e.cfg.NodeID, reason, max(T.Milliseconds()/5, 1)).Scan(&ok)
	if err != nil {
		s.reconcileLocked(sc.key, err)
	}
	return ok, err
}

// markStopped records a clean shutdown in pgleader.nodes.
func (s *session) markStopped() {
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isLost() {
		return
	}
	_, _ = s.lead.Exec(ctx, "UPDATE pgleader.nodes SET stopped_at = now(), last_seen = now(), leads = '{}' WHERE node_id = $1", s.e.cfg.NodeID)
}
