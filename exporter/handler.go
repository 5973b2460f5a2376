package exporter

import (
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler returns the exporter's HTTP endpoints:
//
//	/metrics  the registry in the Prometheus text format
//	/healthz  200 "ok" while the process serves requests (liveness)
//	/readyz   200 "ok" when ready() returns nil, else 503 with its error (readiness)
//	/         a short plain-text index of the above
//
// ready may be nil (always ready). A typical ready reports whether the collector
// has produced a snapshot yet. /metrics keeps serving while not ready: a scrape
// then shows pgleader_collector_up 0, which is what the alerts need.
func Handler(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// One bad series must not blank the whole page (and with it every alert):
		// serve what can be served and log the rest.
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            log.Default(),
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				text(w, http.StatusServiceUnavailable, fmt.Sprintf("not ready: %v\n", err))
				return
			}
		}
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, index)
	})
	return mux
}

const index = `pgleader exporter

/metrics  Prometheus metrics
/healthz  liveness: 200 while the process serves
/readyz   readiness: 200 once the collector has a picture of the database, else 503
`

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
