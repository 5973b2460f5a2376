package electionprom_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionprom"
)

// A service that embeds the engine exports its own view of the election on its own
// registry, in one call. Standalone mode (no database) keeps this example
// runnable; a real service sets DSN and serves reg, e.g. with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func ExampleRegister() {
	e, err := election.New(election.Config{
		Mode:   election.ModeStandalone, // DSN: os.Getenv("DATABASE_URL") in a real service
		Scopes: []string{"billing"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	if _, err := electionprom.Register(reg, e); err != nil {
		fmt.Println(err) // e.g. registered twice on reg
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := e.Scope("billing").Await(ctx); err != nil {
		fmt.Println(err)
		return
	}
	show(reg, "pgleader_is_leader", "pgleader_trust_remaining_seconds")
	cancel() // shutdown: the term ends cleanly
	_ = e.Wait()
	show(reg, "pgleader_is_leader", "pgleader_losses_total")
	// Output:
	// pgleader_is_leader{scope="billing"} 1
	// pgleader_trust_remaining_seconds{scope="billing"} 1.5
	// pgleader_is_leader{scope="billing"} 0
	// pgleader_losses_total{reason="shutdown",scope="billing"} 1
}

// show prints the samples of the named metrics, one per line.
func show(reg prometheus.Gatherer, names ...string) {
	mfs, _ := reg.Gather()
	for _, name := range names {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := make([]string, 0, len(m.GetLabel()))
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				fmt.Printf("%s{%s} %v\n", name, strings.Join(labels, ","), v)
			}
		}
	}
}
