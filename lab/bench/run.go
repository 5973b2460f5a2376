package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/child"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
)

// RunOptions configure RunSupervised.
type RunOptions struct {
	Bin      string // pgleader binary
	DSN      string // a migrated database
	Dir      string // scratch directory
	N        int    // samples per figure
	NodeArgs []string
	Progress io.Writer
	Timeout  time.Duration // per sample
}

// RunReport holds the figures of `pgleader bench run`, each beside its same-run
// reference.
type RunReport struct {
	// NodeFailover: kill -9 of the leading `pgleader node` → the successor's gate
	// open (the reference), sampled alternately with RunFailover.
	NodeFailover Stat `json:"node_failover"`
	// RunFailover: kill -9 of the leading `pgleader run` → the successor's child
	// started (exec'd); RunGate is the part up to the successor's gate open.
	RunFailover Stat `json:"run_failover"`
	RunGate     Stat `json:"run_gate"`
	// Exec: fork, exec and wait of /bin/true from this process: the physical
	// cost of starting a trivial child.
	Exec Stat `json:"exec"`
	// GateToGone: the leader's leadership session terminated: its gate_closed →
	// the child reaped by the guard, its group killed (child_exited's
	// reaped_mono_ns).
	GateToGone Stat `json:"gate_to_gone"`
	// Orphans: children of a killed supervisor found alive 1 s after the kill
	// (must be 0).
	Orphans int `json:"orphans"`
	// Target: p99(RunFailover) ≤ 2×p99(NodeFailover) + p99(Exec), and
	// p99(GateToGone) ≤ 50 ms.
	TargetFailoverMS float64 `json:"target_failover_ms"`
	FailoverMet      bool    `json:"failover_met"`
	GateToGoneMet    bool    `json:"gate_to_gone_met"`
}

// RunSupervised measures pgleader run against pgleader node in the same run.
func RunSupervised(ctx context.Context, o RunOptions) (*RunReport, error) {
	if o.N < 1 {
		o.N = 10
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	progress := func(f string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, f+"\n", a...)
		}
	}
	reg := Options{DSN: o.DSN, Timeout: o.Timeout}
	var nodeF, runF, runGate, gone []float64
	rep := &RunReport{}
	for i := range o.N {
		for _, supervised := range []bool{false, true} {
			scope := fmt.Sprintf("bench-run-%d-%t-%d", i, supervised, time.Now().UnixNano())
			opts := cluster.Options{Bin: o.Bin, DSN: o.DSN, Dir: o.Dir, Scopes: []string{scope}, NodeArgs: o.NodeArgs}
			if supervised {
				opts.Supervise = []string{"/bin/sleep", "1000"}
			}
			c := cluster.New(opts)
			sample, gateMS, orphan, err := crashSample(ctx, c, reg, scope, supervised)
			c.Close()
			if err != nil {
				return nil, fmt.Errorf("sample %d (supervised %t): %w", i, supervised, err)
			}
			if supervised {
				runF, runGate = append(runF, sample), append(runGate, gateMS)
				if orphan {
					rep.Orphans++
				}
			} else {
				nodeF = append(nodeF, sample)
			}
			progress("crash %d %s: %.2f ms", i, map[bool]string{false: "node", true: "run (child started)"}[supervised], sample)
		}
		g, err := gateSample(ctx, o, reg, i)
		if err != nil {
			return nil, fmt.Errorf("gate sample %d: %w", i, err)
		}
		gone = append(gone, g)
		progress("gate closed → group gone %d: %.2f ms", i, g)
	}
	var execs []float64
	for range max(o.N, 20) {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return nil, err
		}
		execs = append(execs, float64(time.Since(t0).Microseconds())/1000)
	}
	rep.NodeFailover = summarize("node crash failover", "kill -9 of the leading pgleader node → the successor's gate open", nodeF)
	rep.RunFailover = summarize("run crash failover", "kill -9 of the leading pgleader run → the successor's child started", runF)
	rep.RunGate = summarize("run crash failover (gate)", "kill -9 of the leading pgleader run → the successor's gate open", runGate)
	rep.Exec = summarize("exec of /bin/true", "fork + exec + wait of a trivial child from this process", execs)
	rep.GateToGone = summarize("gate closed → group gone", "leadership session terminated: gate_closed → the child's group reaped", gone)
	rep.TargetFailoverMS = 2*rep.NodeFailover.P99MS + rep.Exec.P99MS
	rep.FailoverMet = rep.RunFailover.P99MS <= rep.TargetFailoverMS
	rep.GateToGoneMet = rep.GateToGone.P99MS <= 50
	return rep, nil
}

// crashSample starts two candidates, kills the leader and returns kill → the
// successor's gate open (node) or child started (run), the gate part, and
// whether the killed supervisor's child outlived it by a second.
func crashSample(ctx context.Context, c *cluster.Cluster, reg Options, scope string, supervised bool) (float64, float64, bool, error) {
	_, err := c.Start("a")
	if err != nil {
		return 0, 0, false, err
	}
	opened := func(node string) func(eventlog.Record) bool {
		return func(r eventlog.Record) bool { return r.Node == node && r.Scope == scope && r.Event == "gate_open" }
	}
	started := func(node string) func(eventlog.Record) bool {
		return func(r eventlog.Record) bool { return r.Node == node && r.Scope == scope && r.Event == "child_started" }
	}
	if _, err := reg.find(ctx, c, opened("a")); err != nil {
		return 0, 0, false, err
	}
	var childPID int
	if supervised {
		r, err := reg.find(ctx, c, started("a"))
		if err != nil {
			return 0, 0, false, err
		}
		childPID = r.PID
	}
	b, err := c.Start("b")
	if err != nil {
		return 0, 0, false, err
	}
	if err := reg.registered(ctx, "b", b.PID()); err != nil {
		return 0, 0, false, err
	}
	if _, err := reg.find(ctx, c, func(r eventlog.Record) bool {
		return r.Node == "b" && r.Scope == scope && r.Event == "leader_observed"
	}); err != nil {
		return 0, 0, false, err
	}
	killed, err := fault.Kill9.Apply(ctx, fault.Target{Node: c.Node("a")})
	if err != nil {
		return 0, 0, false, err
	}
	gate, err := reg.find(ctx, c, opened("b"))
	if err != nil {
		return 0, 0, false, err
	}
	if !supervised {
		return ms(gate.MonoNS - killed), ms(gate.MonoNS - killed), false, nil
	}
	succ, err := reg.find(ctx, c, started("b"))
	if err != nil {
		return 0, 0, false, err
	}
	orphan := false
	if childPID > 0 {
		deadline := time.Now().Add(time.Second)
		for child.Alive(childPID) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		orphan = child.Alive(childPID)
	}
	return ms(succ.MonoNS - killed), ms(gate.MonoNS - killed), orphan, nil
}

// gateSample terminates the leadership session of a supervising leader and
// returns its gate_closed → the child reaped by the guard (its group gone).
func gateSample(ctx context.Context, o RunOptions, reg Options, i int) (float64, error) {
	scope := fmt.Sprintf("bench-gate-%d-%d", i, time.Now().UnixNano())
	c := cluster.New(cluster.Options{Bin: o.Bin, DSN: o.DSN, Dir: o.Dir, Scopes: []string{scope}, NodeArgs: o.NodeArgs,
		Supervise: []string{"/bin/sh", "-c", "trap '' TERM; sleep 1000 & wait"}})
	defer c.Close()
	node := fmt.Sprintf("g%d", i)
	if _, err := c.Start(node); err != nil {
		return 0, err
	}
	st, err := reg.find(ctx, c, func(r eventlog.Record) bool { return r.Scope == scope && r.Event == "child_started" })
	if err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	if _, err := fault.Terminate.Apply(ctx, fault.Target{Admin: conn, Scope: scope}); err != nil {
		return 0, err
	}
	closed, err := reg.find(ctx, c, func(r eventlog.Record) bool {
		return r.Scope == scope && r.Event == "gate_closed" && r.Epoch == st.Epoch
	})
	if err != nil {
		return 0, err
	}
	exited, err := reg.find(ctx, c, func(r eventlog.Record) bool {
		return r.Scope == scope && r.Event == "child_exited" && r.Epoch == st.Epoch
	})
	if err != nil {
		return 0, err
	}
	if child.Alive(st.PID) {
		return 0, fmt.Errorf("child %d still alive after child_exited", st.PID)
	}
	if exited.ReapedMonoNS == 0 {
		return 0, fmt.Errorf("child_exited of %d carries no reaped_mono_ns", st.PID)
	}
	return ms(exited.ReapedMonoNS - closed.MonoNS), nil
}
