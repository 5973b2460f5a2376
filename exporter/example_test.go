package exporter_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

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
