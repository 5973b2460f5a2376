package election

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// term is this node's tenure of one epoch of a scope. Its gate opens only once the
// predecessor is known to be safe (allowOpen) and then follows the trust window in
// periods (see period). A term ends once, with a reason.
type term struct {
	scope  *Scope
	epoch  int64
	sess   *session // nil when standalone or manual
	always bool     // standalone: the gate is open whatever the clock and the term's end

	ctx    context.Context // cancelled when the term ends
	cancel context.CancelFunc

	resign    chan resignRequest // Resign → the campaign leading this term
	resigning atomic.Bool        // a resignation requested through the database is under way
	drainCh   chan struct{}      // closed when a drain starts (Token.Draining)
	drainOnce sync.Once

	mu        sync.Mutex
	allowOpen bool
	lastHB    int64 // monotonic start of the last successful heartbeat (or the claim)
	period    *period
	draining  atomic.Bool // set under mu; read without it by Require
	inflight  int
	idle      chan struct{} // closed when inflight drops to 0 (made by drain and busy)
	ended     bool
	reason    Reason
	clean     bool
}

func newTerm(sc *Scope, epoch int64, sess *session, claimStart int64) *term {
	ctx, cancel := context.WithCancel(context.Background())
	return &term{scope: sc, epoch: epoch, sess: sess, ctx: ctx, cancel: cancel, lastHB: claimStart,
		resign: make(chan resignRequest), drainCh: make(chan struct{})}
}

// requestResign gives the term up as Scope.Resign would, because an operator asked
// for it through the database: pgleader.request_resign, or request_handover to
// the node named by to (the release is then recorded as handed_over and the scope
// stays reserved for that node). Heartbeats keep reporting the request until the
// term ends; only the first starts the release. The goroutine ends with the term
// at the latest.
func (t *term) requestResign(to string) {
	if !t.resigning.CompareAndSwap(false, true) {
		return
	}
	e := t.scope.e
	if to != "" {
		e.log.Info("handover requested through the database", "scope", t.scope.name, "epoch", t.epoch,
			"node", e.cfg.NodeID, "to", to)
	} else {
		e.log.Info("resign requested through the database", "scope", t.scope.name, "epoch", t.epoch,
			"node", e.cfg.NodeID)
	}
	go func() {
		req := resignRequest{reply: make(chan error, 1), reason: protocol.ReasonResigned}
		if to != "" {
			req.reason = protocol.ReasonHandedOver
		}
		select {
		case t.resign <- req:
		case <-t.ctx.Done():
			return
		}
		select {
		case err := <-req.reply:
			if err != nil {
				e.log.Warn("requested release failed", "scope", t.scope.name, "epoch", t.epoch, "to", to, "err", err)
			}
		case <-t.ctx.Done():
		}
	}()
}

func (t *term) emit(ev Event) {
	ev.Scope, ev.Epoch = t.scope.name, t.epoch
	t.scope.e.emit(ev)
}

// open allows the gate to open (the predecessor can no longer trust its own) and
// opens it if the last confirmation is still within the trust window.
func (t *term) open() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.allowOpen = true
	t.refreshLocked()
}

// isSettled reports whether the term's gate may open (the predecessors were waited
// out), so the database may forget their unresolved guards.
func (t *term) isSettled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.allowOpen
}

// confirm records a successful heartbeat that started at start (the session
// reports the round trip's heartbeat_ok event).
func (t *term) confirm(start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	if start > t.lastHB {
		t.lastHB = start
	}
	t.refreshLocked()
}

// refreshLocked extends the open period or opens a new one.
func (t *term) refreshLocked() {
	if !t.allowOpen || t.ended {
		return
	}
	until := t.lastHB + int64(t.scope.e.cfg.TrustWindow)
	now := monotime.Now()
	if p := t.period; p != nil {
		if p.extend(until, now) {
			return
		}
		t.closePeriodLocked(protocol.ReasonTrustExpired)
	}
	if until <= now {
		return // a confirmation too old to open anything
	}
	t.openPeriodLocked(until, now)
}

func (t *term) openPeriodLocked(until, now int64) {
	p := &period{term: t}
	p.trustUntil.Store(until)
	p.ctx, p.cancel = context.WithCancelCause(t.ctx)
	if until < math.MaxInt64 { // a gate opened without a trust window (standalone, manual) has no timer
		p.timer = time.AfterFunc(time.Duration(until-now), func() { t.onTrustTimer(p) })
	}
	t.period = p
	t.scope.cur.Store(p)
	t.emit(Event{Kind: EventGateOpen, TrustUntilMonoNS: until})
	t.scope.gateOpened()
}

// token returns a token of the term's open period (a token whose gate is closed
// when none is open).
func (t *term) token() Token {
	t.mu.Lock()
	p := t.period
	t.mu.Unlock()
	if p == nil {
		p = &period{term: t, ctx: t.ctx}
	}
	return Token{Scope: t.scope.name, Epoch: t.epoch, Holder: t.scope.e.cfg.NodeID, p: p}
}

// onTrustTimer closes the period when its trust runs out without a newer heartbeat.
// The gate itself is already closed by then (it is evaluated against the clock);
// this cancels the period's context and reports the closing.
func (t *term) onTrustTimer(p *period) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.period != p {
		return
	}
	now := monotime.Now()
	if left := p.trustUntil.Load() - now; left > 0 {
		p.timer.Reset(time.Duration(left))
		return
	}
	t.closePeriodLocked(protocol.ReasonTrustExpired)
}

func (t *term) closePeriodLocked(reason Reason) {
	p := t.period
	if p == nil {
		return
	}
	p.trustUntil.Store(0)
	t.period = nil
	t.scope.cur.CompareAndSwap(p, nil)
	if p.timer != nil {
		p.timer.Stop()
	}
	p.cancel(&LostError{Scope: t.scope.name, Epoch: t.epoch, Reason: reason})
	t.emit(Event{Kind: EventGateClosed, Reason: reason})
}

// enter registers an in-flight Do or Lead call; false when the term is draining or over.
func (t *term) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining.Load() || t.ended {
		return false
	}
	t.inflight++
	return true
}

func (t *term) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight--
	if t.inflight == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// busy returns a channel closed when the term's in-flight Do and Lead calls have
// all returned, or nil when none is in flight.
func (t *term) busy() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight == 0 {
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	return t.idle
}

// drain refuses new work and waits up to d for in-flight Do calls, or until the
// term ends. The gate stays open for the work already running.
func (t *term) drain(d time.Duration) {
	t.drainOnce.Do(func() { close(t.drainCh) })
	t.mu.Lock()
	t.draining.Store(true)
	if t.inflight == 0 || t.ended {
		t.mu.Unlock()
		return
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-idle:
	case <-t.ctx.Done():
	case <-timer.C:
		t.scope.e.log.Warn("drain deadline passed with work in flight; cancelling it",
			"scope", t.scope.name, "node", t.scope.e.cfg.NodeID, "epoch", t.epoch, "drain_timeout", d)
	}
}

// closeGate closes the gate (before a release).
func (t *term) closeGate(reason Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.allowOpen = false
	t.closePeriodLocked(reason)
}

// end finishes the term once: gate closed, contexts cancelled. clean reports a
// release recorded in the database.
func (t *term) end(reason Reason, clean bool) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	t.ended, t.reason, t.clean = true, reason, clean
	t.allowOpen = false
	t.closePeriodLocked(reason)
	t.mu.Unlock()
	t.cancel()
	if clean {
		t.emit(Event{Kind: EventResigned, Reason: reason})
	} else {
		t.emit(Event{Kind: EventLost, Reason: reason})
	}
}
