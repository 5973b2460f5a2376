package exporter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// HeartbeatBuckets are the buckets of pgleader_heartbeat_duration_seconds: a
// heartbeat is one round trip (0.2–0.3 ms on a LAN with synchronous commit), so
// the buckets resolve sub-millisecond values and reach the largest sane
// HeartbeatTimeout.
var HeartbeatBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// lossReasons are the reasons a term ends with (election and pgleader.terms
// vocabulary). Anything else is reported as "other" so the reason label stays
// bounded whatever a future engine reports.
var lossReasons = map[string]bool{
	"resigned": true, "shutdown": true, "lost_connection": true, "heartbeat_timeout": true,
	"evicted": true, "closed": true, "crashed": true,
}

var _ election.Observer = (*ElectionMetrics)(nil)

// ElectionMetrics exports one node's election engine to Prometheus: the events the
// engine reports through election.Config.Observer, and, once attached to the
// Elector, gauges read from its scopes at scrape time.
//
// Wiring takes two steps because the Observer is part of the Config that creates
// the Elector:
//
//	m, err := exporter.NewElectionMetrics(reg)  // 1. register
//	e, err := election.New(election.Config{…, Observer: m})
//	m.Attach(e)                                 // 2. pull-based gauges
//
// Metrics:
//
//	pgleader_is_leader{scope}                  gauge     1 while this node's gate is open
//	pgleader_epoch{scope}                      gauge     epoch this node leads or last led or observed
//	pgleader_acquisitions_total{scope}         counter   terms this node won
//	pgleader_losses_total{scope,reason}        counter   terms that ended (reason: resigned, shutdown, lost_connection, heartbeat_timeout, evicted, closed, other)
//	pgleader_heartbeat_duration_seconds        histogram heartbeat round trips (one per round trip, whatever the number of scopes)
//	pgleader_heartbeat_failures_total{scope}   counter   failed heartbeats per led scope (scope "" when the node led none)
//	pgleader_gate_blocked_total{scope}         counter   Require/Do calls refused with ErrNotLeader (Scope.GateBlocked)
//	pgleader_trust_remaining_seconds{scope}    gauge     how long the gate stays open without another heartbeat
//
// Its methods are safe for concurrent use.
type ElectionMetrics struct {
	isLeader     *prometheus.GaugeVec
	epoch        *prometheus.GaugeVec
	acquisitions *prometheus.CounterVec
	losses       *prometheus.CounterVec
	heartbeat    prometheus.Histogram
	hbFailures   *prometheus.CounterVec

	gateBlocked    *prometheus.Desc
	trustRemaining *prometheus.Desc

	elector atomic.Pointer[election.Elector]

	// A heartbeat is one round trip for all of a node's scopes, but the engine
	// reports it once per led scope; these remember the last round trip observed
	// so it enters the histogram once.
	hbMu      sync.Mutex
	hbLatency time.Duration
	hbMono    int64
}

// NewElectionMetrics creates the metrics and registers them on reg. It returns
// the registration error, wrapped, when reg already holds them (a second
// ElectionMetrics on one registry) or metrics of the same names. Pass the result
// as election.Config.Observer, then call Attach with the Elector.
func NewElectionMetrics(reg prometheus.Registerer) (*ElectionMetrics, error) {
	m := &ElectionMetrics{
		isLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgleader_is_leader",
			Help: "1 while this node leads the scope with its gate open, else 0.",
		}, []string{"scope"}),
		epoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgleader_epoch",
			Help: "Epoch of the scope this node leads, last led, or last saw another node lead.",
		}, []string{"scope"}),
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgleader_acquisitions_total",
			Help: "Terms of the scope this node won (lock and a new epoch).",
		}, []string{"scope"}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgleader_losses_total",
			Help: "Terms of the scope this node held that ended, by reason (resigned and shutdown are clean releases).",
		}, []string{"scope", "reason"}),
		heartbeat: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgleader_heartbeat_duration_seconds",
			Help:    "Round-trip time of this node's heartbeats, failed ones included.",
			Buckets: HeartbeatBuckets,
		}),
		hbFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgleader_heartbeat_failures_total",
			Help: "Failed heartbeats (error or timeout) per scope this node led; scope is empty when it led none.",
		}, []string{"scope"}),
		gateBlocked: prometheus.NewDesc("pgleader_gate_blocked_total",
			"Require and Do calls of the scope refused with ErrNotLeader: work this node did not do because its gate was closed.",
			[]string{"scope"}, nil),
		trustRemaining: prometheus.NewDesc("pgleader_trust_remaining_seconds",
			"How long this node's gate of the scope stays open without a further heartbeat (0 when not leading).",
			[]string{"scope"}, nil),
	}
	if err := reg.Register((*electionCollector)(m)); err != nil {
		return nil, fmt.Errorf("register election metrics: %w", err)
	}
	return m, nil
}

// Attach makes the scrape read the Elector's scopes (gate refusals and remaining
// trust) and creates each scope's series at zero, so that rate() and increase()
// see their first change. Call it once, after election.New; a later call replaces
// the Elector.
func (m *ElectionMetrics) Attach(e *election.Elector) {
	for _, s := range e.Scopes() {
		name := termsafe.String(s.Name())
		m.isLeader.WithLabelValues(name)
		m.acquisitions.WithLabelValues(name)
		m.hbFailures.WithLabelValues(name)
	}
	m.elector.Store(e)
}

// Observe records one engine event. It implements election.Observer: it only
// updates in-memory metrics and returns at once.
func (m *ElectionMetrics) Observe(ev election.Event) {
	// The engine refuses scope names a terminal would act on; escaping anyway
	// keeps the label values of both exporters made the same way (labelValues).
	ev.Scope = termsafe.String(ev.Scope)
	switch ev.Kind {
	case election.EventAcquired:
		m.isLeader.WithLabelValues(ev.Scope) // 0 until the gate opens
		m.acquisitions.WithLabelValues(ev.Scope).Inc()
		m.epoch.WithLabelValues(ev.Scope).Set(float64(ev.Epoch))
	case election.EventGateOpen:
		m.isLeader.WithLabelValues(ev.Scope).Set(1)
		m.epoch.WithLabelValues(ev.Scope).Set(float64(ev.Epoch))
	case election.EventGateClosed:
		m.isLeader.WithLabelValues(ev.Scope).Set(0)
	case election.EventLost, election.EventResigned:
		m.isLeader.WithLabelValues(ev.Scope).Set(0)
		m.losses.WithLabelValues(ev.Scope, LossReason(ev.Reason)).Inc()
	case election.EventObserved:
		m.epoch.WithLabelValues(ev.Scope).Set(float64(ev.Epoch))
	case election.EventHeartbeatOK:
		m.observeHeartbeat(ev)
	case election.EventHeartbeatFailed:
		m.observeHeartbeat(ev)
		m.hbFailures.WithLabelValues(ev.Scope).Inc()
	}
}

// LossReason maps a term's end reason to the value of the reason label of
// pgleader_losses_total: the known reasons as they are, anything else "other".
func LossReason(reason string) string {
	if lossReasons[reason] {
		return reason
	}
	return "other"
}

// observeHeartbeat adds a round trip to the histogram unless it is the one just
// added, reported again for another scope. The engine reports one round trip's
// events back to back with the same latency, while two distinct round trips end
// at least a heartbeat interval apart when their latencies are equal; half the
// interval (5ms before Attach: the smallest interval is 10ms) tells them apart.
func (m *ElectionMetrics) observeHeartbeat(ev election.Event) {
	window := int64(5 * time.Millisecond)
	if e := m.elector.Load(); e != nil {
		window = int64(e.Config().HeartbeatInterval / 2)
	}
	m.hbMu.Lock()
	dup := ev.Latency == m.hbLatency && ev.MonoNS-m.hbMono < window && ev.MonoNS >= m.hbMono
	if !dup {
		m.hbLatency, m.hbMono = ev.Latency, ev.MonoNS
	}
	m.hbMu.Unlock()
	if !dup {
		m.heartbeat.Observe(ev.Latency.Seconds())
	}
}

// electionCollector is the prometheus.Collector face of ElectionMetrics, kept off
// its exported API.
type electionCollector ElectionMetrics

func (c *electionCollector) Describe(ch chan<- *prometheus.Desc) {
	c.isLeader.Describe(ch)
	c.epoch.Describe(ch)
	c.acquisitions.Describe(ch)
	c.losses.Describe(ch)
	c.heartbeat.Describe(ch)
	c.hbFailures.Describe(ch)
	ch <- c.gateBlocked
	ch <- c.trustRemaining
}

func (c *electionCollector) Collect(ch chan<- prometheus.Metric) {
	c.isLeader.Collect(ch)
	c.epoch.Collect(ch)
	c.acquisitions.Collect(ch)
	c.losses.Collect(ch)
	c.heartbeat.Collect(ch)
	c.hbFailures.Collect(ch)
	e := (*ElectionMetrics)(c).elector.Load()
	if e == nil {
		return
	}
	for _, s := range e.Scopes() {
		name := termsafe.String(s.Name())
		ch <- prometheus.MustNewConstMetric(c.gateBlocked, prometheus.CounterValue, float64(s.GateBlocked()), name)
		ch <- prometheus.MustNewConstMetric(c.trustRemaining, prometheus.GaugeValue, s.TrustRemaining().Seconds(), name)
	}
}
