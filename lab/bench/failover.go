// Package bench measures pgleader's failover: real `pgleader node` processes on one
// host (lab/cluster), faults applied with signals, and every figure taken from
// the nodes' CLOCK_MONOTONIC event timestamps against the moment the fault was sent.
// Every failover figure carries its baseline from the same run on the same server,
// the physical limit (limit.go), and is reported as a ratio to it as well.
//
//	limit     kill -9 of a holder process      → a bare follower's pg_advisory_lock
//	                                              returns (what PostgreSQL allows)
//	crash     kill -9 of the leader            → a follower's gate_open
//	graceful  SIGTERM of the leader (drain)    → a follower's gate_open, and the gap
//	                                              old gate_closed → new gate_open
//	frozen    SIGSTOP of the leader            → a follower's gate_open, and the gap
//	                                              old trust_until → new gate_open
//	terminate pg_terminate_backend of the leader's leadership session → the old
//	          leader's gate_closed (detection) and a follower's gate_open, and the
//	          gap old gate_closed → new gate_open (the old process lives on)
//	gate      Scope.Require and Token.Valid on a live leader (ns/op, allocs/op)
//	load      transactions per node per heartbeat interval on an idle cluster
//
// Each fault iteration restarts the faulted node and waits until it follows again,
// so every iteration starts from the same state: one leader, n−1 waiting followers.
// The limit is sampled once before each crash iteration, in that same state, so both
// see the same machine load; without crash it runs first, beside an idle cluster.
//
// Scale (scale.go) runs N nodes × M scopes: time until every scope is led,
// connections, idle load, memory and CPU per node, and the per-scope takeovers after
// a kill -9 of the busiest leader.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
	"github.com/pgleader/pgleader/lab/pgbouncer"
)

// Options configure a failover benchmark.
type Options struct {
	Bin       string        // pgleader binary: the nodes', unless NodeBin; the limit probe's
	NodeBin   string        // pgleader binary of the nodes and of `pgleader handover` (a baseline build); empty: Bin
	DSN       string        // a migrated database
	Dir       string        // scratch directory (events files, logs)
	N         int           // iterations per fault scenario
	Nodes     int           // candidates (≥ 2)
	Scenarios []string      // subset of AllScenarios; limit runs whenever a failover scenario does
	NodeArgs  []string      // extra node flags (timing); empty: defaults
	Progress  io.Writer     // per-iteration progress lines (may be nil)
	Timeout   time.Duration // per iteration
	// Mode is the nodes' mode: "lock" (default), or "lease": every node in lease
	// mode through a PgBouncer in transaction pooling that Run starts in front of
	// DSN (the limit, the checks and pgleader handover still use DSN directly).
	Mode string
	// Split adds, to every crash iteration, a bare waiter in
	// pg_advisory_lock_shared on the leader's beacon (the key its leadership
	// session holds for its whole life, beside its scope locks), and splits the
	// crash figure in two: kill → the leader's locks freed, and freed → the
	// successor's gate open. The waiter is one more backend woken by the death.
	Split bool

	nodeDSN string // the nodes' DSN: lock mode, as cluster.NodeRole (cluster.NodeLogin); lease mode, the bouncer's
}

// leaseSkipped are the scenarios that have no meaning in lease mode, and why.
var leaseSkipped = map[string]string{
	"terminate": "a lease-mode node has no leadership session to terminate (every statement is its own transaction through the pooler)",
}

// AllScenarios lists the scenarios in the order they run.
var AllScenarios = []string{"limit", "crash", "graceful", "frozen", "terminate", "handover", "priority", "gate", "load"}

// faultScenarios are the failover scenarios, reported beside the physical limit.
var faultScenarios = []string{"crash", "graceful", "frozen", "terminate", "handover", "priority"}

// scenarioFaults are the faults of the catalogue the failover scenarios apply to
// the leader.
var scenarioFaults = map[string]fault.Fault{
	"crash": fault.Kill9, "priority": fault.Kill9, "graceful": fault.SIGTERM, "frozen": fault.Freeze,
	"terminate": fault.Terminate, "handover": fault.Handover,
}

// HandoverTarget bounds a targeted handover, `pgleader handover` started → the
// target's gate open, at its p99 (an absolute target; the limit ratio is
// reported beside it).
const HandoverTarget = 50 * time.Millisecond

// frozenGapName names the gap between a frozen leader's trust and its
// successor's gate.
const frozenGapName = "frozen gate gap"

// priorityStatName names the crash failover figure with priorities set.
const priorityStatName = "crash failover with priorities"

// CrashTarget is the ratio crash failover's p99 must stay within, to the physical
// limit's p99 of the same run (one scope, 3 nodes).
const CrashTarget = 2.0

// Stat summarises samples.
type Stat struct {
	Name     string    `json:"name"`
	What     string    `json:"what"`
	N        int       `json:"n"`
	MinMS    float64   `json:"min_ms"`
	MedianMS float64   `json:"median_ms"`
	P99MS    float64   `json:"p99_ms"`
	MaxMS    float64   `json:"max_ms"`
	Samples  []float64 `json:"samples_ms"`
	// VsLimit: a failover figure beside the same run's physical limit.
	VsLimit *VsLimit `json:"vs_limit,omitempty"`

	failover bool // a failover figure (not a gap or a detection time)
}

// GateStat is the gate-check micro-benchmark.
type GateStat struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
}

// Load is the idle load on the server.
type Load struct {
	Nodes              int     `json:"nodes"`
	Seconds            float64 `json:"seconds"`
	Transactions       int64   `json:"transactions"`
	PerNodePerInterval float64 `json:"transactions_per_node_per_interval"`
	Note               string  `json:"note"`
}

// Report is the result of a run.
type Report struct {
	Machine map[string]string `json:"machine"`
	Timing  map[string]string `json:"timing"`
	// Mode is the nodes' mode: lock, or lease (through a transaction pooler).
	Mode string `json:"mode"`
	// Skipped names the scenarios asked for that have no meaning in Mode, and why.
	Skipped []string `json:"skipped,omitempty"`
	// Limit is the physical limit of crash failover, measured in this run.
	Limit   *Stat      `json:"limit,omitempty"`
	Stats   []Stat     `json:"stats"`
	Targets []Target   `json:"targets,omitempty"`
	Gate    []GateStat `json:"gate,omitempty"`
	Load    *Load      `json:"load,omitempty"`
}

// Run runs the selected scenarios.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.N < 1 || o.Nodes < 2 {
		return nil, fmt.Errorf("need at least 1 iteration and 2 nodes (got n=%d, nodes=%d)", o.N, o.Nodes)
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := &Report{Machine: machine(ctx, o.DSN), Timing: timing(o.NodeArgs), Mode: cmp.Or(o.Mode, "lock")}
	scenarios := o.Scenarios
	switch o.Mode {
	case "", "lock":
		var why string
		o.nodeDSN, why = cluster.NodeLogin(ctx, o.DSN)
		rep.Timing["node_login"] = cmp.Or(why, cluster.NodeRole+" (a member of the node role, as a service's nodes)")
		if why != "" {
			fmt.Fprintf(o.Progress, "%s: a superuser's doorbell cannot ring, wake-ups come from heartbeats\n", why)
		}
	case "lease":
		b, via, err := pgbouncer.Front(ctx, o.DSN, "transaction", nil)
		if err != nil {
			return rep, fmt.Errorf("lease mode: %w", err)
		}
		defer b.Close()
		o.nodeDSN = via
		rep.Timing["pooler"] = fmt.Sprintf("PgBouncer, transaction pooling, 127.0.0.1:%d", b.Port)
		fmt.Fprintf(o.Progress, "lease mode: every node through PgBouncer (transaction pooling) on 127.0.0.1:%d\n", b.Port)
		scenarios = slices.DeleteFunc(slices.Clone(scenarios), func(sc string) bool {
			if why, skip := leaseSkipped[sc]; skip {
				rep.Skipped = append(rep.Skipped, sc+": "+why)
				return true
			}
			return false
		})
	default:
		return rep, fmt.Errorf("mode %q: want lock or lease", o.Mode)
	}
	defer rep.compareWithLimit(o.Nodes)
	defer rep.leaseTargets(o)
	if !slices.Contains(scenarios, "limit") && slices.ContainsFunc(scenarios, isFault) {
		scenarios = append([]string{"limit"}, scenarios...)
	}
	// With crash, the limit is sampled between its iterations instead.
	var probe *limitProbe
	if slices.Contains(scenarios, "limit") && slices.Contains(scenarios, "crash") {
		var err error
		if probe, err = newLimitProbe(ctx, o.Bin, o.DSN, o.Timeout); err != nil {
			return rep, fmt.Errorf("limit: %w", err)
		}
		defer probe.close()
	}
	for _, sc := range scenarios {
		var err error
		switch sc {
		case "limit":
			if probe == nil {
				err = o.limit(ctx, rep)
			}
		case "crash":
			err = o.faults(ctx, rep, "crash", probe)
		case "graceful":
			err = o.faults(ctx, rep, "graceful", nil)
		case "frozen":
			err = o.faults(ctx, rep, "frozen", nil)
		case "terminate":
			err = o.faults(ctx, rep, "terminate", nil)
		case "handover":
			err = o.faults(ctx, rep, "handover", nil)
		case "priority":
			err = o.faults(ctx, rep, "priority", nil)
		case "gate":
			rep.Gate, err = gateBench(ctx, o.DSN)
		case "load":
			rep.Load, err = o.load(ctx)
		default:
			err = fmt.Errorf("unknown scenario %q (choose from %s)", sc, strings.Join(AllScenarios, ", "))
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", sc, err)
		}
	}
	return rep, nil
}

func (o Options) cluster(scope string) *cluster.Cluster {
	dsn, args := cmp.Or(o.nodeDSN, o.DSN), append([]string{"--log-level", "warn"}, o.NodeArgs...)
	if o.Mode == "lease" {
		args = append(args, "--mode", "lease")
	}
	return cluster.New(cluster.Options{Bin: o.nodeBin(), DSN: dsn, Dir: o.Dir, Scopes: []string{scope}, NodeArgs: args})
}

// nodeBin is the binary the nodes run: NodeBin, else Bin.
func (o Options) nodeBin() string { return cmp.Or(o.NodeBin, o.Bin) }

func isFault(scenario string) bool { return slices.Contains(faultScenarios, scenario) }

// limit takes N physical-limit samples beside an idle cluster of the same size
// (a leader and waiting followers on a scope of their own), so the machine carries
// the load it carries during the faults.
func (o Options) limit(ctx context.Context, rep *Report) error {
	scope := "bench-limit-" + time.Now().Format("150405.000")
	c := o.cluster(scope)
	defer c.Close()
	for i := range o.Nodes {
		if _, err := c.Start(fmt.Sprintf("limit-%d", i+1)); err != nil {
			return err
		}
	}
	if _, _, err := o.steady(ctx, c, scope); err != nil {
		return err
	}
	xs, err := limitSamples(ctx, o.Bin, o.DSN, o.N, o.Timeout, o.Progress)
	if err != nil {
		return err
	}
	rep.setLimit(xs)
	return nil
}

func (r *Report) setLimit(samples []float64) {
	s := summarize(limitStatName, limitWhat+" (same server, this run)", samples)
	r.Limit = &s
}

// compareWithLimit sets every failover figure beside the limit and checks the
// crash target.
func (r *Report) compareWithLimit(nodes int) {
	if r.Limit == nil {
		return
	}
	for i, s := range r.Stats {
		if s.failover {
			r.Stats[i].VsLimit = vsLimit(s, r.Limit)
		}
	}
	if r.Mode == "lease" {
		return // the lease-mode bound is the lease (leaseTargets), not the lock's limit
	}
	for _, s := range r.Stats {
		if (s.Name != crashStatName && s.Name != priorityStatName) || s.VsLimit == nil {
			continue
		}
		t := Target{Name: fmt.Sprintf("%s p99 ≤ %g× limit p99", s.Name, CrashTarget), Stat: s.Name,
			Ratio: s.VsLimit.P99Ratio, Max: CrashTarget, Met: s.VsLimit.P99Ratio <= CrashTarget}
		t.Verdict = verdict(t.Met)
		if nodes != 3 {
			t.Note = fmt.Sprintf("the target is stated for 3 nodes; this run had %d", nodes)
		}
		r.Targets = append(r.Targets, t)
	}
}

const crashStatName = "crash failover"

// freedStatName names the first part of a split crash figure (Options.Split).
const freedStatName = "crash: leader's locks freed"

// leaseTargets checks a lease-mode run against its bounds, which follow from the
// timing rather than from the lock's physical limit: a crashed holder is
// replaced within the lease plus one heartbeat interval (p99), a frozen one's
// gate closed at least lease − trust window before its successor's opened
// (every time), and an idle cluster commits one transaction per node per
// interval (a follower's heartbeat; the leader's, which renews its lease).
func (r *Report) leaseTargets(o Options) {
	if r.Mode != "lease" {
		return
	}
	cfg := nodeConfig(o.NodeArgs)
	L, I, W := cfg.SessionLease, cfg.HeartbeatInterval, cfg.TrustWindow
	for _, s := range r.Stats {
		switch s.Name {
		case crashStatName, priorityStatName:
			bound := ms(int64(L + I))
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("%s p99 ≤ lease + interval (%v)", s.Name, L+I), Stat: s.Name,
				Value: s.P99MS, Unit: "ms", Max: bound, Met: s.P99MS <= bound, Verdict: verdict(s.P99MS <= bound)})
		case frozenGapName:
			floor := ms(int64(L - W))
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("frozen: old gate closed ≥ lease − trust window (%v) before the new opened, every time", L-W),
				Stat: s.Name, Value: s.MinMS, Unit: "ms (min)", Min: floor, Met: s.MinMS >= floor, Verdict: verdict(s.MinMS >= floor)})
		}
	}
	if l := r.Load; l != nil {
		bound := float64(l.Nodes+1) / float64(l.Nodes) // 2 for the leader, 1 per follower
		r.Targets = append(r.Targets, Target{Name: "idle load ≤ 2 per leader and 1 per follower per interval", Stat: "load",
			Value: l.PerNodePerInterval, Unit: "tx per node per interval", Max: bound, Met: l.PerNodePerInterval <= bound,
			Verdict: verdict(l.PerNodePerInterval <= bound)})
	}
}

// faults runs N iterations of one fault against a fresh cluster on its own scope.
// With a probe, one physical-limit sample is taken before each iteration, once the
// cluster has settled.
func (o Options) faults(ctx context.Context, rep *Report, kind string, probe *limitProbe) error {
	scope := "bench-" + kind + "-" + time.Now().Format("150405.000")
	c := o.cluster(scope)
	defer c.Close()
	ids := make([]string, o.Nodes)
	// priority: node 1 has the highest priority, node n the lowest.
	prio := map[string]int{}
	start := func(id string) error {
		var extra []string
		if kind == "priority" {
			extra = []string{"--priority", fmt.Sprint(prio[id])}
		}
		_, err := c.Start(id, extra...)
		return err
	}
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", kind, i+1)
		prio[ids[i]] = o.Nodes - i
		if err := start(ids[i]); err != nil {
			return err
		}
	}
	var main, gap, detect, limit, guarded, freed, election []float64
	var beacon *lockWaiter
	var guardedProbe *limitProbe // the limit again, its holder with an idle second session
	var split crashSplit
	var splitConn *pgx.Conn // reads the leader's backends and the claim's server times
	if kind == "crash" && o.Split {
		var err error
		if beacon, err = newLockWaiter(ctx, o.DSN, "pgleader bench beacon", true, randomKey()); err != nil {
			return err
		}
		defer beacon.close()
		if splitConn, err = connectAs(ctx, o.DSN, "pgleader bench split"); err != nil {
			return err
		}
		defer splitConn.Close(context.Background())
		if probe != nil {
			if guardedProbe, err = newLimitProbe(ctx, o.Bin, o.DSN, o.Timeout); err != nil {
				return err
			}
			guardedProbe.idle = 1
			defer guardedProbe.close()
		}
	}
	wins, previous := 0, "" // priority: kills the highest live candidate won; handover: the last to hand over
	if probe != nil {
		defer func() { rep.setLimit(limit) }()
	}
	var admin *pgx.Conn
	if kind == "terminate" {
		var err error
		if admin, err = pgx.Connect(ctx, o.DSN); err != nil {
			return err
		}
		defer admin.Close(context.Background())
	}
	for i := range o.N {
		leader, epoch, err := o.steady(ctx, c, scope)
		if err != nil {
			return fmt.Errorf("iteration %d: %w", i+1, err)
		}
		for _, ref := range []struct {
			p    *limitProbe
			into *[]float64
			what string
		}{{probe, &limit, ""}, {guardedProbe, &guarded, ", holder with an idle 2nd session"}} {
			if ref.p == nil {
				continue
			}
			x, err := ref.p.sample(ctx)
			if err != nil {
				return fmt.Errorf("iteration %d: limit sample%s: %w", i+1, ref.what, err)
			}
			*ref.into = append(*ref.into, x)
			fmt.Fprintf(o.Progress, "limit %d/%d%s: holder killed → follower granted after %.2f ms\n", i+1, o.N, ref.what, x)
		}
		n := c.Node(leader)
		var t0 int64
		target := ""
		switch kind {
		case "handover", "priority":
			for _, m := range c.Running() {
				switch {
				case m.ID == leader || m.ID == previous: // previous: it handed over and cools down
				case kind == "handover" && target == "":
					target = m.ID
				case kind == "priority" && (target == "" || prio[m.ID] > prio[target]):
					target = m.ID
				}
			}
		}
		var granted <-chan grant
		if beacon != nil {
			if granted, err = beacon.waitBeacon(ctx, leader); err != nil {
				return fmt.Errorf("iteration %d: %w", i+1, err)
			}
		}
		var exits *exitWatch
		var mark killMark
		if splitConn != nil {
			backends, err := leaderBackends(ctx, splitConn, leader)
			if err != nil {
				return fmt.Errorf("iteration %d: the leader's backends: %w", i+1, err)
			}
			backends["process"] = n.PID()
			exits = watchExits(backends)
			mark = markNow()
		}
		strike := fault.Target{Node: n, Scope: scope, Bin: o.nodeBin(), DSN: o.DSN, To: target}
		if admin != nil {
			strike.Admin = admin
		}
		if t0, err = scenarioFaults[kind].Apply(ctx, strike); err != nil {
			return err
		}
		next, err := o.waitFor(ctx, c, func(r eventlog.Record) bool {
			return r.Scope == scope && r.Event == "gate_open" && r.Epoch > epoch
		})
		if err != nil {
			return fmt.Errorf("iteration %d: no takeover: %w", i+1, err)
		}
		main = append(main, ms(next.MonoNS-t0))
		line := fmt.Sprintf("%s %d/%d: %s → %s gate open after %.2f ms", kind, i+1, o.N, leader, next.Node, ms(next.MonoNS-t0))
		if granted != nil {
			g := <-granted
			if g.err != nil {
				return fmt.Errorf("iteration %d: the waiter on the leader's beacon: %w", i+1, g.err)
			}
			if err := beacon.release(ctx); err != nil {
				return err
			}
			freed, election = append(freed, ms(g.at-t0)), append(election, ms(next.MonoNS-g.at))
			line += fmt.Sprintf(" (locks freed after %.2f ms, gate %.2f ms later)", ms(g.at-t0), ms(next.MonoNS-g.at))
		}
		if exits != nil {
			var parts []string
			at := exits.wait(3 * time.Second)
			for _, p := range splitParts {
				if a, ok := at[p[0]]; ok {
					split.add(p[0], ms(a-t0))
					parts = append(parts, fmt.Sprintf("%s %.2f", p[0], ms(a-t0)))
				}
			}
			started, decided, err := claimTimes(ctx, splitConn, scope, next.Epoch)
			if err != nil {
				return fmt.Errorf("iteration %d: %w", i+1, err)
			}
			if !started.IsZero() {
				split.add("claim", mark.since(started, t0))
				parts = append(parts, fmt.Sprintf("claim %.2f", mark.since(started, t0)))
			}
			split.add("decided", mark.since(decided, t0))
			parts = append(parts, fmt.Sprintf("decided %.2f", mark.since(decided, t0)))
			line += " [" + strings.Join(parts, ", ") + " ms]"
		}
		switch kind {
		case "priority":
			if next.Node == target {
				wins++
			} else {
				line += fmt.Sprintf(" (NOT the highest-priority live candidate %s)", target)
			}
		case "handover":
			if next.Node != target {
				return fmt.Errorf("iteration %d: handover to %s, but %s leads", i+1, target, next.Node)
			}
			previous = leader
			fallthrough
		case "graceful":
			if kind == "graceful" {
				if err := n.Wait(o.Timeout); err != nil {
					return err
				}
			}
			if closed, ok := last(c.Events(), func(r eventlog.Record) bool {
				return r.Node == leader && r.Scope == scope && r.Event == "gate_closed" && r.Epoch == epoch
			}); ok {
				gap = append(gap, ms(next.MonoNS-closed.MonoNS))
				line += fmt.Sprintf(" (gap %.2f ms)", ms(next.MonoNS-closed.MonoNS))
			}
		case "frozen":
			trust, ok := last(c.Events(), func(r eventlog.Record) bool {
				return r.Node == leader && r.Scope == scope && r.TrustUntilMonoNS > 0 && r.MonoNS < t0
			})
			if ok {
				gap = append(gap, ms(next.MonoNS-trust.TrustUntilMonoNS))
				line += fmt.Sprintf(" (old gate closed %.0f ms before)", ms(next.MonoNS-trust.TrustUntilMonoNS))
			}
			_, _ = fault.Freeze.Undo(ctx, fault.Target{Node: n})
			if _, err := n.Kill(); err != nil {
				return err
			}
		case "terminate":
			closed, err := o.find(ctx, c, func(r eventlog.Record) bool {
				return r.Node == leader && r.Scope == scope && r.Event == "gate_closed" && r.Epoch == epoch
			})
			if err != nil {
				return fmt.Errorf("iteration %d: old leader never closed its gate: %w", i+1, err)
			}
			detect = append(detect, ms(closed.MonoNS-t0))
			gap = append(gap, ms(next.MonoNS-closed.MonoNS))
			line += fmt.Sprintf(" (old gate closed after %.2f ms, %.2f ms before the new opened)", ms(closed.MonoNS-t0), ms(next.MonoNS-closed.MonoNS))
		}
		fmt.Fprintln(o.Progress, line)
		if kind == "terminate" || kind == "handover" {
			continue // the old process lives on and campaigns again by itself
		}
		if err := start(leader); err != nil { // back to n candidates
			return err
		}
		if kind == "priority" {
			// The restarted node must campaign before the next kill, or the
			// next highest-priority candidate would not be the one expected.
			if err := o.registered(ctx, leader, c.Node(leader).PID()); err != nil {
				return err
			}
		}
	}
	names := map[string][2]string{
		"handover":  {"targeted handover", "`pgleader handover --to` started → the target's gate open"},
		"priority":  {priorityStatName, "kill -9 of the leader → the highest-priority follower's gate open"},
		"crash":     {crashStatName, "kill -9 of the leader → a follower's gate open"},
		"graceful":  {"graceful handover", "SIGTERM of the leader (drain, release) → a follower's gate open"},
		"frozen":    {"frozen-leader failover", "SIGSTOP of the leader → a follower's gate open"},
		"terminate": {"terminated-session failover", "pg_terminate_backend of the leader's session → a follower's gate open"},
	}
	if guardedProbe != nil {
		g := summarize(guardedStatName, guardedWhat+" (same server, this run)", guarded)
		g.failover = true // beside the limit, as a ratio
		rep.Stats = append(rep.Stats, g)
	}
	figure := summarize(names[kind][0], names[kind][1], main)
	figure.failover = true
	rep.Stats = append(rep.Stats, figure)
	if beacon != nil {
		f := summarize(freedStatName, "kill -9 of the leader → a bare waiter on its leadership session's beacon granted", freed)
		f.failover = true
		rep.Stats = append(rep.Stats, f,
			summarize("election after the locks freed", "that waiter granted → the successor's gate open (watcher woken, claim, gate)", election))
		rep.Stats = append(rep.Stats, split.stats()...)
	}
	switch kind {
	case "handover":
		rep.Stats = append(rep.Stats, summarize("handover gap", "old gate closed → the target's gate open (must be ≥ 0: no overlap)", gap))
		name, bound := fmt.Sprintf("handover p99 ≤ %v", HandoverTarget), HandoverTarget
		if o.Mode == "lease" {
			// No notifications through a pooler: the leader reads the request at
			// its next heartbeat, the target the release at its own.
			cfg := nodeConfig(o.NodeArgs)
			bound = 2*cfg.HeartbeatInterval + cfg.HeartbeatTimeout
			name = fmt.Sprintf("handover p99 ≤ two intervals + timeout (%v; lease mode polls)", bound)
		}
		met := figure.P99MS <= ms(int64(bound))
		rep.Targets = append(rep.Targets, Target{Name: name, Stat: figure.Name,
			Value: figure.P99MS, Unit: "ms", Max: ms(int64(bound)), Met: met, Verdict: verdict(met)})
	case "priority":
		rep.Targets = append(rep.Targets, Target{Name: "the highest-priority live candidate wins every kill", Stat: figure.Name,
			Value: float64(wins), Unit: fmt.Sprintf("wins of %d", o.N), Max: float64(o.N), Met: wins == o.N, Verdict: verdict(wins == o.N)})
	case "graceful":
		rep.Stats = append(rep.Stats, summarize("graceful gap", "old gate closed → new gate open", gap))
	case "frozen":
		rep.Stats = append(rep.Stats, summarize(frozenGapName, "old trust_until → new gate open (must be > 0: no overlap)", gap))
	case "terminate":
		rep.Stats = append(rep.Stats,
			summarize("terminate detection", "pg_terminate_backend → the old leader's gate closed", detect),
			summarize("terminate gate gap", "old gate closed → new gate open (must be > 0: no overlap)", gap))
	}
	return nil
}

// steady waits until one node leads and every other running node follows it, and
// returns the leader and its epoch.
func (o Options) steady(ctx context.Context, c *cluster.Cluster, scope string) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for {
		if _, err := c.Poll(); err != nil {
			return "", 0, err
		}
		leader, epoch := c.Leader(scope)
		var lagging []string
		if leader != "" {
			events := c.Events()
			for _, n := range c.Running() {
				if n.ID == leader {
					continue
				}
				if _, ok := last(events, func(r eventlog.Record) bool {
					return r.Node == n.ID && r.Scope == scope && r.Event == "leader_observed" && r.Epoch == epoch
				}); !ok {
					lagging = append(lagging, n.ID)
				}
			}
			if len(lagging) == 0 {
				return leader, epoch, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", 0, fmt.Errorf("cluster did not settle (leader %q epoch %d, not following yet: %v): %w", leader, epoch, lagging, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// registered waits until node's current process (pid) has registered and its
// watch session waits on its ring peer's beacon: it campaigns, and a death of
// the peer wakes it. (In a node's first milliseconds its watch is not armed yet,
// and a peer that dies then is noticed at the next heartbeat, up to an interval
// later: a real start-up window, but not the steady state this scenario
// measures.)
func (o Options) registered(ctx context.Context, node string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// Lock mode: its watch session waits on its peer's beacon. Lease mode has no
	// watch: it has heartbeated since it registered.
	q := `SELECT EXISTS (SELECT 1 FROM pgleader.nodes WHERE node_id = $1
	        AND os_pid = $2 AND stopped_at IS NULL)
	    AND EXISTS (SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
	                 WHERE a.application_name = 'pgleader watch ' || $1 AND l.locktype = 'advisory' AND NOT l.granted)`
	if o.Mode == "lease" {
		q = `SELECT EXISTS (SELECT 1 FROM pgleader.nodes WHERE node_id = $1
		        AND os_pid = $2 AND stopped_at IS NULL AND mode = 'lease' AND last_seen > started_at)`
	}
	for {
		var ok bool
		if err := conn.QueryRow(ctx, q, node, pid).Scan(&ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not register: %w", node, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (o Options) waitFor(ctx context.Context, c *cluster.Cluster, match func(eventlog.Record) bool) (eventlog.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	return c.WaitFor(ctx, match)
}

// find returns the last record read so far that matches, or waits for one.
func (o Options) find(ctx context.Context, c *cluster.Cluster, match func(eventlog.Record) bool) (eventlog.Record, error) {
	if r, ok := last(c.Events(), match); ok {
		return r, nil
	}
	return o.waitFor(ctx, c, match)
}

func last(rs []eventlog.Record, match func(eventlog.Record) bool) (eventlog.Record, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if match(rs[i]) {
			return rs[i], true
		}
	}
	return eventlog.Record{}, false
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// summarize computes min, median, p99 (nearest rank) and max.
func summarize(name, what string, xs []float64) Stat {
	s := Stat{Name: name, What: what, N: len(xs), Samples: xs}
	if len(xs) == 0 {
		return s
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(sorted)))) - 1
		return sorted[max(0, min(i, len(sorted)-1))]
	}
	s.MinMS, s.MedianMS, s.P99MS, s.MaxMS = sorted[0], rank(0.5), rank(0.99), sorted[len(sorted)-1]
	return s
}

// gateBench runs an in-process elector until it leads, then measures the gate.
func gateBench(ctx context.Context, dsn string) ([]GateStat, error) {
	e, err := election.New(election.Config{DSN: dsn, NodeID: fmt.Sprintf("bench-gate-%d", os.Getpid()),
		Scopes: []string{"bench-gate"}, Logger: discard()})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { cancel(); <-done }()
	s := e.Scope("bench-gate")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.Require(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("in-process elector did not lead bench-gate within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	tok, _ := s.Require(ctx)
	var out []GateStat
	for _, b := range []struct {
		name string
		op   func() bool
	}{
		{"Scope.Require", func() bool { _, err := s.Require(ctx); return err == nil }},
		{"Token.Valid", tok.Valid},
	} {
		st, err := measureOp(b.op)
		if err != nil {
			return out, fmt.Errorf("%s: %w (leadership lost while measuring?)", b.name, err)
		}
		st.Name = b.name
		out = append(out, st)
	}
	return out, nil
}

// measureOp times op in a loop (doubling the count until a run lasts 200 ms) and
// counts its heap allocations: the gate check's cost, without linking the testing
// package into the binary. op returning false stops the measurement.
func measureOp(op func() bool) (GateStat, error) {
	var ms0, ms1 runtime.MemStats
	for n := 1024; ; n *= 2 {
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		for range n {
			if !op() {
				return GateStat{}, errors.New("the gate closed")
			}
		}
		took := time.Since(start)
		runtime.ReadMemStats(&ms1)
		if took >= 200*time.Millisecond || n >= 1<<30 {
			return GateStat{NsPerOp: float64(took.Nanoseconds()) / float64(n),
				AllocsPerOp: int64(ms1.Mallocs-ms0.Mallocs) / int64(n)}, nil
		}
	}
}

// peerWaitSlice is the engine's bound on one watch wait (election's
// peerWaitSlice): each slice commits one transaction.
const peerWaitSlice = 2 * time.Second

// load counts the transactions an idle cluster commits per node per heartbeat
// interval.
func (o Options) load(ctx context.Context) (*Load, error) {
	scope := "bench-load"
	c := o.cluster(scope)
	defer c.Close()
	for i := range o.Nodes {
		if _, err := c.Start(fmt.Sprintf("load-%d", i+1)); err != nil {
			return nil, err
		}
	}
	if _, _, err := o.steady(ctx, c, scope); err != nil {
		return nil, err
	}
	l, err := idleLoad(ctx, o.DSN, o.Nodes, heartbeatInterval(o.NodeArgs), 10*time.Second, o.Progress)
	if err != nil {
		return nil, err
	}
	// A statement log of three idle nodes over 20 s (2026-11-29): 120 heartbeats,
	// 30 watch calls and 48 guard pings (empty queries), xact_commit +151: the
	// pings do not show.
	iv := heartbeatInterval(o.NodeArgs)
	l.Note = fmt.Sprintf("transactions committed by the cluster: each node's heartbeat (1) and its watch session's wait slices (one per %v: %.2f); %.2f expected for %d nodes. The leader's guard pings are empty queries, which do not show here",
		peerWaitSlice, iv.Seconds()/peerWaitSlice.Seconds(), 1+iv.Seconds()/peerWaitSlice.Seconds(), o.Nodes)
	if o.Mode == "lease" {
		l.Note = fmt.Sprintf("transactions committed by the cluster through the pooler: each node's heartbeat (the leader's renews its lease, a follower's reads the leases it watches); no guard, no LISTEN: 1.00 expected for %d nodes", o.Nodes)
	}
	return l, nil
}

// idleLoad counts the transactions the database commits over window
// (pg_stat_database.xact_commit) while nodes idle, and divides them per node and
// per heartbeat interval. The caller has let the nodes settle.
func idleLoad(ctx context.Context, dsn string, nodes int, interval, window time.Duration, progress io.Writer) (*Load, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	read := func() (int64, error) {
		var n int64
		// Flush this backend's own counters first so they do not blur the window.
		_, _ = conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
		return n, err
	}
	// Let the start-up's counts reach the statistics first: a backend that goes
	// idle with counts pending flushes them up to 10 s later (PGSTAT_IDLE_INTERVAL),
	// and the claims and checks of the start would land in the window. A window
	// shorter than that (a test's) measures roughly anyway: it waits 2 s.
	settle := 11 * time.Second
	if window < 10*time.Second {
		settle = 2 * time.Second
	}
	time.Sleep(settle)
	a, err := read()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "load: measuring %v with %d idle nodes\n", window, nodes)
	time.Sleep(window)
	// Backends flush their counters at most once a second: wait for the tail.
	const tail = 1500 * time.Millisecond
	time.Sleep(tail)
	b, err := read()
	if err != nil {
		return nil, err
	}
	intervals := (window + tail).Seconds() / interval.Seconds()
	tx := b - a - 2 // our own two reads
	return &Load{Nodes: nodes, Seconds: (window + tail).Seconds(), Transactions: tx,
		PerNodePerInterval: float64(tx) / float64(nodes) / intervals}, nil
}

// nodeConfig is the engine's default configuration with the timing flags of
// nodeArgs applied (what the nodes run with).
func nodeConfig(nodeArgs []string) election.Config {
	cfg := election.DefaultConfig()
	flags := map[string]*time.Duration{"heartbeat-interval": &cfg.HeartbeatInterval,
		"heartbeat-timeout": &cfg.HeartbeatTimeout, "trust-window": &cfg.TrustWindow, "session-lease": &cfg.SessionLease}
	for i, a := range nodeArgs {
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		d, ok := flags[name]
		if !ok || !strings.HasPrefix(a, "-") {
			continue
		}
		if !inline {
			if i+1 >= len(nodeArgs) {
				continue
			}
			val = nodeArgs[i+1]
		}
		if v, err := time.ParseDuration(val); err == nil {
			*d = v
		}
	}
	return cfg
}

func heartbeatInterval(nodeArgs []string) time.Duration {
	return nodeConfig(nodeArgs).HeartbeatInterval
}

// timing is the report's timing block.
func timing(nodeArgs []string) map[string]string {
	cfg := nodeConfig(nodeArgs)
	return map[string]string{
		"heartbeat_interval": cfg.HeartbeatInterval.String(), "heartbeat_timeout": cfg.HeartbeatTimeout.String(),
		"trust_window": cfg.TrustWindow.String(), "session_lease": cfg.SessionLease.String(),
		"node_args": strings.Join(nodeArgs, " "),
	}
}

func machine(ctx context.Context, dsn string) map[string]string {
	m := map[string]string{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		var v string
		if conn.QueryRow(ctx, "SHOW server_version").Scan(&v) == nil {
			m["postgresql"] = v
		}
		conn.Close(ctx)
	}
	return m
}
