package election

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election/internal/manual"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// Manual mode: the Elector of package electiontest. Terms are granted and ended by
// hand (manualDriver, the mode and electiontest's manual.Driver), there is no
// database and no timing: a granted gate stays open until the test ends the term
// (opened without a trust window), and Fence checks the epoch in memory.

// newManual returns a manual Elector for cfg (its DSN, ConnConfig and Mode
// ignored) and its driver: package electiontest's constructor, which it reaches
// through manual.New (set below), not an exported name here.
func newManual(cfg Config) (*Elector, manual.Driver, error) {
	cfg.DSN, cfg.ConnConfig, cfg.Mode = "", nil, ModeLock
	var d *manualDriver
	e, err := newElector(cfg, func(e *Elector) mode {
		d = &manualDriver{e: e, epochs: map[string]int64{}, served: map[*term]chan struct{}{}}
		return d
	})
	if err != nil {
		return nil, nil, err
	}
	return e, d, nil
}

func init() {
	manual.New = func(cfg any) (any, manual.Driver, error) {
		e, d, err := newManual(cfg.(Config))
		if err != nil {
			return nil, nil, err
		}
		return e, d, nil
	}
}

var _ manual.Driver = (*manualDriver)(nil)

// manualDriver is the mode of a manual Elector and its manual.Driver.
type manualDriver struct {
	e      *Elector
	mu     sync.Mutex
	epochs map[string]int64        // the current epoch of each scope (any holder)
	ctx    context.Context         // Start's; nil before Start
	closed bool                    // the Elector is stopping: no new term
	terms  sync.WaitGroup          // the goroutines of led terms
	served map[*term]chan struct{} // closed when the term's goroutine is done
}

func (d *manualDriver) scope(name string) (*Scope, error) {
	s, ok := d.e.scopes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownScope, name)
	}
	return s, nil
}

// Epoch returns the scope's current epoch (0 before any term).
func (d *manualDriver) Epoch(scope string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epochs[scope]
}

func (*manualDriver) connConfig() (*pgx.ConnConfig, error) { return nil, nil }

// check is a database mode's Check, with no database configured.
func (d *manualDriver) check(ctx context.Context) error { return d.e.checkDatabase(ctx) }

// start records Start's context, which Lead's terms run under.
func (d *manualDriver) start(ctx context.Context) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	return nil
}

// fence checks the token's epoch in memory.
func (d *manualDriver) fence(tok Token, _ func(string, ...any) error) error {
	if !d.current(tok.Scope, tok.Epoch) {
		return fmt.Errorf("%w: write for scope %q carries epoch %d, current is %d", ErrFenced, tok.Scope, tok.Epoch,
			d.Epoch(tok.Scope))
	}
	return nil
}

func (*manualDriver) audited() bool     { return false }
func (*manualDriver) sessionless() bool { return true }
func (*manualDriver) resignable() error { return nil }

// current reports whether epoch is the scope's current one (Fence).
func (d *manualDriver) current(scope string, epoch int64) bool { return d.Epoch(scope) == epoch }

// Lead makes this node the scope's leader at the next epoch, with its gate open.
func (d *manualDriver) Lead(name string) error {
	s, err := d.scope(name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	ctx := d.ctx
	if ctx == nil {
		d.mu.Unlock()
		return fmt.Errorf("%w: Start the Elector before it can lead", ErrNotLeader)
	}
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if s.term.Load() != nil {
		d.mu.Unlock()
		return fmt.Errorf("%s: this node leads it already (epoch %d)", name, d.epochs[name])
	}
	d.epochs[name]++
	epoch := d.epochs[name]
	t := newTerm(s, epoch, nil, monotime.Now())
	s.term.Store(t)
	d.terms.Add(1)
	done := make(chan struct{})
	d.served[t] = done
	d.mu.Unlock()

	s.obsMu.Lock()
	s.observedHolder, s.observedEpoch = d.e.cfg.NodeID, epoch
	s.obsMu.Unlock()
	t.emit(Event{Kind: EventAcquired})
	t.mu.Lock()
	t.allowOpen = true
	t.openPeriodLocked(math.MaxInt64, monotime.Now())
	t.mu.Unlock()
	t.emit(Event{Kind: EventElected, Holder: d.e.cfg.NodeID, Token: t.token()})
	go d.serve(ctx, s, t, done)
	return nil
}

// serve runs a led term until it is lost, resigned or the Elector stops.
func (d *manualDriver) serve(ctx context.Context, s *Scope, t *term, done chan struct{}) {
	defer d.terms.Done()
	defer func() {
		d.mu.Lock()
		delete(d.served, t)
		d.mu.Unlock()
		close(done)
	}()
	defer s.term.CompareAndSwap(t, nil)
	select {
	case <-t.ctx.Done():
	case req := <-t.resign:
		t.drain(d.e.cfg.DrainTimeout)
		t.end(protocol.ReasonResigned, true)
		req.reply <- nil
	case <-ctx.Done():
		t.drain(d.e.cfg.DrainTimeout)
		t.end(protocol.ReasonShutdown, true)
	}
	s.term.CompareAndSwap(t, nil) // before revoked, as the engine does (campaign.go)
	t.emit(Event{Kind: EventRevoked, Holder: d.e.cfg.NodeID, Reason: t.reason, Token: t.token()})
}

// Lose ends this node's term of the scope without a clean release.
func (d *manualDriver) Lose(name, reason string) error {
	s, err := d.scope(name)
	if err != nil {
		return err
	}
	t := s.term.Load()
	if t == nil {
		return fmt.Errorf("%w: %s", ErrNotLeader, name)
	}
	d.end(t, Reason(reason))
	return nil
}

// end ends t without a clean release and waits until its goroutine has
// published the Revoked transition and cleared the scope's term.
func (d *manualDriver) end(t *term, reason Reason) {
	d.mu.Lock()
	done := d.served[t]
	d.mu.Unlock()
	t.end(reason, false)
	if done != nil {
		<-done
	}
}

// Elsewhere makes another node the scope's leader at the next epoch: this node's
// term, if any, is lost (evicted) first, and the new leader observed.
func (d *manualDriver) Elsewhere(name, node string) error {
	s, err := d.scope(name)
	if err != nil {
		return err
	}
	if node == d.e.cfg.NodeID {
		return fmt.Errorf("%q is this node: use Lead", node)
	}
	if t := s.term.Load(); t != nil {
		d.end(t, protocol.ReasonEvicted)
	}
	d.mu.Lock()
	d.epochs[name]++
	epoch := d.epochs[name]
	d.mu.Unlock()
	s.observe(node, epoch)
	return nil
}

// run waits for ctx, then lets every led term drain and end (shutdown).
func (d *manualDriver) run(ctx context.Context) error {
	<-ctx.Done()
	d.mu.Lock()
	d.closed = true // no Lead adds a term from here on
	d.mu.Unlock()
	d.terms.Wait()
	return nil
}
