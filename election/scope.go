package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/monotime"
)

// Scope is one election of an Elector: its gate, its current term and the verbs a
// service uses. Obtain it with Elector.Scope.
type Scope struct {
	e    *Elector
	name string
	key  int64

	cur     atomic.Pointer[period] // open (or last) gate period; nil when closed
	term    atomic.Pointer[term]   // the term being led (pending included); nil as follower
	blocked atomic.Uint64          // Require calls refused (GateBlocked)

	obsMu          sync.Mutex // observations come from the campaign and from heartbeats
	observedHolder string
	observedEpoch  int64
	freeBeats      int                // consecutive heartbeats that saw no live holder
	cancelWait     context.CancelFunc // interrupts the follower's current wait
}

type resignRequest struct {
	reply chan error
}

// Name returns the scope's name.
func (s *Scope) Name() string { return s.name }

// LockKey returns the advisory-lock key of the scope.
func (s *Scope) LockKey() int64 { return s.key }

// Require returns a Token if this node leads the scope and its gate is open at this
// moment, else ErrNotLeader. It does not wait and does not touch the database.
func (s *Scope) Require(ctx context.Context) (Token, error) {
	if s == nil || s.e == nil {
		return Token{}, ErrUnknownScope
	}
	p := s.cur.Load()
	if p == nil || !p.term.standalone && !p.open(monotime.Now()) || p.term.draining.Load() {
		s.blocked.Add(1)
		return Token{}, ErrNotLeader
	}
	return Token{Scope: s.name, Epoch: p.term.epoch, Holder: s.e.cfg.NodeID, p: p}, nil
}

// GateBlocked returns how many Require (and Do) calls of this scope were refused
// with ErrNotLeader since the Elector was created: work that a follower or a
// leader with a closed gate did not do. For metrics.
func (s *Scope) GateBlocked() uint64 { return s.blocked.Load() }

// TrustRemaining returns how long the gate stays open without a further heartbeat:
// 0 when this node does not lead the scope or its gate is closed. In standalone
// mode it returns Config.TrustWindow while leading. For metrics and diagnostics.
func (s *Scope) TrustRemaining() time.Duration {
	p := s.cur.Load()
	if p == nil || p.term.draining.Load() {
		return 0
	}
	if p.term.standalone {
		return s.e.cfg.TrustWindow
	}
	if d := p.trustUntil.Load() - monotime.Now(); d > 0 {
		return time.Duration(d)
	}
	return 0
}

// Do runs fn if this node leads the scope, with a context that is cancelled when
// the gate closes (trust window ended, leadership lost) or ctx ends. It returns
// ErrNotLeader without calling fn otherwise. Resign and shutdown wait for running
// Do calls (up to Config.DrainTimeout) before releasing the scope.
func (s *Scope) Do(ctx context.Context, fn func(ctx context.Context, tok Token) error) error {
	tok, err := s.Require(ctx)
	if err != nil {
		return err
	}
	t := tok.p.term
	if !t.enter() {
		return ErrNotLeader
	}
	defer t.leave()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(tok.p.ctx, cancel)
	defer stop()
	return fn(ctx, tok)
}

// Resign gives up leadership of the scope: the gate closes to new work, in-flight Do
// calls get up to Config.DrainTimeout, the term is closed as "resigned", and the lock
// is released so a follower takes over at once. This node then stays out of the
// election for Config.ResignCooldown. It returns ErrNotLeader if this node does not
// lead the scope.
func (s *Scope) Resign(ctx context.Context) error {
	if s == nil || s.e == nil {
		return ErrUnknownScope
	}
	if s.e.cfg.Standalone {
		return fmt.Errorf("%w: standalone mode cannot resign", ErrNotLeader)
	}
	t := s.term.Load()
	if t == nil {
		return ErrNotLeader
	}
	// The term's campaign takes the request as soon as it is leading (a pending
	// term first waits out its predecessor); a term that ends first answers no.
	req := resignRequest{reply: make(chan error, 1)}
	select {
	case t.resign <- req:
	case <-t.ctx.Done():
		return ErrNotLeader
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waiter owns the connection on which a follower waits for the scope's lock (and a
// new leader for its predecessor's guard).
type waiter struct {
	e    *Elector
	conn *pgx.Conn
}

// awaitRelease waits until no session holds key exclusively (true) or timeout
// passes (false); timeout 0 waits without limit. Cancelling ctx drops the
// connection (pgx closes a connection whose query was interrupted).
func (w *waiter) awaitRelease(ctx context.Context, key int64, timeout time.Duration) (bool, error) {
	if w.conn == nil || w.conn.IsClosed() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.ConnectConfig(cctx, w.e.connConfig("waiter", false))
		cancel()
		if err != nil {
			return false, fmt.Errorf("%w: waiter connection: %v", ErrUnreachable, err)
		}
		w.conn = conn
	}
	// Whole milliseconds, rounded up: a wait that bounds a predecessor's trust must
	// never end early.
	ms := int64((timeout + time.Millisecond - 1) / time.Millisecond)
	var free bool
	err := w.conn.QueryRow(ctx, "SELECT pgleader.await_release($1, $2)", key, ms).Scan(&free)
	if err != nil {
		w.close()
		return false, err
	}
	return free, nil
}

func (w *waiter) close() {
	if w.conn != nil {
		w.conn.Close(context.Background())
		w.conn = nil
	}
}

// campaign is the scope's state machine (see the package doc): it runs until ctx
// ends, and when ctx ends while leading it drains and releases.
func (s *Scope) campaign(ctx context.Context) {
	e := s.e
	w := &waiter{e: e}
	defer w.close()
	failures := 0
	quickWakes := 0
	for ctx.Err() == nil {
		sess := e.awaitSession(ctx)
		if sess == nil {
			return
		}
		r, err := sess.tryClaim(s)
		if err != nil {
			failures++
			if isLockTimeout(err) {
				// The previous term's fenced writers still hold the scope's row (they
				// end at the latest L after their client went idle): retry soon.
				if failures%10 == 1 {
					e.log.Info("claim waits for the previous term's fenced transactions", "scope", s.name, "node", e.cfg.NodeID, "attempt", failures)
				}
				sleepCtx(ctx, min(backoff(failures), e.cfg.HeartbeatInterval/5))
				continue
			}
			e.log.Warn("claim failed", "scope", s.name, "node", e.cfg.NodeID, "err", err)
			sleepCtx(ctx, backoff(failures))
			continue
		}
		if !r.acquired {
			// Wait for the lock to be freed. If the holder on record could not be
			// confirmed (its claim is still in flight), look again after one
			// heartbeat interval so followers learn who leads.
			wait := time.Duration(0)
			if r.holder == nil || r.epoch == nil {
				wait = e.cfg.HeartbeatInterval
			} else {
				s.observe(*r.holder, *r.epoch)
			}
			began := monotime.Now()
			if _, err := s.followerWait(ctx, sess, w, wait); err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				e.log.Warn("waiting for the scope lock failed", "scope", s.name, "node", e.cfg.NodeID, "err", err)
				sleepCtx(ctx, backoff(failures))
				continue
			}
			failures = 0
			// A lock that is free at once but cannot be taken is held in a mode we
			// do not wait on (a foreign shared lock: squatting) or changes hands in
			// a race we lost; back off instead of spinning.
			if monotime.Since(began) < time.Millisecond {
				quickWakes++
				if quickWakes > 3 {
					sleepCtx(ctx, backoff(quickWakes-3))
				}
			} else {
				quickWakes = 0
			}
			continue
		}
		failures, quickWakes = 0, 0
		reason := s.lead(ctx, sess, w, r)
		if reason == "resigned" {
			sleepCtx(ctx, e.cfg.ResignCooldown)
		}
	}
}

// followerWait waits for the scope's lock to be freed, interrupted when the session
// is lost or when heartbeats keep finding the scope without a live holder while this
// wait has not ended (its connection may have gone silent).
func (s *Scope) followerWait(ctx context.Context, sess *session, w *waiter, timeout time.Duration) (bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()
	s.obsMu.Lock()
	s.cancelWait, s.freeBeats = cancel, 0
	s.obsMu.Unlock()
	defer func() {
		s.obsMu.Lock()
		s.cancelWait = nil
		s.obsMu.Unlock()
	}()
	return w.awaitRelease(wctx, s.key, timeout)
}

// noteFree records a heartbeat that found no live holder; the second in a row
// interrupts a wait that should have ended (normally it ends within a millisecond
// of the holder's release, long before a heartbeat could notice).
func (s *Scope) noteFree() {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	s.freeBeats++
	if s.freeBeats >= 2 && s.cancelWait != nil {
		s.e.log.Warn("waiting for a free scope's lock did not end: reconnecting the waiter",
			"scope", s.name, "node", s.e.cfg.NodeID)
		s.cancelWait()
		s.cancelWait = nil
	}
}

// noteHeld records a heartbeat that found a live holder.
func (s *Scope) noteHeld() {
	s.obsMu.Lock()
	s.freeBeats = 0
	s.obsMu.Unlock()
}

// observe records that holder leads the scope with epoch and reports it once per
// (holder, epoch), never going back to an older epoch.
func (s *Scope) observe(holder string, epoch int64) {
	s.obsMu.Lock()
	if epoch < s.observedEpoch || (holder == s.observedHolder && epoch == s.observedEpoch) {
		s.obsMu.Unlock()
		return
	}
	s.observedHolder, s.observedEpoch = holder, epoch
	s.obsMu.Unlock()
	e := s.e
	e.emit(Event{Kind: EventObserved, Scope: s.name, Epoch: epoch, Holder: holder})
	e.broker.publish(Transition{Kind: LeaderObserved, Scope: s.name, Epoch: epoch, Holder: holder, At: time.Now()})
	e.log.Info("leader observed", "scope", s.name, "node", e.cfg.NodeID, "holder", holder, "epoch", epoch)
}

// lead runs one term from a won claim to its end and returns the end's reason.
func (s *Scope) lead(ctx context.Context, sess *session, w *waiter, r claimResult) string {
	e := s.e
	t := newTerm(s, *r.epoch, sess, r.start)
	if !sess.addTerm(t) {
		return "lost_connection"
	}
	s.term.Store(t)
	defer s.term.CompareAndSwap(t, nil)
	s.obsMu.Lock()
	s.observedHolder, s.observedEpoch = e.cfg.NodeID, t.epoch
	s.obsMu.Unlock()
	t.emit(Event{Kind: EventAcquired})
	// Lease the guard before the gate can open, so that a freeze from here on
	// frees the guard together with the scope locks.
	gctx, cancel := sess.stmtCtx(e.cfg.HeartbeatTimeout)
	err := sess.guardBeat(gctx)
	cancel()
	if err != nil {
		sess.lose("lost_connection")
	}

	s.awaitPredecessors(t, sess, w, r)

	elected := false
	if ctx.Err() == nil {
		t.open()
		select {
		case <-t.ctx.Done():
		default:
			elected = true
			e.broker.publish(Transition{Kind: Elected, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, At: time.Now()})
			e.log.Info("elected", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch,
				"predecessor", deref(r.prevHolder), "prev_epoch", deref(r.prevEpoch))
		}
	}

	var reason string
	select {
	case <-t.ctx.Done():
		reason = t.reason
		if !sess.isLost() {
			// Evicted while the session lives: make sure the lock is not kept.
			if _, err := sess.release(s, t.epoch, reason); err != nil {
				sess.lose("lost_connection")
			}
		}
	case req := <-t.resign:
		reason = "resigned"
		req.reply <- s.release(t, reason)
	case <-ctx.Done():
		reason = "shutdown"
		_ = s.release(t, reason)
	}
	if elected {
		e.broker.publish(Transition{Kind: Revoked, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, Reason: t.reason, At: time.Now()})
		e.log.Info("revoked", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch, "reason", t.reason)
	}
	return reason
}

// awaitPredecessors keeps a new term pending until no earlier holder can trust its
// gate: until each guard the claim reported as held is free, or until the largest
// trust window among those holders (plus a margin) has passed since the claim
// returned, whichever comes first (see "No overlap" in the package doc). Guards of
// this very session are skipped: its earlier terms closed their gates before this
// claim was sent.
func (s *Scope) awaitPredecessors(t *term, sess *session, w *waiter, r claimResult) {
	e := s.e
	var keys []int64
	for _, k := range r.waitGuards {
		if k != sess.guardKey {
			keys = append(keys, k)
		}
	}
	// A predecessor that left its term open without a recorded guard (not written
	// by this engine): nothing to watch, so wait out its trust.
	blind := r.prevClosed != nil && !*r.prevClosed && r.prevGuardKey == nil
	if len(keys) == 0 && !blind {
		return
	}
	trust := e.cfg.TrustWindow
	if r.prevTrustMS != nil && time.Duration(*r.prevTrustMS)*time.Millisecond > trust {
		trust = time.Duration(*r.prevTrustMS) * time.Millisecond
	}
	deadline := r.done + int64(trust+safetyMargin(trust))
	waitedOut := blind
	for _, k := range keys {
		left := time.Duration(deadline - monotime.Now())
		if left <= 0 {
			waitedOut = true
			break
		}
		free, err := w.awaitRelease(t.ctx, k, left)
		if err != nil || !free {
			waitedOut = true // cannot see the guard, or it outlived the bound
			break
		}
	}
	if waitedOut {
		sleepCtx(t.ctx, time.Duration(deadline-monotime.Now()))
	}
	e.log.Info("predecessors safe", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch,
		"predecessor", deref(r.prevHolder), "prev_reason", deref(r.prevReason), "guards", len(keys),
		"waited", time.Duration(monotime.Now()-r.done), "waited_out_trust", waitedOut)
}

// release drains the term, closes its gate, then records the release and unlocks.
func (s *Scope) release(t *term, reason string) error {
	e := s.e
	t.drain(e.cfg.DrainTimeout)
	t.closeGate(reason)
	t.sess.removeTerm(t)
	// The release waits for the term's own fenced writers in bounded steps, giving
	// the session back to the other scopes' heartbeats in between. A writer holds
	// out at most the lease once its client goes idle (fence sets
	// idle_in_transaction_session_timeout); past a generous bound the session is
	// dropped instead, which frees the lock all the same.
	giveUp := monotime.Now() + int64(e.cfg.DrainTimeout+2*e.cfg.SessionLease)
	ok, err := t.sess.release(s, t.epoch, reason)
	for isLockTimeout(err) && monotime.Now() < giveUp {
		sleepCtx(t.ctx, e.cfg.HeartbeatTimeout/5)
		ok, err = t.sess.release(s, t.epoch, reason)
	}
	switch {
	case err != nil:
		t.end("lost_connection", false)
		// The lock may still be held on a session we cannot use: drop the session
		// so the server frees it now rather than after the lease.
		t.sess.lose("lost_connection")
		return fmt.Errorf("release %s: %w", s.name, err)
	case !ok:
		t.end("evicted", false)
		return fmt.Errorf("release %s: %w (epoch %d was no longer ours)", s.name, ErrNotLeader, t.epoch)
	}
	t.end(reason, true)
	return nil
}

func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// safetyMargin covers clock-rate differences between hosts when a successor waits
// out its predecessor's trust window.
func safetyMargin(w time.Duration) time.Duration {
	return max(10*time.Millisecond, w/50)
}
