package exporter_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// value returns the value of the sample of name whose labels include the given
// name/value pairs: a gauge's or counter's value, a histogram's sample count. ok
// is false when there is no such sample.
func value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(p *dto.LabelPair) bool {
					return p.GetName() == labels[i] && p.GetValue() == labels[i+1]
				}) {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// want fails the test unless the sample exists with value v.
func want(t testing.TB, g prometheus.Gatherer, v float64, name string, labels ...string) {
	t.Helper()
	got, ok := value(t, g, name, labels...)
	if !ok {
		t.Errorf("%s%v: no sample, want %v", name, labels, v)
	} else if got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

func TestElectionMetricsObserve(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := exporter.NewElectionMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	mono := int64(time.Hour)
	ev := func(kind election.EventKind, scope string, epoch int64, reason string, latency time.Duration) {
		mono += int64(time.Microsecond)
		m.Observe(election.Event{Kind: kind, Scope: scope, Node: "node-1", Epoch: epoch, MonoNS: mono,
			Time: time.Now(), Reason: reason, Latency: latency})
	}

	t.Run("Term", func(t *testing.T) {
		ev(election.EventAcquired, "billing", 5, "", 0)
		want(t, reg, 1, "pgleader_acquisitions_total", "scope", "billing")
		want(t, reg, 5, "pgleader_epoch", "scope", "billing")
		want(t, reg, 0, "pgleader_is_leader", "scope", "billing") // acquired: gate still closed
		ev(election.EventGateOpen, "billing", 5, "", 0)
		want(t, reg, 1, "pgleader_is_leader", "scope", "billing")
		ev(election.EventGateClosed, "billing", 5, "trust_expired", 0)
		want(t, reg, 0, "pgleader_is_leader", "scope", "billing")
		ev(election.EventGateOpen, "billing", 5, "", 0)
		want(t, reg, 1, "pgleader_is_leader", "scope", "billing")
		ev(election.EventLost, "billing", 5, "heartbeat_timeout", 0)
		want(t, reg, 0, "pgleader_is_leader", "scope", "billing")
		want(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "heartbeat_timeout")
		ev(election.EventObserved, "billing", 6, "", 0)
		want(t, reg, 6, "pgleader_epoch", "scope", "billing")
	})

	t.Run("Reasons", func(t *testing.T) {
		ev(election.EventResigned, "reports", 1, "resigned", 0)
		ev(election.EventResigned, "reports", 2, "shutdown", 0)
		ev(election.EventLost, "reports", 3, "a reason no engine reports today", 0)
		ev(election.EventLost, "reports", 4, "", 0)
		want(t, reg, 1, "pgleader_losses_total", "scope", "reports", "reason", "resigned")
		want(t, reg, 1, "pgleader_losses_total", "scope", "reports", "reason", "shutdown")
		want(t, reg, 2, "pgleader_losses_total", "scope", "reports", "reason", "other")
		for _, r := range []string{"resigned", "shutdown", "lost_connection", "heartbeat_timeout", "evicted", "closed", "crashed"} {
			if got := exporter.LossReason(r); got != r {
				t.Errorf("LossReason(%q) = %q", r, got)
			}
		}
	})

	t.Run("Heartbeats", func(t *testing.T) {
		// One round trip confirming three scopes is one observation.
		for _, s := range []string{"a", "b", "c"} {
			ev(election.EventHeartbeatOK, s, 1, "", 300*time.Microsecond)
		}
		want(t, reg, 1, "pgleader_heartbeat_duration_seconds")
		// The next round trip, even with the very same latency, is another one.
		mono += int64(500 * time.Millisecond)
		for _, s := range []string{"a", "b", "c"} {
			ev(election.EventHeartbeatOK, s, 1, "", 300*time.Microsecond)
		}
		want(t, reg, 2, "pgleader_heartbeat_duration_seconds")
		ev(election.EventHeartbeatOK, "a", 1, "", 310*time.Microsecond)
		want(t, reg, 3, "pgleader_heartbeat_duration_seconds")
		// A failed round trip counts per scope, and once in the histogram.
		mono += int64(500 * time.Millisecond)
		ev(election.EventHeartbeatFailed, "a", 1, "heartbeat took 120ms, timeout is 100ms", 120*time.Millisecond)
		ev(election.EventHeartbeatFailed, "b", 1, "heartbeat took 120ms, timeout is 100ms", 120*time.Millisecond)
		want(t, reg, 4, "pgleader_heartbeat_duration_seconds")
		want(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "a")
		want(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "b")
		// A node that leads nothing reports failures without a scope.
		ev(election.EventHeartbeatFailed, "", 0, "connection reset", time.Millisecond)
		want(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "")
	})

	t.Run("NotAttached", func(t *testing.T) {
		for _, name := range []string{"pgleader_gate_blocked_total", "pgleader_trust_remaining_seconds"} {
			if _, ok := value(t, reg, name); ok {
				t.Errorf("%s present before Attach", name)
			}
		}
	})

	t.Run("Lint", func(t *testing.T) {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
}

func TestElectionMetricsDuplicateRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := exporter.NewElectionMetrics(reg); err != nil {
		t.Fatal(err)
	}
	_, err := exporter.NewElectionMetrics(reg)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("second registration: %v, want an AlreadyRegisteredError", err)
	}
}

// fastConfig is election timing fit for tests: I + T < W < L, L − W ≥ 100ms.
func fastConfig(dsn, node string, obs election.Observer, scopes ...string) election.Config {
	return election.Config{
		DSN: dsn, NodeID: node, Scopes: scopes,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond,
		DrainTimeout: time.Second, ResignCooldown: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Observer: obs,
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestElectionMetricsLive runs a real Elector against PostgreSQL: lead, resign,
// lead again, shut down.
func TestElectionMetricsLive(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	reg := prometheus.NewPedanticRegistry()
	m, err := exporter.NewElectionMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := election.New(fastConfig(dsn, "node-1", m, "billing"))
	if err != nil {
		t.Fatal(err)
	}
	m.Attach(e)
	billing := e.Scope("billing")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of cancel")
		}
	}
	t.Cleanup(stop)

	// Attach created the scope's series; a refusal before Run is counted.
	want(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	want(t, reg, 0, "pgleader_acquisitions_total", "scope", "billing")
	if _, err := billing.Require(ctx); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Require before Run: %v", err)
	}
	want(t, reg, 1, "pgleader_gate_blocked_total", "scope", "billing")
	want(t, reg, 0, "pgleader_trust_remaining_seconds", "scope", "billing")

	go func() { done <- e.Run(ctx) }()

	isLeader := func() bool { v, _ := value(t, reg, "pgleader_is_leader", "scope", "billing"); return v == 1 }
	waitFor(t, "the gate to open", isLeader)
	tok, err := billing.Require(ctx)
	if err != nil {
		t.Fatalf("is_leader is 1 but Require: %v", err)
	}
	want(t, reg, 1, "pgleader_acquisitions_total", "scope", "billing")
	want(t, reg, float64(tok.Epoch), "pgleader_epoch", "scope", "billing")
	want(t, reg, float64(billing.GateBlocked()), "pgleader_gate_blocked_total", "scope", "billing")
	if v, _ := value(t, reg, "pgleader_trust_remaining_seconds", "scope", "billing"); v <= 0 || v > 0.3 {
		t.Errorf("trust remaining %vs while leading, want in (0, 0.3]", v)
	}
	waitFor(t, "a heartbeat", func() bool {
		v, _ := value(t, reg, "pgleader_heartbeat_duration_seconds")
		return v >= 1
	})

	// Resign returns after the release is recorded: the gate closed and the loss
	// counted by then.
	if err := billing.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	want(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	want(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "resigned")
	want(t, reg, 0, "pgleader_trust_remaining_seconds", "scope", "billing")

	// Alone in the election, the node leads again after its cooldown, one epoch on.
	waitFor(t, "the second term", isLeader)
	want(t, reg, 2, "pgleader_acquisitions_total", "scope", "billing")
	want(t, reg, float64(tok.Epoch+1), "pgleader_epoch", "scope", "billing")

	stop()
	want(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	want(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "shutdown")
	want(t, reg, 0, "pgleader_heartbeat_failures_total", "scope", "billing")
}
