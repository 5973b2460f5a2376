package electionprom

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/protocol"
)

// sample returns the value of the sample of name whose labels include the given
// pairs (a histogram's sample count); ok false when there is none.
func sample(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
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

func expect(t testing.TB, g prometheus.Gatherer, v float64, name string, labels ...string) {
	t.Helper()
	got, ok := sample(t, g, name, labels...)
	if !ok {
		t.Errorf("%s%v: no sample, want %v", name, labels, v)
	} else if got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// standalone is an Elector that needs no database; its metrics are fed events by
// hand.
func standalone(t testing.TB, scopes ...string) *election.Elector {
	t.Helper()
	e, err := election.New(election.Config{Mode: election.ModeStandalone, NodeID: "node-1", Scopes: scopes,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestObserve(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := Register(reg, standalone(t, "billing", "reports"))
	if err != nil {
		t.Fatal(err)
	}
	ev := func(kind election.EventKind, scope string, epoch int64, reason election.Reason) {
		m.observe(election.Event{Kind: kind, Scope: scope, Node: "node-1", Epoch: epoch, Time: time.Now(), Reason: reason})
	}

	t.Run("SeriesFromTheStart", func(t *testing.T) {
		expect(t, reg, 0, "pgleader_is_leader", "scope", "reports")
		expect(t, reg, 0, "pgleader_acquisitions_total", "scope", "reports")
		expect(t, reg, 0, "pgleader_heartbeat_failures_total", "scope", "reports")
		expect(t, reg, 0, "pgleader_gate_blocked_total", "scope", "reports")
	})

	t.Run("Term", func(t *testing.T) {
		ev(election.EventAcquired, "billing", 5, "")
		expect(t, reg, 1, "pgleader_acquisitions_total", "scope", "billing")
		expect(t, reg, 5, "pgleader_epoch", "scope", "billing")
		expect(t, reg, 0, "pgleader_is_leader", "scope", "billing") // acquired: gate still closed
		ev(election.EventGateOpen, "billing", 5, "")
		expect(t, reg, 1, "pgleader_is_leader", "scope", "billing")
		ev(election.EventGateClosed, "billing", 5, protocol.ReasonTrustExpired)
		expect(t, reg, 0, "pgleader_is_leader", "scope", "billing")
		ev(election.EventGateOpen, "billing", 5, "")
		ev(election.EventLost, "billing", 5, protocol.ReasonHeartbeatTimeout)
		expect(t, reg, 0, "pgleader_is_leader", "scope", "billing")
		expect(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "heartbeat_timeout")
		ev(election.EventObserved, "billing", 6, "")
		expect(t, reg, 6, "pgleader_epoch", "scope", "billing")
	})

	t.Run("Reasons", func(t *testing.T) {
		ev(election.EventResigned, "reports", 1, protocol.ReasonResigned)
		ev(election.EventResigned, "reports", 2, protocol.ReasonShutdown)
		ev(election.EventResigned, "reports", 3, protocol.ReasonHandedOver)
		ev(election.EventLost, "reports", 4, "a reason no engine reports today")
		ev(election.EventLost, "reports", 5, "")
		expect(t, reg, 1, "pgleader_losses_total", "scope", "reports", "reason", "resigned")
		expect(t, reg, 1, "pgleader_losses_total", "scope", "reports", "reason", "shutdown")
		expect(t, reg, 1, "pgleader_losses_total", "scope", "reports", "reason", "handed_over")
		expect(t, reg, 2, "pgleader_losses_total", "scope", "reports", "reason", "other")
	})

	t.Run("Heartbeats", func(t *testing.T) {
		// One round trip is one event, whatever the number of scopes it confirmed,
		// a follower's (no terms) included; each sets the last-heartbeat time.
		at := time.Unix(1_700_000_000, 0)
		m.observe(election.Event{Kind: election.EventHeartbeatOK, Time: at, Latency: 300 * time.Microsecond,
			Terms: []election.TermRef{{Scope: "billing", Epoch: 5}, {Scope: "reports", Epoch: 5}}})
		expect(t, reg, 1, "pgleader_heartbeat_duration_seconds")
		expect(t, reg, 1_700_000_000, "pgleader_last_heartbeat_timestamp_seconds")
		m.observe(election.Event{Kind: election.EventHeartbeatOK, Time: at.Add(time.Second), Latency: 300 * time.Microsecond})
		expect(t, reg, 2, "pgleader_heartbeat_duration_seconds")
		expect(t, reg, 1_700_000_001, "pgleader_last_heartbeat_timestamp_seconds")
		// A failed round trip counts once in the histogram and once per led scope;
		// a node that led nothing counts it without a scope. The last successful
		// heartbeat's time stays.
		m.observe(election.Event{Kind: election.EventHeartbeatFailed, Time: at.Add(2 * time.Second), Latency: 120 * time.Millisecond,
			Reason: protocol.ReasonHeartbeatTimeout, Err: errors.New("heartbeat took 120ms, timeout is 100ms"),
			Terms: []election.TermRef{{Scope: "billing", Epoch: 5}, {Scope: "reports", Epoch: 5}}})
		m.observe(election.Event{Kind: election.EventHeartbeatFailed, Time: at.Add(3 * time.Second), Latency: time.Millisecond,
			Reason: protocol.ReasonLostConnection})
		expect(t, reg, 4, "pgleader_heartbeat_duration_seconds")
		expect(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "billing")
		expect(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "reports")
		expect(t, reg, 1, "pgleader_heartbeat_failures_total", "scope", "")
		expect(t, reg, 1_700_000_001, "pgleader_last_heartbeat_timestamp_seconds")
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

func TestRegisterTwice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := standalone(t, "billing")
	if _, err := Register(reg, e); err != nil {
		t.Fatal(err)
	}
	_, err := Register(reg, e)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("second registration: %v, want an AlreadyRegisteredError", err)
	}
}

// Unregister stops the observation and frees the names for another Register.
func TestUnregister(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := standalone(t, "billing")
	m, err := Register(reg, e)
	if err != nil {
		t.Fatal(err)
	}
	m.Unregister()
	m.Unregister() // idempotent
	if _, ok := sample(t, reg, "pgleader_is_leader", "scope", "billing"); ok {
		t.Fatal("metrics still registered after Unregister")
	}
	if _, err := Register(reg, e); err != nil {
		t.Fatalf("Register after Unregister: %v", err)
	}
}

// Label values never carry a raw control character, whatever reaches the
// metrics (the engine refuses such scope names; this holds anyway).
func TestHostileLabels(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := Register(reg, standalone(t, "billing"))
	if err != nil {
		t.Fatal(err)
	}
	const payload = "\x1b[2J\x1b]0;owned\x07\u202e"
	for _, k := range []election.EventKind{election.EventAcquired, election.EventGateOpen, election.EventLost} {
		m.observe(election.Event{Kind: k, Scope: "billing" + payload, Epoch: 1, Reason: protocol.ReasonEvicted, Time: time.Now()})
	}
	m.observe(election.Event{Kind: election.EventHeartbeatFailed, Time: time.Now(), Terms: []election.TermRef{{Scope: "billing" + payload}}})
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				b.WriteString(l.GetValue())
				b.WriteByte('\n')
			}
		}
	}
	for i, r := range b.String() {
		if r != '\n' && termsafe.Unsafe(r) {
			t.Fatalf("%U at byte %d of the label values:\n%q", r, i, b.String())
		}
	}
	if !strings.Contains(b.String(), `billing\x1b[2J`) {
		t.Fatalf("label values:\n%s", b.String())
	}
}
