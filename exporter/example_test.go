package exporter_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/exporter"
)

// A service that embeds the engine exports its own view of the election on its own
// registry. The metrics are the Elector's Observer, so they exist before it
// (step 1); the gauges read from the Elector at scrape time need it (step 2).
// Standalone mode (no database) keeps this example runnable; a real service sets
// DSN instead and serves reg, e.g. with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func ExampleNewElectionMetrics() {
	reg := prometheus.NewRegistry()

	// Step 1: create and register the metrics, and pass them as the Observer.
	metrics, err := exporter.NewElectionMetrics(reg)
	if err != nil {
		fmt.Println(err) // e.g. registered twice on reg
		return
	}
	e, err := election.New(election.Config{
		Standalone: true, // DSN: os.Getenv("DATABASE_URL") in a real service
		NodeID:     "worker-1",
		Scopes:     []string{"billing"},
		Logger:     slog.New(slog.DiscardHandler),
		Observer:   metrics,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Step 2: attach the Elector (gate refusals, remaining trust).
	metrics.Attach(e)

	transitions, unsubscribe := e.Subscribe()
	defer unsubscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	<-transitions // elected: the gate is open

	show(reg, "pgleader_is_leader", "pgleader_trust_remaining_seconds")
	cancel() // shutdown: the term ends cleanly
	<-done
	show(reg, "pgleader_is_leader", "pgleader_losses_total")
	// Output:
	// pgleader_is_leader{scope="billing"} 1
	// pgleader_trust_remaining_seconds{scope="billing"} 1.5
	// pgleader_is_leader{scope="billing"} 0
	// pgleader_losses_total{reason="shutdown",scope="billing"} 1
}

// show prints the samples of the named gauges and counters.
func show(reg *prometheus.Registry, names ...string) {
	mfs, _ := reg.Gather()
	for _, name := range names {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := ""
				for i, l := range m.GetLabel() {
					if i > 0 {
						labels += ","
					}
					labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				fmt.Printf("%s{%s} %v\n", name, labels, v)
			}
		}
	}
}
