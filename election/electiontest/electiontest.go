// Package electiontest gives a service's own unit tests an Elector that leads
// when the test says so: no PostgreSQL, no timing, no randomness. The code under
// test gets a real *election.Elector (Scope, Require, Do, Lead, Await, Observe,
// Fence, FencedTx, Health all work), and the test drives its terms with a
// Controller:
//
//	e, ctl := electiontest.New(t, election.Config{Scopes: []string{"billing"}})
//	go service.Run(ctx, e)                 // calls e.Start, Scope.Lead, …
//	ctl.Lead("billing")                    // this node wins epoch 1: Lead's function runs
//	ctl.Lose("billing", protocol.ReasonLostConnection) // its context is cancelled
//	ctl.Elsewhere("billing", "node-2")     // another node leads epoch 2: old tokens are fenced
//
// Fence and FencedTx check the token's epoch in memory (ErrFenced once another
// term began) and send nothing for the fence itself (FencedTx still begins and
// commits a transaction on the db it is given). A gate, once opened, stays open
// until the test ends the term: no heartbeats, no trust window. Resign works; so
// does cancelling Start's context (a drain with Config.DrainTimeout).
//
// It is for tests only: nothing here elects anything.
package electiontest

import (
	"testing"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/internal/manual"
)

// Controller grants and ends the terms of an Elector made by New.
type Controller struct {
	t testing.TB
	d manual.Driver
}

// New returns an Elector for cfg (DSN, ConnConfig and Mode are ignored; no
// database is used) and its Controller. A Config that Validate refuses fails the
// test. The Elector leads nothing until Lead is called, which needs it started
// (Elector.Start).
func New(t testing.TB, cfg election.Config) (*election.Elector, *Controller) {
	t.Helper()
	e, d, err := newManual(cfg)
	if err != nil {
		t.Fatalf("electiontest: %v", err)
	}
	return e, &Controller{t: t, d: d}
}

// newManual is the engine's constructor of a manual Elector, reached through
// election/internal/manual (the engine sets manual.New when it is initialised).
func newManual(cfg election.Config) (*election.Elector, manual.Driver, error) {
	e, d, err := manual.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return e.(*election.Elector), d, nil
}

// Lead makes this node the scope's leader at the next epoch, with its gate open:
// Await and Lead callers proceed, Require succeeds, an elected event is
// emitted. It fails the test if the scope is unknown, this node leads it
// already, or the Elector was not started or has stopped.
func (c *Controller) Lead(scope string) {
	c.t.Helper()
	if err := c.d.Lead(scope); err != nil {
		c.t.Fatalf("electiontest: Lead(%q): %v", scope, err)
	}
}

// Lose ends this node's term of the scope without a clean release, as a lost
// connection or a missed heartbeat would: the gate closes at once, the contexts
// of Do and Lead are cancelled with a *election.LostError carrying reason, and a
// revoked event is emitted. It fails the test if this node does not lead
// the scope.
func (c *Controller) Lose(scope string, reason election.Reason) {
	c.t.Helper()
	if err := c.d.Lose(scope, string(reason)); err != nil {
		c.t.Fatalf("electiontest: Lose(%q): %v", scope, err)
	}
}

// Elsewhere makes another node the scope's leader at the next epoch: this node's
// term, if it had one, ends (evicted), tokens of earlier epochs are fenced, and a
// LeaderObserved transition is published.
func (c *Controller) Elsewhere(scope, node string) {
	c.t.Helper()
	if err := c.d.Elsewhere(scope, node); err != nil {
		c.t.Fatalf("electiontest: Elsewhere(%q, %q): %v", scope, node, err)
	}
}

// Epoch returns the scope's current epoch (0 before any term), whoever holds it.
func (c *Controller) Epoch(scope string) int64 { return c.d.Epoch(scope) }
