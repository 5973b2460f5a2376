package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/exporter"
)

func (a *app) exporterCommand() *cobra.Command {
	var (
		listen     string
		interval   time.Duration
		evictStale bool
		source     sourceFlags
	)
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics of every scope, node and check (collector + /metrics)",
		Long: `exporter runs the collector against the database (logical replication or LISTEN
leader_change, see --source, plus a poll every --interval) and serves:

  /metrics  pgleader_scope_* (epoch, has_leader, leader, heartbeat age, tenure,
            leaderless time, split brain, stale leader, …), pgleader_node_*,
            pgleader_fence_rejected_total, pgleader_collector_* and the exporter's
            own scrape timing; labels are only scope and node
  /healthz  200 while the process serves
  /readyz   200 once the collector has a fresh picture of the database, else 503
            with a short reason ("no snapshot yet", "database unreachable"); the
            details, which name the connection, go to the log

It listens on 127.0.0.1:9817 by default: loopback only. For a Prometheus on
another host, widen it with --listen :9817 (every interface) or --listen
ADDR:9817 (one). No endpoint shows the DSN, user, database, host or port. The
port, 9817, is pgleader's (postgres_exporter has 9187). Alerting rules with
runbooks ship in exporter/rules/pgleader.rules.yml and docs/runbooks.md.

--evict-stale terminates a zombie leader's session (lock held, heartbeat older
than its trust window plus a margin) after a safe delay, audited. It needs the
pg_signal_backend role (or superuser, or the leader's own role).

` + sourceHelp,
		Example: `  pgleader exporter --dsn postgres://monitor@db:5432/app
  pgleader exporter --listen :9817 --interval 2s   # reachable from other hosts`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if interval < 100*time.Millisecond || interval > time.Minute {
				return cli.BadInput("--interval must be between 100ms and 1m (got %v)", interval)
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return cli.BadInput("--listen %s: %v", listen, err)
				}
				col, err := newCollector(t, interval, evictStale, a.log, source)
				if err != nil {
					ln.Close()
					return err
				}
				reg := prometheus.NewRegistry()
				reg.MustRegister(exporter.New(col, exporter.Options{}),
					collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				// /readyz says why in two words; the details (which name the
				// connection) go to the log.
				ready := exporter.Ready(col, a.log)
				hs := &http.Server{Handler: exporter.Handler(reg, ready), ReadHeaderTimeout: 5 * time.Second}
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- col.Run(runCtx) }()
				serveErr := make(chan error, 1)
				go func() { serveErr <- hs.Serve(ln) }()
				a.log.Info("exporter listening", "metrics", "http://"+ln.Addr().String()+"/metrics",
					"database", redacted(t), "interval", interval)
				var runErr error
				ran := false
				select {
				case <-ctx.Done():
				case err = <-serveErr:
				case runErr = <-done: // the collector cannot run (e.g. --source logical without it)
					ran = true
				}
				sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer scancel()
				_ = hs.Shutdown(sctx)
				cancel()
				if !ran {
					runErr = <-done
				}
				if runErr != nil {
					return collectorError(runErr)
				}
				if errors.Is(err, http.ErrServerClosed) {
					err = nil
				}
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", exporter.DefaultListen, "`ADDR` to serve /metrics, /healthz and /readyz on (\":9817\": every interface)")
	f.DurationVar(&interval, "interval", time.Second, "collector poll interval")
	f.BoolVar(&evictStale, "evict-stale", false, "terminate a zombie leader's session after a safe delay (audited)")
	source.register(cmd)
	return cmd
}

// quietLogger is for the collector of the dashboard and of status: a log line
// would tear the screen, and the alerts are on it already.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func itoa(n int) string { return strconv.Itoa(n) }
