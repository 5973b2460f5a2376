package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// queueClaim marks a claim of the scope as queued in sess's batch; false when the
// campaign is not waiting as a follower or a claim is queued or won already.
//
// A wake-up that finds a claim queued or in flight is not dropped: that claim may
// have read the scope before the event the wake-up announces (a claim that saw
// the old leader still holding the lock, while the release it was woken for
// committed), so the campaign claims once more after its outcome (rewoken)
// unless it won. Dropping it cost a whole heartbeat interval, about one targeted
// handover in two hundred: the target's own claim, queued when its cooldown from
// an earlier handover ended, was in flight when the release arrived.
func (s *Scope) queueClaim(sess *session) bool {
	if s.e.cfg.priority() == 0 {
		return false // an observer never claims
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if !s.following || (s.outcome != nil && s.outcome.r.acquired && s.outcome.sess == sess) {
		return false
	}
	if s.queued {
		s.rewoken = true
		return false
	}
	s.queued = true
	return true
}

// takeRewoken reports (and clears) whether a wake-up came while the last claim
// was queued or in flight.
func (s *Scope) takeRewoken() bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	r := s.rewoken
	s.rewoken = false
	return r
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
	s.rewoken = false
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
				// A wake-up while this claim was in flight: claim again at once if
				// it did not win and nothing else retries it sooner (queueClaim).
				again := s.takeRewoken() && o.err == nil && !o.r.acquired && !o.r.busy
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
					if reason == protocol.ReasonResigned || reason == protocol.ReasonHandedOver {
						s.coolDown(ctx, *o.r.epoch)
					}
					break follow
				case o.r.holder == nil && o.r.deferredTo == nil:
					// The lock is taken, but not by a live holder on record: most
					// often another node's claim in flight, which may well defer to
					// this node (priority, handover) and let go a moment later. Retry
					// soon, backing off (a squatter that keeps the lock costs a claim
					// per second at most; heartbeats retry it too).
					failures++
					retry.Reset(backoff(failures))
				default:
					failures = 0
					if o.r.holder != nil && o.r.epoch != nil && *o.r.holder != e.cfg.NodeID {
						s.observe(*o.r.holder, *o.r.epoch)
					}
				}
				if again {
					retry.Stop()
					sess.requestClaims([]*Scope{s}, "")
				}
			}
		}
		retry.Stop()
	}
}

// coolDown sits out Config.ResignCooldown after this node resigned or handed
// over the term of epoch, so that another node takes the scope: the release
// opens a free-for-all (or reserves the scope for a handover's target), and the
// node that just let go should not win it back. It ends early when a release
// hint reserves the scope for this node (an operator's handover --to it, or
// its failback): no other node may claim a reserved scope, so there is no
// free-for-all to stay out of, and the operator's explicit choice should not
// wait the cooldown out. The hint is only a hint (anyone may NOTIFY): the claim
// that follows wins only if the database reserves the scope for this node or
// leaves it free; a forged hint can shorten a cooldown, never break a term.
// A lost hint costs what it always did: the claim after the cooldown.
func (s *Scope) coolDown(ctx context.Context, epoch int64) {
	e := s.e
	if e.cfg.ResignCooldown <= 0 {
		return
	}
	timer := time.NewTimer(e.cfg.ResignCooldown)
	defer timer.Stop()
	for !s.reservedForMeSince(epoch) {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-s.reserved:
		}
	}
	e.log.Info("cooldown ended early: a handover reserves the scope for this node", "scope", s.name, "node", e.cfg.NodeID, "epoch", epoch)
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
	e.log.Info("leader observed", "scope", s.name, "node", e.cfg.NodeID, "holder", holder, "epoch", epoch)
}

// lead runs one term from a won claim to its end and returns the end's reason.
func (s *Scope) lead(ctx context.Context, sess *session, r claimResult) Reason {
	e := s.e
	t := newTerm(s, *r.epoch, sess, r.start)
	if !sess.addTerm(t) {
		return protocol.ReasonLostConnection
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
		err := sess.m.armGuard(gctx, sess, r.start)
		cancel()
		if err == nil {
			break
		}
		if monotime.Now() > giveUp {
			sess.lose(protocol.ReasonLostConnection, fmt.Errorf("cannot arm the guard lease for %s: %w", s.name, err))
		}
	}

	if ctx.Err() == nil { // a term won while the campaign ends never opens its gate
		// The wait ends with the term or with the campaign (a SIGTERM during a
		// wait for a predecessor stops at once: the gate never opens).
		wctx, cancel := context.WithCancel(t.ctx)
		stop := context.AfterFunc(ctx, cancel)
		sess.m.awaitPredecessors(wctx, s, t, sess, r)
		stop()
		cancel()
	}

	elected := false
	if ctx.Err() == nil {
		t.open()
		select {
		case <-t.ctx.Done():
		default:
			elected = true
			t.emit(Event{Kind: EventElected, Holder: e.cfg.NodeID, Token: t.token()})
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
				sess.lose(protocol.ReasonLostConnection, err)
			}
		}
	case req := <-t.resign:
		reason = req.reason
		req.reply <- s.release(t, reason)
	case <-ctx.Done():
		reason = protocol.ReasonShutdown
		// A lost session was logged when it was lost; anything else is this
		// scope's own failure to release at shutdown (the lock goes with the
		// session all the same).
		if err := s.release(t, reason); err != nil && !errors.Is(err, errSessionLost) {
			e.log.Warn("release at shutdown failed", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch, "err", err)
		}
	}
	if elected {
		// The term is gone before anyone hears so: a subscriber that reads
		// Role or Health on Revoked sees a follower, not a pending holder.
		s.term.CompareAndSwap(t, nil)
		t.emit(Event{Kind: EventRevoked, Holder: e.cfg.NodeID, Reason: t.reason, Token: t.token()})
		e.log.Info("revoked", "scope", s.name, "node", e.cfg.NodeID, "epoch", t.epoch, "reason", t.reason)
	}
	return reason
}

// lockAwaitPredecessors keeps a new term pending until no earlier holder can
// trust its gate: until each guard the claim reported as held is free, or until
// the largest trust window among those holders (plus a margin) has passed since
// the claim returned, whichever comes first (see "No overlap" in the package
// doc). Guards of this very session are skipped: its earlier terms closed their
// gates before this claim was sent. The predecessor's trust window comes from
// the database, which bounds it (check_timing: below the session lease, at most
// maxSessionLease); the wait is bounded by maxSessionLease here as well, and ends
// when ctx does.
func (s *Scope) lockAwaitPredecessors(ctx context.Context, t *term, sess *session, r claimResult) {
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
	if trust > maxSessionLease {
		e.log.Warn("a predecessor's recorded trust window exceeds the maximum session lease: waiting the maximum",
			"scope", s.name, "node", e.cfg.NodeID, "prev_trust", trust, "max", maxSessionLease)
		trust = maxSessionLease
	}
	deadline := r.done + int64(trust+safetyMargin(trust))
	waitedOut := blind
	for _, k := range keys {
		if !e.ring.awaitFree(ctx, k, deadline) {
			waitedOut = true // cannot see the guard, or it outlived the bound
			break
		}
	}
	if waitedOut {
		sleepCtx(ctx, time.Duration(deadline-monotime.Now()))
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
		t.end(protocol.ReasonLostConnection, false)
		// The lock may still be held on a session we cannot use: drop the session
		// so the server frees it now rather than after the lease.
		t.sess.lose(protocol.ReasonLostConnection, err)
		return fmt.Errorf("release %s: %w", s.name, err)
	case !ok:
		t.end(protocol.ReasonEvicted, false)
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
