package exporter

import "github.com/prometheus/client_golang/prometheus"

// Gatherer is the fleet's page through its registry: /metrics writes the same
// page without one (text.go), since over a fleet the registry's checks and
// sorting cost most of a scrape.
func (f *Fleet) Gatherer() prometheus.Gatherer { return f.all }
