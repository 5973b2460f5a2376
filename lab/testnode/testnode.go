// Package testnode runs in-process nodes — Electors — for the tests of the
// engine and of what watches it (collector, exporter), with timing fast enough
// for tests.
//
// It is a package of its own, not part of lab/pgtest, because it imports the
// engine, and the engine's own in-package tests import lab/pgtest: only tests
// outside package election (and the watchers' tests) can use it.
package testnode

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// FastConfig is a node's configuration with timing fit for tests: I + T < W < L
// with L − W ≥ 100 ms (heartbeat every 50 ms, timeout 100 ms, trust window
// 300 ms, session lease 500 ms), a drain of at most 1 s, and pgtest.Logger.
func FastConfig(dsn, id string, scopes ...string) election.Config {
	return election.Config{
		DSN: dsn, NodeID: id, Scopes: scopes,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond,
		DrainTimeout: time.Second, ResignCooldown: 300 * time.Millisecond,
		Logger: pgtest.Logger(),
	}
}

// Node is an Elector running in the test that started it.
type Node struct {
	*election.Elector
	t      testing.TB
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Start creates an Elector from cfg and runs it until Stop or the end of the
// test; each of observers sees every event from the first (added with
// election.Synchronous before the Elector runs).
func Start(t testing.TB, cfg election.Config, observers ...func(election.Event)) *Node {
	t.Helper()
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range observers {
		e.Observe(o, election.Synchronous())
	}
	return Run(t, e)
}

// Run runs e until Stop or the end of the test.
func Run(t testing.TB, e *election.Elector) *Node {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Elector: e, t: t, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx) }()
	t.Cleanup(n.Stop)
	return n
}

// Stop cancels Run and waits for it to return (drain included); later calls do
// nothing. A Run that fails fails the test; one that does not return within 30 s
// of its cancellation panics: a test must not pass over either, nor wait for
// ever.
func (n *Node) Stop() {
	n.once.Do(func() {
		n.cancel()
		select {
		case err := <-n.done:
			if err != nil {
				n.t.Errorf("node %s: Run returned %v", n.NodeID(), err)
			}
		case <-time.After(30 * time.Second):
			panic("node " + n.NodeID() + ": Run did not return within 30s of cancel")
		}
	})
}

// Cancel cancels Run without waiting for it to return: the node starts to
// stop while the test goes on (Stop then waits).
func (n *Node) Cancel() { n.cancel() }

// Leads reports whether the node's gate for scope is open now.
func (n *Node) Leads(scope string) bool {
	_, err := n.Scope(scope).Require(context.Background())
	return err == nil
}
