package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
	"github.com/pgleader/pgleader/lab/faultnet"
)

// scenario is one named fault and the schedule that applies it repeatedly until
// the run's duration has passed.
type scenario struct {
	name        string
	about       string
	nodes       int               // node processes (default 3)
	nodeArgs    []string          // extra flags for every node of this scenario
	needsServer bool              // restarts PostgreSQL
	pair        string            // "sync" or "async": runs on its own primary and streaming standby, and fails over
	skip        func() string     // reason to skip on this machine, or ""
	viaProxy    bool              // every node reaches PostgreSQL through its own faultnet proxy
	netns       bool              // …and runs in its own network namespace (implies viaProxy)
	expect      checker.Footprint // what the run must show (vacuity guard)
	notLease    string            // why the scenario does not apply in lease mode ("": it does)
	needsHooks  bool              // its nodeArgs use the node's --test-* flags: a lab build only
	run         func(context.Context, *env) error
}

var takeover = checker.Footprint{Takeover: true, FaultApplied: true}

var scenarios = []scenario{
	{name: "kill9", about: "kill -9 of the leader, restarted after a moment", expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			t0, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
			if err != nil {
				return err
			}
			e.fault(fault.Kill9.Name, n.ID, t0, t0)
			if _, err := e.newEpoch(ctx, scope, epoch); err != nil {
				return err
			}
			e.pause(ctx, 100*time.Millisecond, 500*time.Millisecond)
			_, err = e.c.Start(n.ID)
			return err
		})},
	{name: "sigterm", about: "SIGTERM of the leader: drain and hand over, then restart", expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			t0, err := fault.SIGTERM.Apply(ctx, fault.Target{Node: n})
			if err != nil {
				return err
			}
			if _, err := e.newEpoch(ctx, scope, epoch); err != nil {
				return err
			}
			if err := n.Wait(15 * time.Second); err != nil {
				return fmt.Errorf("%s after SIGTERM: %w", n.ID, err)
			}
			e.fault(fault.SIGTERM.Name, n.ID, t0, monotime.Now())
			_, err = e.c.Start(n.ID)
			return err
		})},
	{name: "resign", about: "the leader resigns every scope (SIGUSR1) and stays a candidate", expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			t0, err := fault.Resign.Apply(ctx, fault.Target{Node: n})
			if err != nil {
				return err
			}
			e.fault(fault.Resign.Name, n.ID, t0, t0)
			_, err = e.newEpoch(ctx, scope, epoch)
			return err
		})},
	{name: "handover", about: "pgleader handover of the scope to a follower chosen at random, while the workload runs: that follower, and only it, leads next", expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			var cands []string
			for _, m := range e.c.Running() {
				if m.ID != n.ID && m.ID != e.handedOver[scope] { // the last to hand over cools down
					cands = append(cands, m.ID)
				}
			}
			if len(cands) == 0 {
				return nil
			}
			to := pick(e.rng, cands)
			t0, err := fault.Handover.Apply(ctx, fault.Target{Scope: scope, To: to, Bin: e.o.Bin, DSN: e.dsn})
			if err != nil {
				return err
			}
			next, err := e.newEpoch(ctx, scope, epoch)
			if err != nil {
				return err
			}
			e.fault(fault.Handover.Name, n.ID, t0, monotime.Now())
			if next.Node != to {
				return fmt.Errorf("handover of %s to %s, but %s leads it at epoch %d", scope, to, next.Node, next.Epoch)
			}
			e.handedOver[scope] = n.ID
			return nil
		})},
	{name: "stop-short", about: "SIGSTOP of the leader for less than its trust can lapse: no transition",
		expect: checker.Footprint{FaultApplied: true, NoTransition: true},
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			// A heartbeat starts every 100ms and trust lasts 500ms from its start:
			// a pause of up to 150ms can never let it lapse.
			t0, err := fault.Freeze.Apply(ctx, fault.Target{Node: n})
			if err != nil {
				return err
			}
			time.Sleep(50*time.Millisecond + time.Duration(e.rng.Int64N(int64(100*time.Millisecond))))
			if _, err := fault.Freeze.Undo(ctx, fault.Target{Node: n}); err != nil {
				return err
			}
			e.fault("stop-short", n.ID, t0, monotime.Now())
			return nil
		})},
	{name: "stop-long", about: "SIGSTOP of the leader for longer than the session lease: takeover, then SIGCONT",
		expect: takeover,
		run:    leaderFaults(untilTakeover("stop-long", 0, 300*time.Millisecond, hold(fault.Freeze, process)))},
	{name: "pause-write", about: "the leader stalls between its gate check and its write, is frozen past the lease there, a follower takes over; after SIGCONT its write must be refused",
		nodeArgs:   []string{"--test-pause-before-write", "250ms"},
		needsHooks: true,
		expect:     checker.Footprint{Takeover: true, StaleRejected: true, FaultApplied: true},
		run: func(ctx context.Context, e *env) error {
			for e.running() && ctx.Err() == nil {
				scope := pick(e.rng, e.scopes)
				n, epoch, err := e.leader(ctx, scope)
				if err != nil {
					return err
				}
				// Catch the leader inside its pause: the gate was checked, the write not sent.
				paused, err := e.c.WaitFor(ctx, func(r eventlog.Record) bool {
					return r.Node == n.ID && r.Scope == scope && r.Event == "action_paused" && r.Epoch == epoch
				})
				if err != nil {
					return err
				}
				t0, err := fault.Freeze.Apply(ctx, fault.Target{Node: n})
				if err != nil {
					return err
				}
				_, werr := e.newEpoch(ctx, scope, epoch)
				if _, err := fault.Freeze.Undo(ctx, fault.Target{Node: n}); err != nil {
					return err
				}
				e.fault("pause-write", n.ID, t0, monotime.Now())
				if werr != nil {
					return werr
				}
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, err = e.c.WaitFor(wctx, func(r eventlog.Record) bool {
					return r.Node == n.ID && r.RequestID == paused.RequestID && r.Event != "action_paused"
				})
				cancel()
				if err != nil {
					return fmt.Errorf("no outcome for the paused write %s: %w", paused.RequestID, err)
				}
				e.pause(ctx, 200*time.Millisecond, 600*time.Millisecond)
			}
			return nil
		}},
	{name: "terminate", about: "pg_terminate_backend of the leader's leadership session; its process lives on",
		expect: takeover, notLease: "no leadership session to terminate (a lease outlives any backend)",
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			t0, err := fault.Terminate.Apply(ctx, fault.Target{Admin: e.admin, Scope: scope})
			if err != nil {
				return err
			}
			e.fault(fault.Terminate.Name, n.ID, t0, t0)
			_, err = e.newEpoch(ctx, scope, epoch)
			return err
		})},
	{name: "net-hang", about: "the path between the leader and PostgreSQL goes silent (no FIN, no RST) until a follower took over, then heals",
		viaProxy: true, expect: takeover,
		run: leaderFaults(untilTakeover(fault.NetHang.Name, 0, 300*time.Millisecond, hold(fault.NetHang, proxy)))},
	{name: "partition", about: "a true silent partition: the leader's network namespace drops every packet both ways (nftables) until a follower took over, then heals",
		viaProxy: true, netns: true, expect: takeover,
		skip: func() string { return faultnet.NamespaceSupport() },
		run:  leaderFaults(untilTakeover(fault.Partition.Name, 0, 300*time.Millisecond, hold(fault.Partition, namespace)))},
	{name: "net-reset", about: "every connection between the leader and PostgreSQL is reset, and new ones too until it heals",
		viaProxy: true, expect: takeover,
		run: leaderFaults(untilTakeover(fault.NetReset.Name, 100*time.Millisecond, 400*time.Millisecond, hold(fault.NetReset, proxy)))},
	{name: "latency-low", about: "25–35 ms latency each way on every node's path (round trip well below the 150 ms heartbeat timeout): no transition",
		viaProxy: true, expect: checker.Footprint{FaultApplied: true, NoTransition: true},
		run: func(ctx context.Context, e *env) error {
			for _, s := range e.scopes { // faults strike a settled cluster
				if _, _, err := e.leader(ctx, s); err != nil {
					return err
				}
			}
			lag := fault.Latency(30*time.Millisecond, 5*time.Millisecond)
			for e.running() && ctx.Err() == nil {
				t0 := monotime.Now()
				for _, p := range e.proxies {
					if _, err := lag.Apply(ctx, fault.Target{Link: p}); err != nil {
						return err
					}
				}
				e.pause(ctx, time.Second, 3*time.Second)
				for _, p := range e.proxies {
					if _, err := lag.Undo(ctx, fault.Target{Link: p}); err != nil {
						return err
					}
				}
				e.fault("latency-low", "", t0, monotime.Now())
				e.pause(ctx, 200*time.Millisecond, 800*time.Millisecond)
			}
			return nil
		}},
	{name: "latency-high", about: "100–140 ms latency each way on the leader's path (round trip above the 150 ms heartbeat timeout): it must give way",
		viaProxy: true, expect: takeover,
		run: leaderFaults(untilTakeover("latency-high", 200*time.Millisecond, 600*time.Millisecond,
			hold(fault.Latency(120*time.Millisecond, 20*time.Millisecond), proxy)))},
	{name: "same-id", about: "the leader is frozen and its node id is started again (a restart while the old process still lives); the old one is thawed after a takeover",
		expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			var twin *cluster.Node
			frozen := hold(fault.Freeze, process)
			err := untilTakeover("same-id", 0, 300*time.Millisecond, holding{
				apply: func(ctx context.Context, e *env, n *cluster.Node) (int64, error) {
					t0, err := frozen.apply(ctx, e, n)
					if err != nil {
						return t0, err
					}
					twin, err = e.c.StartTwin(n.ID)
					return t0, err
				},
				undo: frozen.undo,
			})(ctx, e, n, scope, epoch)
			if err != nil {
				return err
			}
			// Both processes now campaign under one id for a while; then both go and
			// the node comes back as one process, as an operator would set it right.
			e.pause(ctx, 500*time.Millisecond, 1500*time.Millisecond)
			for _, p := range []*cluster.Node{n, twin} {
				if _, err := p.Kill(); err != nil {
					return err
				}
			}
			_, err = e.c.Start(n.ID)
			return err
		})},
	{name: "notify-storm", about: "a foreign session floods leader_change with forged notifications while leaders are killed: correctness must not depend on NOTIFY",
		expect: takeover,
		run: func(ctx context.Context, e *env) error {
			sctx, stop := context.WithCancel(ctx)
			defer stop()
			conn, err := reconnect(sctx, e.dsn)
			if err != nil {
				return err
			}
			storm := make(chan error, 1)
			go func() {
				defer conn.Close(context.Background())
				for i := 0; sctx.Err() == nil; i++ {
					payload := fmt.Sprintf(`{"scope":%q,"epoch":%d,"holder":"forged","event":"elected"}`, pick(e.rng, e.scopes), 1000+i)
					if _, err := conn.Exec(sctx, "SELECT pg_notify('leader_change', $1)", payload); err != nil && sctx.Err() == nil {
						storm <- err
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				storm <- nil
			}()
			t0 := monotime.Now()
			err = leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
				t, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
				if err != nil {
					return err
				}
				e.fault("notify-storm-kill9", n.ID, t, t)
				if _, err := e.newEpoch(ctx, scope, epoch); err != nil {
					return err
				}
				_, err = e.c.Start(n.ID)
				return err
			})(ctx, e)
			stop()
			if serr := <-storm; serr != nil && err == nil {
				err = fmt.Errorf("notification storm: %w", serr)
			}
			e.fault("notify-storm", "", t0, monotime.Now())
			return err
		}},
	{name: "notify-flood", about: "a role with nothing but CONNECT floods leader_change for the whole run (7000-byte payloads and forged events, three connections): no heartbeat may fail, no gate close, no leadership move",
		expect: checker.Footprint{FaultApplied: true, NoTransition: true}, run: notifyFlood},
	{name: "squat", about: "a foreign session queues on a scope's key behind the leader, gets it when the leader is killed, holds it a while and lets go: a collector must name it, leadership must resume",
		expect: takeover, notLease: "no advisory lock to squat", run: leaderFaults(squat)},
	{name: "pg-immediate", about: "PostgreSQL stop -m immediate (a crash) and start", needsServer: true,
		expect: checker.Footprint{FaultApplied: true},
		run:    serverRestarts("immediate")},
	{name: "pg-fast", about: "PostgreSQL restart -m fast", needsServer: true,
		expect: checker.Footprint{FaultApplied: true},
		run:    serverRestarts("fast")},
	{name: "pg-failover-sync", about: "the primary crashes, its synchronous standby is promoted, the old primary rebuilt as the new standby",
		// Every session ends with the old primary, and whichever node reconnects
		// first wins: leadership must resume in a new term, by any node.
		pair: "sync", notLease: "the runner's PgBouncer points at one server",
		expect: checker.Footprint{Resumed: true, FaultApplied: true}, run: failovers(true)},
	{name: "pg-failover-async", about: "the asynchronous standby stops receiving, the leaders are killed (bumps it never sees), the primary crashes, the standby is promoted",
		pair: "async", notLease: "the runner's PgBouncer points at one server", expect: takeover, run: failovers(false)},
	{name: "herd", about: "20 candidates; the leader is killed every few seconds", nodes: 20,
		expect: takeover,
		run: leaderFaults(func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
			t0, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
			if err != nil {
				return err
			}
			e.fault("herd-kill9", n.ID, t0, t0)
			if _, err := e.newEpoch(ctx, scope, epoch); err != nil {
				return err
			}
			e.pause(ctx, time.Second, 2*time.Second)
			_, err = e.c.Start(n.ID)
			return err
		})},
}

// leaderFaults applies strike to the working leader of a random scope, over and
// over, with a random pause in between.
func leaderFaults(strike func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		for e.running() && ctx.Err() == nil {
			scope := pick(e.rng, e.scopes)
			n, epoch, err := e.leader(ctx, scope)
			if err != nil {
				return err
			}
			if err := strike(ctx, e, n, scope, epoch); err != nil {
				return err
			}
			e.pause(ctx, 200*time.Millisecond, 800*time.Millisecond)
		}
		return nil
	}
}

// holding is a fault that holds until undone, applied to a node: apply returns
// when it struck.
type holding struct {
	apply func(context.Context, *env, *cluster.Node) (int64, error)
	undo  func(context.Context, *env, *cluster.Node) error
}

// hold applies f, a fault of the catalogue that holds, to what on picks of a node.
func hold(f fault.Fault, on func(*env, *cluster.Node) fault.Target) holding {
	return holding{
		apply: func(ctx context.Context, e *env, n *cluster.Node) (int64, error) { return f.Apply(ctx, on(e, n)) },
		undo: func(ctx context.Context, e *env, n *cluster.Node) error {
			_, err := f.Undo(ctx, on(e, n))
			return err
		},
	}
}

// The parts of a node a fault strikes.
func process(_ *env, n *cluster.Node) fault.Target   { return fault.Target{Node: n} }
func proxy(e *env, n *cluster.Node) fault.Target     { return fault.Target{Link: e.proxies[n.ID]} }
func namespace(e *env, n *cluster.Node) fault.Target { return fault.Target{Link: e.namespaces[n.ID]} }

// untilTakeover is the shape of the faults that hold until a follower has taken
// over: apply the fault to the leader, wait for a higher epoch of the scope, keep the
// fault a random [lo, hi) longer, undo it, and record it from apply to undo.
func untilTakeover(kind string, lo, hi time.Duration, f holding) func(context.Context, *env, *cluster.Node, string, int64) error {
	return func(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
		t0, err := f.apply(ctx, e, n)
		if err != nil {
			return err
		}
		_, werr := e.newEpoch(ctx, scope, epoch)
		e.pause(ctx, lo, hi)
		if err := f.undo(ctx, e, n); err != nil {
			return err
		}
		e.fault(kind, n.ID, t0, monotime.Now())
		return werr
	}
}

// serverRestarts restarts PostgreSQL in mode over and over; every time, both scopes
// must be led again under a higher epoch.
func serverRestarts(mode string) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		for e.running() && ctx.Err() == nil {
			epochs, err := e.leaderEpochs(ctx)
			if err != nil {
				return err
			}
			restart := fault.Restart(mode)
			t0, err := restart.Apply(ctx, fault.Target{Server: e.o.Server})
			if err != nil {
				return err
			}
			e.fault(restart.Name, "", t0, monotime.Now())
			if err := e.reconnectAdmin(ctx); err != nil { // it died with the server
				return err
			}
			for _, s := range e.scopes {
				if _, err := e.newEpoch(ctx, s, epochs[s]); err != nil {
					return fmt.Errorf("after restart (%s): %w", mode, err)
				}
			}
			e.pause(ctx, 500*time.Millisecond, 1500*time.Millisecond)
		}
		return nil
	}
}

// extraChecks are the runner's own checks on a history: epochs dense, which
// together with H1 is "one grant each". Each WAL timeline owns a band of epochs
// above (timeline − 1)·2^40 (schema version 6): within each band found in
// pgleader.terms, every value from the band's first to its highest is granted once.
// (The terms of grants lost with an asynchronous primary are not in the table; they
// were the top of their band, so the band stays dense.)
func (s scenario) extraChecks(h checker.History) []string {
	var out []string
	for _, scope := range h.Scopes {
		bands := map[int64][]int64{}
		for _, t := range h.Terms {
			if t.Scope == scope {
				bands[t.Epoch>>40] = append(bands[t.Epoch>>40], t.Epoch)
			}
		}
		for band, epochs := range bands {
			slices.Sort(epochs)
			for i, ep := range epochs {
				if ep != band<<40+int64(i+1) {
					out = append(out, fmt.Sprintf("%s: epochs not dense on timeline %d: %v", scope, band+1, epochs))
					break
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
