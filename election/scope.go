package election

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
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
	rewoken   bool          // a wake-up came while queued: claim again unless that claim won
	outcome   *claimOutcome // the last outcome, not yet taken by the campaign
	sig       chan struct{} // cap 1: an outcome arrived

	opened atomic.Pointer[chan struct{}] // closed (and replaced) when a gate period opens: Await

	reservation atomic.Pointer[reservation] // what the last release hint reserved the free scope for (nil: none)
	reserved    chan struct{}               // cap 1: a release hint reserved the scope for this node (coolDown)

	lease leaseWatch // lease mode: what this node saw of the scope's lease
}

// reservation is what a release hint said: the node a handover reserved the free
// scope for ("": nobody), and the epoch the hint named (the released term's, or
// the free scope's current one for a handover of a scope nobody leads).
type reservation struct {
	node  string
	epoch int64
}

// reserve records the node a release hint reserved the scope for ("": nobody)
// and wakes the campaign's cooldown when that node is this one.
func (s *Scope) reserve(node string, epoch int64) {
	s.reservation.Store(&reservation{node, epoch})
	if node != "" && node == s.e.cfg.NodeID {
		select {
		case s.reserved <- struct{}{}:
		default:
		}
	}
}

// reservedFor returns the node the scope's last release reserved it for, "" if none.
func (s *Scope) reservedFor() string {
	if p := s.reservation.Load(); p != nil {
		return p.node
	}
	return ""
}

// reservedForMeSince reports whether the last release hint reserved the scope
// for this node at epoch or later: a hint about a term that ended before this
// node's last one (one delivered late) does not count.
func (s *Scope) reservedForMeSince(epoch int64) bool {
	p := s.reservation.Load()
	return p != nil && p.node == s.e.cfg.NodeID && p.epoch >= epoch
}

func newScope(e *Elector, name string, key int64) *Scope {
	s := &Scope{e: e, name: name, key: key, sig: make(chan struct{}, 1), reserved: make(chan struct{}, 1)}
	s.lease.claim = -1
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
	reply  chan error
	reason Reason // protocol.ReasonResigned, or protocol.ReasonHandedOver for a handover
}

// Name returns the scope's name.
func (s *Scope) Name() string { return s.name }

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
	if p == nil || !p.term.always && !p.open(monotime.Now()) || p.term.draining.Load() {
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
	if p.term.always {
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
	if err := s.e.mode.resignable(); err != nil {
		return err
	}
	t := s.term.Load()
	if t == nil {
		return ErrNotLeader
	}
	// The term's campaign takes the request as soon as it is leading (a pending
	// term first waits out its predecessor); a term that ends first answers no.
	req := resignRequest{reply: make(chan error, 1), reason: protocol.ReasonResigned}
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
