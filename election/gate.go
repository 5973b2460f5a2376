package election

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
)

// period is one uninterrupted stretch of an open gate within a term. Its trustUntil
// (monotonic ns) only moves forward while the period lives and is zeroed when the
// period closes; a new period starts if the gate reopens. Tokens point at the period
// they were issued in, so Token.Valid is one atomic load and a clock read.
type period struct {
	term       *term
	trustUntil atomic.Int64
	ctx        context.Context // cancelled when the period closes, with a *LostError as cause
	cancel     context.CancelCauseFunc
	timer      *time.Timer // closes the period when trust runs out
}

// open reports whether the gate of this period is open at monotonic time now.
// trustUntil 0 means closed, whatever the clock reads.
func (p *period) open(now int64) bool {
	t := p.trustUntil.Load()
	return t != 0 && now < t
}

// extend moves trustUntil forward to t if the period has not expired at now.
// It returns false when the period has expired (it must then be closed).
func (p *period) extend(t, now int64) bool {
	for {
		old := p.trustUntil.Load()
		if old == 0 || old <= now {
			return false
		}
		if t <= old || p.trustUntil.CompareAndSwap(old, t) {
			return true
		}
	}
}

// Token proves that this node led Scope with Epoch when it was issued. Pass it to
// Fence inside the transaction of a write made under leadership.
type Token struct {
	Scope  string
	Epoch  int64
	Holder string
	p      *period
	stop   <-chan struct{} // Lead: closed when Lead's context ends or the term drains
}

// Valid re-checks the gate now: true while the term that issued the token lasts and
// its trust window has not ended. Call it right before an action whose effect
// cannot be fenced in the database; it costs a clock read and an atomic load.
func (t Token) Valid() bool {
	if t.p == nil {
		return false
	}
	if t.p.term.always {
		return true
	}
	return t.p.open(monotime.Now())
}

// Context returns a context that is cancelled when the token stops being valid
// because its gate closed (trust window ended, leadership lost, drained); its
// cause (context.Cause) is a *LostError saying why.
func (t Token) Context() context.Context {
	if t.p == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotLeader)
		return ctx
	}
	return t.p.ctx
}

// Draining returns a channel that is closed when the work running under this
// token should finish and take nothing new: the term is being handed over or
// released (Resign, shutdown) or, for a token given to a Lead function, Lead's
// context ended. The token stays valid, and its writes fenced, until the work
// returns or Config.DrainTimeout passes, whichever comes first; then the gate
// closes. A zero token's channel is closed.
func (t Token) Draining() <-chan struct{} {
	switch {
	case t.stop != nil:
		return t.stop
	case t.p != nil:
		return t.p.term.drainCh
	}
	return closedChan
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
