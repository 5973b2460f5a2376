// Package electionprom exports an embedded election engine's metrics to
// Prometheus: what a service that embeds package election registers on its own
// registry. It depends on the engine and client_golang only (no collector, no
// migrations), so it adds nothing else to a service's build; the election package
// itself never imports Prometheus.
//
//	e, err := election.New(cfg)
//	m, err := electionprom.Register(reg, e) // any time, before or after Start
//	defer m.Unregister()
//
// Metrics (scope labels are the elector's scopes):
//
//	pgleader_is_leader{scope}                  gauge     1 while this node's gate is open
//	pgleader_epoch{scope}                      gauge     epoch this node leads, last led, or last saw
//	pgleader_acquisitions_total{scope}         counter   terms this node won
//	pgleader_losses_total{scope,reason}        counter   terms that ended (reason: election.Reason, "other" outside the vocabulary)
//	pgleader_heartbeat_duration_seconds        histogram heartbeat round trips, leaders' and followers' (one per round trip)
//	pgleader_heartbeat_failures_total{scope}   counter   failed heartbeats per led scope (scope "" when the node led none)
//	pgleader_last_heartbeat_timestamp_seconds  gauge     Unix time of the last successful heartbeat: a follower's proof
//	                                                     that it reaches the database (alert on time() − it)
//	pgleader_gate_blocked_total{scope}         counter   Require/Do calls refused with ErrNotLeader (Scope.GateBlocked)
//	pgleader_trust_remaining_seconds{scope}    gauge     how long the gate stays open without another heartbeat
package electionprom

import (
	"fmt"
	"sync"
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

// Metrics is one Elector's metrics on one registry. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg      prometheus.Registerer
	e        *election.Elector
	unwatch  func()
	unregMu  sync.Mutex
	unregged bool

	isLeader      *prometheus.GaugeVec
	epoch         *prometheus.GaugeVec
	acquisitions  *prometheus.CounterVec
	losses        *prometheus.CounterVec
	heartbeat     prometheus.Histogram
	hbFailures    *prometheus.CounterVec
	lastHeartbeat prometheus.Gauge

	gateBlocked    *prometheus.Desc
	trustRemaining *prometheus.Desc
}

// Register creates e's metrics, registers them on reg and starts observing e
// (Elector.Observe): one call, at any time before or while e runs. Each scope's
// series start at zero, so rate() and increase() see their first change. It
// returns the registration error, wrapped, when reg already holds metrics of these
// names (a second Metrics on one registry).
func Register(reg prometheus.Registerer, e *election.Elector) (*Metrics, error) {
	m := &Metrics{
		reg: reg, e: e,
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
			Help: "Terms of the scope this node held that ended, by reason (resigned, shutdown and handed_over are clean releases).",
		}, []string{"scope", "reason"}),
		heartbeat: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgleader_heartbeat_duration_seconds",
			Help:    "Round-trip time of this node's heartbeats (one round trip for all its scopes; followers heartbeat too), failed ones included.",
			Buckets: HeartbeatBuckets,
		}),
		hbFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgleader_heartbeat_failures_total",
			Help: "Failed heartbeats (error or timeout) per scope this node led; scope is empty when it led none.",
		}, []string{"scope"}),
		lastHeartbeat: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgleader_last_heartbeat_timestamp_seconds",
			Help: "Unix time of this node's last successful heartbeat (leader or follower): it reaches the database.",
		}),
		gateBlocked: prometheus.NewDesc("pgleader_gate_blocked_total",
			"Require and Do calls of the scope refused with ErrNotLeader: work this node did not do because its gate was closed.",
			[]string{"scope"}, nil),
		trustRemaining: prometheus.NewDesc("pgleader_trust_remaining_seconds",
			"How long this node's gate of the scope stays open without a further heartbeat (0 when not leading).",
			[]string{"scope"}, nil),
	}
	if err := reg.Register((*collector)(m)); err != nil {
		return nil, fmt.Errorf("register election metrics: %w", err)
	}
	for _, s := range e.Scopes() {
		name := label(s.Name())
		m.isLeader.WithLabelValues(name)
		m.acquisitions.WithLabelValues(name)
		m.hbFailures.WithLabelValues(name)
	}
	// Synchronous: an update is a few atomic adds (no I/O, no lock held long),
	// and the metrics then agree with the API: once Resign has returned, the
	// loss is counted and is_leader is 0.
	m.unwatch = e.Observe(m.observe, election.Synchronous())
	return m, nil
}

// Unregister stops observing the Elector and removes the metrics from the
// registry.
func (m *Metrics) Unregister() {
	m.unregMu.Lock()
	defer m.unregMu.Unlock()
	if m.unregged {
		return
	}
	m.unregged = true
	m.unwatch()
	m.reg.Unregister((*collector)(m))
}

// LossReason is the reason label of pgleader_losses_total: the engine's
// vocabulary as it is, anything else "other", so the label stays bounded.
func LossReason(r election.Reason) string {
	if r.Known() {
		return string(r)
	}
	return "other"
}

// label makes a label value of a scope name the way the collector's exporter
// does: the engine refuses names with control characters, and escaping anyway
// keeps the text format free of raw ones.
func label(s string) string { return termsafe.String(s) }

func (m *Metrics) observe(ev election.Event) {
	scope := label(ev.Scope)
	switch ev.Kind {
	case election.EventAcquired:
		m.isLeader.WithLabelValues(scope) // 0 until the gate opens
		m.acquisitions.WithLabelValues(scope).Inc()
		m.epoch.WithLabelValues(scope).Set(float64(ev.Epoch))
	case election.EventGateOpen:
		m.isLeader.WithLabelValues(scope).Set(1)
		m.epoch.WithLabelValues(scope).Set(float64(ev.Epoch))
	case election.EventGateClosed:
		m.isLeader.WithLabelValues(scope).Set(0)
	case election.EventLost, election.EventResigned:
		m.isLeader.WithLabelValues(scope).Set(0)
		m.losses.WithLabelValues(scope, LossReason(ev.Reason)).Inc()
	case election.EventObserved:
		m.epoch.WithLabelValues(scope).Set(float64(ev.Epoch))
	case election.EventHeartbeatOK:
		m.heartbeat.Observe(ev.Latency.Seconds())
		m.lastHeartbeat.Set(float64(ev.Time.UnixNano()) / float64(time.Second))
	case election.EventHeartbeatFailed:
		m.heartbeat.Observe(ev.Latency.Seconds())
		if len(ev.Terms) == 0 {
			m.hbFailures.WithLabelValues("").Inc()
		}
		for _, t := range ev.Terms {
			m.hbFailures.WithLabelValues(label(t.Scope)).Inc()
		}
	}
}

// collector is the prometheus.Collector face of Metrics, kept off its API.
type collector Metrics

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.isLeader.Describe(ch)
	c.epoch.Describe(ch)
	c.acquisitions.Describe(ch)
	c.losses.Describe(ch)
	c.heartbeat.Describe(ch)
	c.hbFailures.Describe(ch)
	c.lastHeartbeat.Describe(ch)
	ch <- c.gateBlocked
	ch <- c.trustRemaining
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.isLeader.Collect(ch)
	c.epoch.Collect(ch)
	c.acquisitions.Collect(ch)
	c.losses.Collect(ch)
	c.heartbeat.Collect(ch)
	c.hbFailures.Collect(ch)
	c.lastHeartbeat.Collect(ch)
	for _, s := range c.e.Scopes() {
		name := label(s.Name())
		ch <- prometheus.MustNewConstMetric(c.gateBlocked, prometheus.CounterValue, float64(s.GateBlocked()), name)
		ch <- prometheus.MustNewConstMetric(c.trustRemaining, prometheus.GaugeValue, s.TrustRemaining().Seconds(), name)
	}
}
