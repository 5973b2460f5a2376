package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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

	// Claims are made in batches by the session (batch.go); the campaign takes
	// their outcomes while it waits as a follower.
	cmu       sync.Mutex
	following bool          // the campaign waits as a follower and takes claim outcomes
	queued    bool          // a claim of this scope is queued or in flight
	outcome   *claimOutcome // the last outcome, not yet taken by the campaign
	sig       chan struct{} // cap 1: an outcome arrived

	opened atomic.Pointer[chan struct{}] // closed (and replaced) when a gate period opens: Await
}

func newScope(e *Elector, name string, key int64) *Scope {
	s := &Scope{e: e, name: name, key: key, sig: make(chan struct{}, 1)}
	ch := make(chan struct{})
	s.opened.Store(&ch)
	return s
}

// gateOpened wakes the Await calls waiting for the scope's gate.
func (s *Scope) gateOpened() {
	next := make(chan struct{})
	close(*s.opened.Swap(&next))
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
	tok, err := s.current()
	if errors.Is(err, ErrNotLeader) {
		s.blocked.Add(1)
	}
	return tok, err
}

// current is Require without counting a refusal.
func (s *Scope) current() (Token, error) {
	if s == nil || s.e == nil {
		return Token{}, ErrUnknownScope
	}
	p := s.cur.Load()
	if p == nil || !p.term.standalone && !p.open(monotime.Now()) || p.term.draining.Load() {
		return Token{}, ErrNotLeader
	}
	return Token{Scope: s.name, Epoch: p.term.epoch, Holder: s.e.cfg.NodeID, p: p}, nil
}

// Await waits until this node leads the scope with its gate open and returns the
// token, like Require once it would succeed. It returns ctx's error when ctx ends
// first (give it a deadline to bound the wait), ErrClosed when the Elector has
// stopped, and ErrUnknownScope for a scope not in Config.Scopes. A refusal while
// waiting is not counted in GateBlocked.
func (s *Scope) Await(ctx context.Context) (Token, error) {
	if s == nil || s.e == nil {
		return Token{}, ErrUnknownScope
	}
	for {
		opened := *s.opened.Load() // before the check: an opening after it closes this channel
		tok, err := s.current()
		if err == nil {
			return tok, nil
		}
		select {
		case <-opened:
		case <-ctx.Done():
			return Token{}, ctx.Err()
		case <-s.e.stopped:
			return Token{}, ErrClosed
		}
	}
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
//
// When the gate closes, the cause of fn's context (context.Cause) is a *LostError
// (errors.Is ErrLeadershipLost) that says why. Do is for work that a caller
// starts; the context it passes is derived from ctx, so a ctx that a shutdown
// signal cancels cuts fn at once: for work that should run whenever this node
// leads and finish cleanly at shutdown, use Lead.
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(tok.p.ctx, func() { cancel(context.Cause(tok.p.ctx)) })
	defer stop()
	return fn(ctx, tok)
}

// Lead runs fn whenever this node leads the scope, until ctx ends or the Elector
// stops: it waits for leadership (an open gate), calls fn with the term's token,
// and when fn returns because leadership ended, waits for the next term and calls
// fn again. fn runs once per term (and again if the gate closes and reopens within
// a term, after a heartbeat outage shorter than the session lease).
//
// fn's context is cancelled at once when the gate closes (trust window ended,
// leadership lost): its cause (context.Cause) is a *LostError saying why. A stop
// request is gentler: when the term is handed over or released (Resign,
// pgleader resign, the Elector's shutdown), or when ctx ends, tok.Draining() is
// closed first and fn's context is cancelled only Config.DrainTimeout later (with
// the cause ErrLeadershipLost for a release, context.Cause(ctx) for ctx) unless
// fn returned before; the term stays this node's, and fn's writes fenced, until
// fn returns. So the same signal context may be passed to Start and to Lead: at
// SIGTERM, fn is told to finish and has DrainTimeout to do it.
//
// fn's return decides what Lead does next. When leadership ended (fn's context or
// token says so, or it returned ErrFenced or ErrNotLeader), Lead waits for the
// next term whatever fn returned. nil while still leading: fn's work for this
// term is done, and Lead waits for the next term. Any other error while still
// leading: Lead returns it. Lead returns nil when ctx ends or the Elector stops,
// and ErrUnknownScope for a scope not in Config.Scopes. fn runs on Lead's
// goroutine; Do and Require stay usable alongside.
func (s *Scope) Lead(ctx context.Context, fn func(ctx context.Context, tok Token) error) error {
	if s == nil || s.e == nil {
		return ErrUnknownScope
	}
	for {
		tok, err := s.Await(ctx)
		switch {
		case errors.Is(err, ErrClosed), ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		t := tok.p.term
		if !t.enter() {
			// Draining: this term ends without new work; wait for the next one.
			if !s.waitPeriodEnd(ctx, tok.p) {
				return nil
			}
			continue
		}
		err = s.leadPeriod(ctx, tok, fn)
		t.leave()
		ended := tok.p.ctx.Err() != nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotLeader)
		if err != nil && !ended && ctx.Err() == nil {
			return err
		}
		if !s.waitPeriodEnd(ctx, tok.p) {
			return nil
		}
	}
}

// leadPeriod calls fn for one period of an open gate (see Lead).
func (s *Scope) leadPeriod(ctx context.Context, tok Token, fn func(context.Context, Token) error) error {
	t := tok.p.term
	fctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stopGate := context.AfterFunc(tok.p.ctx, func() { cancel(context.Cause(tok.p.ctx)) })
	defer stopGate()

	// Draining: the term's drain or ctx's end; then fn's context ends
	// DrainTimeout later.
	stop := make(chan struct{})
	done := make(chan struct{})
	var watch sync.WaitGroup
	defer watch.Wait()
	defer close(done)
	watch.Go(func() {
		select {
		case <-t.drainCh:
			// The term's drain closes the gate once fn returns or DrainTimeout
			// passes; the gate's cause then ends fctx.
			close(stop)
			return
		case <-ctx.Done():
		case <-done:
			return
		}
		close(stop)
		timer := time.NewTimer(s.e.cfg.DrainTimeout)
		defer timer.Stop()
		select {
		case <-timer.C:
			cancel(context.Cause(ctx))
		case <-done:
		}
	})
	tok.stop = stop
	return fn(fctx, tok)
}

// waitPeriodEnd waits until the gate period p has closed; false when ctx ended
// or the Elector stopped first.
func (s *Scope) waitPeriodEnd(ctx context.Context, p *period) bool {
	select {
	case <-p.ctx.Done():
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	case <-s.e.stopped:
		return false
	}
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

// queueClaim marks a claim of the scope as queued in sess's batch; false when the
// campaign is not waiting as a follower or a claim is queued or won already.
func (s *Scope) queueClaim(sess *session) bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if !s.following || s.queued || (s.outcome != nil && s.outcome.r.acquired && s.outcome.sess == sess) {
		return false
	}
	s.queued = true
	return true
}

// deliver hands the outcome of a batched claim to the campaign.
func (s *Scope) deliver(o claimOutcome) {
	s.cmu.Lock()
	s.queued = false
	s.outcome = &o
	s.cmu.Unlock()
	select {
	case s.sig <- struct{}{}:
	default:
	}
}

func (s *Scope) takeOutcome() *claimOutcome {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	o := s.outcome
	s.outcome = nil
	return o
}

func (s *Scope) setFollowing(f bool) {
	s.cmu.Lock()
	s.following = f
	s.cmu.Unlock()
}

// observed returns the holder this node last saw leading the scope ("" if none).
func (s *Scope) observed() string {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	return s.observedHolder
}

// knownEpoch returns the epoch this node last saw (0 if none): heartbeats report a
// followed scope only when the epoch on record differs, or it has no live holder.
func (s *Scope) knownEpoch() int64 {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	return s.observedEpoch
}

// campaign is the scope's state machine (see the package doc): it runs until ctx
// ends, and when ctx ends while leading it drains and releases. As a follower it
// holds no connection and sends nothing: it waits for the outcome of a claim that a
// wake-up (a release or a lost peer announced, a heartbeat that found the scope
// without a live holder, the watch of its ring peer) queued for it.
func (s *Scope) campaign(ctx context.Context) {
	e := s.e
	defer s.settle()
	failures := 0
	for ctx.Err() == nil {
		sess := e.awaitSession(ctx)
		if sess == nil {
			return
		}
		s.setFollowing(true)
		sess.requestClaims([]*Scope{s}, "")
		retry := time.NewTimer(time.Hour)
		retry.Stop()
	follow:
		for {
			select {
			case <-ctx.Done():
				retry.Stop()
				return
			case <-sess.lost:
				break follow
			case <-retry.C:
				sess.requestClaims([]*Scope{s}, "")
			case <-s.sig:
				o := s.takeOutcome()
				if o == nil || o.sess != sess {
					continue // a lost session's outcome: its locks went with it
				}
				switch {
				case o.err != nil:
					failures++
					if !errors.Is(o.err, errSessionLost) {
						e.log.Warn("claim failed", "scope", s.name, "node", e.cfg.NodeID, "err", o.err)
					}
					retry.Reset(backoff(failures))
				case o.r.busy:
					// The previous term's fenced writers still hold the scope's row (they
					// end at the latest L after their client went idle): retry soon.
					failures++
					if failures%10 == 1 {
						e.log.Info("claim waits for the previous term's fenced transactions", "scope", s.name, "node", e.cfg.NodeID, "attempt", failures)
					}
					retry.Reset(min(backoff(failures), e.cfg.HeartbeatInterval/5))
				case o.r.acquired:
					failures = 0
					retry.Stop()
					s.setFollowing(false)
					reason := s.lead(ctx, sess, o.r)
					if reason == ReasonResigned {
						sleepCtx(ctx, e.cfg.ResignCooldown)
					}
					break follow
				default:
					failures = 0
					if o.r.holder != nil && o.r.epoch != nil && *o.r.holder != e.cfg.NodeID {
						s.observe(*o.r.holder, *o.r.epoch)
					}
				}
			}
		}
		retry.Stop()
	}
}

// settle ends the campaign's part in claims: no new claim is queued for the scope,
// and a claim still in flight is waited for; if it was won, the term is released at
// once (the gate never opens: the campaign is over).
func (s *Scope) settle() {
	s.cmu.Lock()
	s.following = false
	for s.queued {
		s.cmu.Unlock()
		<-s.sig
		s.cmu.Lock()
	}
	o := s.outcome
	s.outcome = nil
	s.cmu.Unlock()
	if o != nil && o.err == nil && o.r.acquired && !o.sess.isLost() {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		s.lead(done, o.sess, o.r)
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
func (s *Scope) lead(ctx context.Context, sess *session, r claimResult) Reason {
	e := s.e
	t := newTerm(s, *r.epoch, sess, r.start)
	if !sess.addTerm(t) {
		return ReasonLostConnection
	}
	s.term.Store(t)
	defer s.term.CompareAndSwap(t, nil)
	s.obsMu.Lock()
	s.observedHolder, s.observedEpoch = e.cfg.NodeID, t.epoch
	s.obsMu.Unlock()
	t.emit(Event{Kind: EventAcquired})
	// Lease the guard before the gate can open, so that a freeze from here on
	// frees the guard together with the scope locks. A request that timed out in
	// the guard's queue (a busy node) broke nothing: try again; a guard statement
	// that was cut closed the guard connection, which ends the session.
	// Never for longer than a trust window: a term that cannot arm its guard must
	// not hold its scope with the gate shut; dropping the session frees it for
	// another node (and is always safe).
	giveUp := monotime.Now() + int64(e.cfg.TrustWindow)
	for !sess.isLost() {
		gctx, cancel := sess.stmtCtx(e.cfg.HeartbeatTimeout)
		err := sess.armGuard(gctx)
		cancel()
		if err == nil {
			break
		}
		if monotime.Now() > giveUp {
			sess.lose(ReasonLostConnection, fmt.Errorf("cannot arm the guard lease for %s: %w", s.name, err))
		}
	}

	if ctx.Err() == nil { // a term won while the campaign ends never opens its gate
		s.awaitPredecessors(t, sess, r)
	}

	elected := false
	if ctx.Err() == nil {
		t.open()
		select {
		case <-t.ctx.Done():
		default:
			elected = true
			e.broker.publish(Transition{Kind: Elected, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, At: time.Now(), Token: t.token()})
			e.log.Info("elected", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch,
				"predecessor", deref(r.prevHolder), "prev_epoch", deref(r.prevEpoch))
		}
	}

	var reason Reason
	select {
	case <-t.ctx.Done():
		reason = t.reason
		if !sess.isLost() {
			// Evicted while the session lives: make sure the lock is not kept.
			if _, _, err := sess.releaseTerm(s, t.epoch, reason); err != nil {
				sess.lose(ReasonLostConnection, err)
			}
		}
	case req := <-t.resign:
		reason = ReasonResigned
		req.reply <- s.release(t, reason)
	case <-ctx.Done():
		reason = ReasonShutdown
		_ = s.release(t, reason)
	}
	if elected {
		e.broker.publish(Transition{Kind: Revoked, Scope: s.name, Epoch: t.epoch, Holder: e.cfg.NodeID, Reason: t.reason, At: time.Now(), Token: t.token()})
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
func (s *Scope) awaitPredecessors(t *term, sess *session, r claimResult) {
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
		if !e.ring.awaitFree(t.ctx, k, deadline) {
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
func (s *Scope) release(t *term, reason Reason) error {
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
	ok, busy, err := t.sess.releaseTerm(s, t.epoch, reason)
	for err == nil && busy && monotime.Now() < giveUp {
		sleepCtx(t.ctx, e.cfg.HeartbeatTimeout/5)
		ok, busy, err = t.sess.releaseTerm(s, t.epoch, reason)
	}
	if err == nil && busy {
		err = fmt.Errorf("its fenced transactions still hold the scope's row after %v", e.cfg.DrainTimeout+2*e.cfg.SessionLease)
	}
	switch {
	case err != nil:
		t.end(ReasonLostConnection, false)
		// The lock may still be held on a session we cannot use: drop the session
		// so the server frees it now rather than after the lease.
		t.sess.lose(ReasonLostConnection, err)
		return fmt.Errorf("release %s: %w", s.name, err)
	case !ok:
		t.end(ReasonEvicted, false)
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
