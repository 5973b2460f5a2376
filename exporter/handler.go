package exporter

import (
	"errors"
	"log"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgleader/pgleader/collector"
)

// The reasons Ready gives. They are what /readyz shows: short, and without any
// detail of the connection (user, database, host, port), which goes to the log.
var (
	ErrNoSnapshot          = errors.New("no snapshot yet")
	ErrDatabaseUnreachable = errors.New("database unreachable")
)

// Ready returns the readiness check of an exporter over src, for Handler: nil
// once src has a snapshot and its database is readable, ErrNoSnapshot before
// the first snapshot, ErrDatabaseUnreachable while the collector's reads fail
// (the snapshot is then the last good one, re-published). The errors carry no
// detail; each change of readiness is logged to logger (slog.Default() if nil)
// once, with the collector's last error, which names the connection.
func Ready(src SnapshotSource, logger *slog.Logger) func() error {
	if logger == nil {
		logger = slog.Default()
	}
	var (
		mu   sync.Mutex
		last error // the last state logged (nil: ready)
		seen bool
	)
	return func() error {
		s := src.Snapshot()
		var err error
		detail := ""
		switch {
		case s == nil:
			err = ErrNoSnapshot
		case s.Health.Source == collector.SourceDisconnected:
			err, detail = ErrDatabaseUnreachable, s.Health.LastError
		}
		mu.Lock()
		defer mu.Unlock()
		if seen && err == last {
			return err
		}
		seen, last = true, err
		switch {
		case err == nil:
			logger.Info("exporter ready")
		case detail != "":
			logger.Warn("exporter not ready", "reason", err, "err", detail)
		default:
			logger.Warn("exporter not ready", "reason", err)
		}
		return err
	}
}

// Handler returns the exporter's HTTP endpoints:
//
//	/metrics  the registry in the Prometheus text format
//	/healthz  200 "ok" while the process serves requests (liveness)
//	/readyz   200 "ok" when ready() returns nil, else 503 "not ready: <reason>"
//	/         a short plain-text index of the above
//
// ready may be nil (always ready); Ready(src, logger) is the usual one. The body
// of /readyz names only a generic reason (ErrNoSnapshot, ErrDatabaseUnreachable,
// else nothing), never the text of ready's error, which may carry the
// connection's user, database, host and port: whoever can reach the port must
// not learn them. /metrics keeps serving while not ready: a scrape then shows
// pgleader_collector_up 0, which is what the alerts need.
func Handler(reg *prometheus.Registry, ready func() error) http.Handler {
	return handler(reg, ready, nil)
}

// metricsHandler serves g in the Prometheus text format.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		// One bad series must not blank the whole page (and with it every alert):
		// serve what can be served and log the rest.
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            log.Default(),
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// handler is Handler over any gatherer, with /probe served by probe when not nil.
func handler(g prometheus.Gatherer, ready func() error, probe http.HandlerFunc) http.Handler {
	return handlerOf(metricsHandler(g), ready, probe)
}

// handlerOf is Handler with metrics serving /metrics.
func handlerOf(metrics http.Handler, ready func() error, probe http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	idx := index
	if probe != nil {
		mux.HandleFunc("GET /probe", probe)
		idx += probeIndex
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				text(w, http.StatusServiceUnavailable, "not ready"+publicReason(err)+"\n")
				return
			}
		}
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, idx)
	})
	return mux
}

// publicReason is what /readyz may say about err.
func publicReason(err error) string {
	for _, r := range []error{ErrNoSnapshot, ErrDatabaseUnreachable} {
		if errors.Is(err, r) {
			return ": " + r.Error()
		}
	}
	return ""
}

const index = `pgleader exporter

/metrics  Prometheus metrics
/healthz  liveness: 200 while the process serves
/readyz   readiness: 200 once the collector has a picture of the database, else 503
`

const probeIndex = `/probe    ?target=NAME: the metrics of one database only
`

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
