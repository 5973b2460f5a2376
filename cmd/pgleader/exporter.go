package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

func (a *app) exporterCommand() *cobra.Command {
	var (
		listen        string
		interval      time.Duration
		nodeRetention time.Duration
		evictStale    bool
		source        sourceFlags
		targets       targetFlags
	)
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics of every scope, node and check (collector + /metrics)",
		Long: `exporter runs the collector against the database (logical replication or LISTEN
leader_change, see --source, plus a poll every --interval) and serves:

  /metrics  pgleader_scope_* (epoch, has_leader, leader, heartbeat age, tenure,
            leaderless time, split brain, stale leader, …), pgleader_node_*,
            pgleader_fence_rejected_total, pgleader_collector_* and the exporter's
            own scrape timing; labels are only database, scope and node
  /probe    ?target=NAME: one database's metrics only, for Prometheus-side
            fan-out (blackbox_exporter's multi-target pattern)
  /healthz  200 while the process serves
  /readyz   200 once the collector has a fresh picture of the database, else 503
            with a short reason ("no snapshot yet", "database unreachable"); the
            details, which name the connection, go to the log; over several
            databases, 200 while at least one is read

It listens on 127.0.0.1:9817 by default: loopback only. For a Prometheus on
another host, widen it with --listen :9817 (every interface) or --listen
ADDR:9817 (one). No endpoint shows the DSN, user, database, host or port. The
port, 9817, is pgleader's (postgres_exporter has 9187). Alerting rules with
runbooks ship in exporter/rules/pgleader.rules.yml and docs/runbooks.md.

Every pgleader_* series carries database="NAME": the target's name with
--target/--all-targets (one exporter, one collector per database; a scrape never
waits on a database, and pgleader_collector_up{database} is 0 for one that
cannot be read), else the database name of --dsn.

A node that stopped, or has not been seen, for longer than --node-retention
(default 1h) leaves the metrics: its pgleader_node_* series end, so nodes
restarted under a new id each time do not pile up series. At least 5m: a node
that crashed is alerted on as stale first (unseen for 30s, for a minute).
pgleader_node_restarts counts the restarts of a node under a fixed id.

--evict-stale terminates a zombie leader's session (lock held, heartbeat older
than its trust window plus a margin) after a safe delay, audited. It needs the
pg_signal_backend role (or superuser, or the leader's own role).

` + sourceHelp + `

` + targetsHelp,
		Example: `  pgleader exporter --dsn postgres://monitor@db:5432/app
  pgleader exporter --all-targets --listen :9817     # every database of the config file
  pgleader exporter --listen :9817 --interval 2s   # reachable from other hosts`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if interval < 100*time.Millisecond || interval > time.Minute {
				return cli.BadInput("--interval must be between 100ms and 1m (got %v)", interval)
			}
			if nodeRetention < minNodeRetention {
				return cli.BadInput("--node-retention must be at least %v, so that a node that crashed is alerted on as stale before it leaves the metrics (got %v)", minNodeRetention, nodeRetention)
			}
			if source.slot != "" && targets.named() && (targets.all || len(targets.names) > 1) {
				return cli.BadInput("--slot names one replication slot, and two databases of one server cannot share it: give --slot with a single --target, or leave it out (temporary slots)")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ts, err := a.targets(&targets)
			if err != nil {
				return err
			}
			if !targets.named() {
				// A lone --dsn: an unreachable or unmigrated database is bad input, at once.
				if err := dbcheck.Database(ctx, ts[0].Config, migrations.Latest); err != nil {
					return err
				}
			} else {
				// A fleet starts whatever its members' state: a database down now is
				// served as pgleader_collector_up 0 until it can be read.
				for i, err := range checkTargets(ctx, ts) {
					if err != nil {
						a.log.Warn("database not readable yet; serving it as pgleader_collector_up 0", "target", ts[i].Name,
							"err", cli.Message(err, a.secrets...))
					}
				}
			}
			tune := func(c *collector.Config) { c.NodeRetention = nodeRetention }
			return a.serveExporter(ctx, ts, listen, interval, evictStale, source, tune)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", exporter.DefaultListen, "`ADDR` to serve /metrics, /healthz and /readyz on (\":9817\": every interface)")
	f.DurationVar(&interval, "interval", time.Second, "collector poll interval")
	f.DurationVar(&nodeRetention, "node-retention", collector.DefaultNodeRetention,
		"how long a node that stopped or vanished stays in the metrics before its pgleader_node_* series end (at least "+minNodeRetention.String()+")")
	f.BoolVar(&evictStale, "evict-stale", false, "terminate a zombie leader's session after a safe delay (audited)")
	source.register(cmd)
	targets.register(cmd)
	return cmd
}

// minNodeRetention bounds --node-retention from below: a node that crashed
// is stale after collector.DefaultStaleNodeAfter (30s) unseen, and
// PgleaderNodeStale pages after a minute of that; it must still be in the
// metrics by then, with minutes to spare.
const minNodeRetention = 5 * time.Minute

// serveExporter runs a collector per target and serves their metrics until ctx
// ends or a collector cannot run (e.g. --source logical without it).
func (a *app) serveExporter(ctx context.Context, ts []cli.NamedTarget, listen string, interval time.Duration, evictStale bool, source sourceFlags, tune func(*collector.Config)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return cli.BadInput("--listen %s: %v", listen, err)
	}
	members := make([]exporter.Member, len(ts))
	cols := make([]*collector.Collector, len(ts))
	for i, t := range ts {
		log := a.log
		if len(ts) > 1 {
			log = log.With("target", t.Name)
		}
		c, err := newCollector(t.Target, interval, evictStale, log, source, tune)
		if err != nil {
			ln.Close()
			return cli.ForTarget(t.Name, err)
		}
		cols[i], members[i] = c, exporter.Member{Name: t.Name, Source: c}
	}
	fleet, err := exporter.NewFleet(members, exporter.Options{},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err != nil {
		ln.Close()
		return err
	}
	// /readyz says why in two words; the details (which name the connection) go
	// to the log.
	hs := &http.Server{Handler: fleet.Handler(fleet.Ready(a.log)), ReadHeaderTimeout: 5 * time.Second}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	done := make(chan result, len(cols))
	for i, c := range cols {
		go func() { done <- result{i, c.Run(runCtx)} }()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	a.log.Info("exporter listening", "metrics", "http://"+ln.Addr().String()+"/metrics",
		"databases", strings.Join(names, ","), "interval", interval)
	var (
		runErr  error
		pending = len(cols)
	)
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case r := <-done: // a collector cannot run (e.g. --source logical without it)
		pending--
		if r.err != nil {
			runErr = r.err
			if len(ts) > 1 {
				runErr = cli.ForTarget(ts[r.i].Name, r.err)
			}
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	cancel()
	for ; pending > 0; pending-- {
		if r := <-done; r.err != nil && runErr == nil {
			runErr = r.err
		}
	}
	if runErr != nil {
		return collectorError(runErr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// quietLogger is for the collector of the dashboard and of status: a log line
// would tear the screen, and the alerts are on it already.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func itoa(n int) string { return strconv.Itoa(n) }
