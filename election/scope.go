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

	cur      atomic.Pointer[period] // open (or last) gate period; nil when closed
	resignCh chan resignRequest

	obsMu          sync.Mutex // observations come from the campaign and from heartbeats
	observedHolder string
	observedEpoch  int64
}

type resignRequest struct {
	ctx   context.Context
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
	if p == nil {
		return Token{}, ErrNotLeader
	}
	t := p.term
	if !t.standalone && !p.open(monotime.Now()) {
		return Token{}, ErrNotLeader
	}
	if t.draining.Load() {
		return Token{}, ErrNotLeader
	}
	return Token{Scope: s.name, Epoch: t.epoch, Holder: s.e.cfg.NodeID, p: p}, nil
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
	req := resignRequest{ctx: ctx, reply: make(chan error, 1)}
	select {
	case s.resignCh <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.e.stopped:
		return ErrClosed
	default:
		return ErrNotLeader
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
	ms := timeout.Milliseconds()
	if timeout > 0 && ms == 0 {
		ms = 1
	}
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
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" {
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
			if _, err := w.awaitRelease(ctx, s.key, wait); err != nil {
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

	// Pending: wait until the predecessor cannot trust its gate any more. When the
	// predecessor was this very session (a term of ours that ended without a clean
	// release), its gate closed before this claim was sent.
	ownPredecessor := r.prevGuardKey != nil && *r.prevGuardKey == sess.guardKey
	if r.prevClosed != nil && !*r.prevClosed && !ownPredecessor {
		trust := e.cfg.TrustWindow
		if r.prevTrustMS != nil && time.Duration(*r.prevTrustMS)*time.Millisecond > trust {
			trust = time.Duration(*r.prevTrustMS) * time.Millisecond
		}
		deadline := r.done + int64(trust+safetyMargin(trust))
		if r.prevGuardKey == nil {
			sleepCtx(t.ctx, time.Duration(deadline-monotime.Now()))
		} else if left := time.Duration(deadline - monotime.Now()); left > 0 {
			if _, err := w.awaitRelease(t.ctx, *r.prevGuardKey, left); err != nil && t.ctx.Err() == nil {
				// Cannot observe the guard: wait out the predecessor's trust instead.
				sleepCtx(t.ctx, time.Duration(deadline-monotime.Now()))
			}
		}
		e.log.Info("predecessor safe", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch,
			"predecessor", deref(r.prevHolder), "prev_reason", deref(r.prevReason),
			"waited", time.Duration(monotime.Now()-r.done))
	}
	t.open()

	select {
	case <-t.ctx.Done():
	default:
		e.broker.publish(Transition{Kind: Elected, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, At: time.Now()})
		e.log.Info("elected", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch,
			"predecessor", deref(r.prevHolder), "prev_epoch", deref(r.prevEpoch))
	}

	var reason string
	select {
	case <-t.ctx.Done():
		reason = t.reason
		if !sess.isLost() {
			// Evicted while the session lives: make sure the lock is not kept.
			_, _ = sess.release(s, t.epoch, reason)
		}
	case req := <-s.resignCh:
		reason = "resigned"
		req.reply <- s.release(t, reason)
	case <-ctx.Done():
		reason = "shutdown"
		_ = s.release(t, reason)
	}
	e.broker.publish(Transition{Kind: Revoked, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, Reason: t.reason, At: time.Now()})
	e.log.Info("revoked", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch, "reason", t.reason)
	return reason
}

// release drains the term, closes its gate, then records the release and unlocks.
func (s *Scope) release(t *term, reason string) error {
	e := s.e
	t.drain(e.cfg.DrainTimeout)
	t.closeGate(reason)
	t.sess.removeTerm(t)
	ok, err := t.sess.release(s, t.epoch, reason)
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
