// Package demo runs a local pgleader cluster you can break and watch heal: a
// throwaway PostgreSQL (or a database you name), N `pgleader node` processes doing
// fenced writes across M scopes, each reaching PostgreSQL through its own
// in-process proxy (so its link can be hung), the collector, the Prometheus
// exporter, and the on-call dashboard with fault keys and its operator actions
// (resign, evict, hand over) enabled. Nodes that die are started again after
// Options.Restart, so a kill shows both the failover and the healing.
//
// Headless (no terminal needed), it runs a fault schedule instead of the dashboard,
// then judges the run with the chaos checker (H1–H5 and gate overlap) and prints a
// summary; Run returns an error wrapping ErrUnsafe on any violation.
//
// Teardown: on return (q, Ctrl-C, SIGTERM, the end of Duration) every node and the
// throwaway server are stopped and the scratch directories removed. If the demo
// process itself dies (kill -9, a crash), a reaper child (demo/reaper) kills
// what is left and removes the directories.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/demo/reaper"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/operator"
	"github.com/pgleader/pgleader/tui"
)

// ErrUnsafe marks a headless run whose history violates a safety property.
var ErrUnsafe = errors.New("safety violation")

// Options configure a demo.
type Options struct {
	Bin      string        // pgleader binary for the nodes (and the reaper)
	DSN      string        // empty: a throwaway PostgreSQL
	Nodes    int           // node processes (default 3)
	Scopes   []string      // scopes every node campaigns for (default billing, reports)
	Work     time.Duration // fenced write interval of a leader, per scope (default WorkInterval)
	Restart  time.Duration // delay before a dead node is started again (default 3s)
	Duration time.Duration // 0: until ctx ends (or q)
	Listen   string        // exporter address; "" = 127.0.0.1:9817, or a free port if taken; "off" = none
	Headless bool          // no dashboard: a live log, and a fault schedule with Faults
	Faults   bool          // headless: apply faults every few seconds
	Seed     int64         // headless fault schedule
	NoColor  bool
	Theme    tui.Theme // the dashboard's colours (tui.ThemeAuto: ask the terminal)
	Out      io.Writer // progress and the headless log
	// Ready, if set, is called once everything runs (tests).
	Ready func(Info)
}

// Info describes a running demo.
type Info struct {
	DSN        string
	MetricsURL string // "" without exporter
	Dir        string // scratch directory (events files, logs)
	ServerDir  string // the throwaway PostgreSQL's directory ("" with --dsn)
	ServerPID  int
	NodePIDs   map[string]int
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"billing", "reports"}
	}
	if o.Work == 0 {
		o.Work = WorkInterval(len(o.Scopes))
	}
	if o.Restart == 0 {
		o.Restart = 3 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// WorkInterval is the default fenced-write interval of a leader, per scope:
// 200ms, stretched beyond 10 scopes so that all of them together write about 50
// times a second (every 20s each at 1,000 scopes). The writes are there to show
// fencing at work; 5,000 a second would drown the heartbeats of a laptop's
// PostgreSQL and make every scope flap.
func WorkInterval(scopes int) time.Duration {
	return max(200*time.Millisecond, time.Duration(scopes)*time.Second/50)
}

// NumberedScopes returns n scope names, scope-0001 … scope-n, zero-padded to
// at least four digits so that they sort in number order (`pgleader demo
// --scopes N`).
func NumberedScopes(n int) []string {
	width := max(4, len(strconv.Itoa(n)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("scope-%0*d", width, i+1)
	}
	return out
}

// scopeList names the scopes in a message, the first and last only when
// there are many.
func scopeList(scopes []string) string {
	if len(scopes) <= 6 {
		return fmt.Sprint(scopes)
	}
	return fmt.Sprintf("%d: [%s %s … %s]", len(scopes), scopes[0], scopes[1], scopes[len(scopes)-1])
}

// Run runs the demo until ctx ends, Duration passes or the dashboard quits.
func Run(ctx context.Context, o Options) (err error) {
	o.defaults()
	o.Out = &lockedWriter{w: o.Out} // the log, the alerts and the summary interleave
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	out := o.Out
	reap, err := reaper.Start(o.Bin)
	if err != nil {
		return err
	}
	defer reap.Done() // runs last: everything below is cleaned up by then

	if o.DSN == "" {
		fmt.Fprintln(out, "demo: starting a throwaway PostgreSQL …")
	} else {
		fmt.Fprintln(out, "demo: using the database of --dsn: it creates the pgleader schema there if missing and writes to pgleader.leader_state, nodes, terms, audit and demo_actions (scopes "+scopeList(o.Scopes)+")")
	}
	began := time.Now()
	dsn, srv, closeDB, err := cluster.Database(ctx, o.DSN, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	info := Info{DSN: dsn, NodePIDs: map[string]int{}}
	if srv != nil {
		info.ServerDir, info.ServerPID = filepath.Dir(srv.DataDir()), srv.PID()
		reap.Process(srv.PID())
		reap.Dir(info.ServerDir)
	}
	dir, err := os.MkdirTemp("", "pgleader-demo-")
	if err != nil {
		return err
	}
	info.Dir = dir
	reap.Dir(dir)
	defer os.RemoveAll(dir)

	l := &lab{dsn: dsn, nodeDSN: dsn, srv: srv, scopes: o.Scopes, work: o.Work, reap: reap.Process,
		notes: make(chan string, 256), proxies: map[string]*link{}, frozen: map[string]bool{},
		hung: map[string]bool{}, removed: map[string]bool{}, dead: map[string]time.Time{}}
	if srv != nil { // a role is the server's: only on the throwaway one
		if nd, why := cluster.NodeLogin(ctx, dsn); why == "" {
			l.nodeDSN = nd
		} else {
			select {
			case l.notes <- why + " (their wake-ups come from heartbeats)":
			default:
			}
		}
	}
	// Headless, the checker judges the whole history; on the dashboard no one reads
	// it, and at many scopes the heartbeats alone would grow it by megabytes a minute.
	l.c = cluster.New(cluster.Options{Bin: o.Bin, DSN: dsn, Dir: dir, Scopes: o.Scopes,
		NodeArgs: []string{"--work-interval", o.Work.String(), "--log-level", "warn"}, ForgetHeartbeats: !o.Headless})
	defer func() {
		l.c.Close()
		for _, p := range l.proxies {
			_ = p.Close()
		}
	}()
	for i := 0; i < o.Nodes; i++ {
		if _, err := l.addNode(); err != nil {
			return err
		}
	}
	for _, n := range l.c.Running() {
		info.NodePIDs[n.ID] = n.PID()
	}

	// The collector and the exporter, in-process.
	ccfg := collector.DefaultConfig()
	ccfg.ConnConfig, err = pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	ccfg.PollInterval = 500 * time.Millisecond
	// The dashboard owns the terminal (a log line would tear it); headless, the
	// collector's alerts are printed from its event stream instead.
	ccfg.Logger = slog.New(slog.DiscardHandler)
	col, err := collector.New(ccfg)
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	colDone := make(chan error, 1)
	go func() { colDone <- col.Run(runCtx) }()
	defer func() { stopRun(); <-colDone }()

	if o.Listen != "off" {
		url, stop, err := serveMetrics(o.Listen, col)
		if err != nil {
			return err
		}
		defer stop()
		info.MetricsURL = url
		l.note("Prometheus metrics at %s", url)
	}

	// The nodes' events drive the failover measurements and the restarts.
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			rs, err := l.c.Poll()
			if err == nil {
				l.observe(rs)
				if o.Headless {
					logRecords(out, rs)
				}
			}
			l.restartDead(o.Restart)
		}
	}()
	defer func() { stopRun(); <-pollDone }()

	fmt.Fprintf(out, "demo: database %s\n", redactDSN(dsn))
	if srv != nil {
		fmt.Fprintf(out, "demo: throwaway PostgreSQL pid %d in %s\n", info.ServerPID, info.ServerDir)
	}
	if info.MetricsURL != "" {
		fmt.Fprintf(out, "demo: Prometheus metrics at %s\n", info.MetricsURL)
	}
	fmt.Fprintf(out, "demo: %d nodes, scopes %s, scratch %s (ready in %s)\n", o.Nodes, scopeList(o.Scopes), dir,
		time.Since(began).Round(time.Millisecond))
	if o.Ready != nil {
		o.Ready(info)
	}

	if o.Headless {
		evs, unsubscribe := col.Subscribe(256)
		alertsDone := make(chan struct{})
		go func() { defer close(alertsDone); logAlerts(runCtx, out, evs) }()
		defer func() { stopRun(); unsubscribe(); <-alertsDone }()
		return headless(ctx, o, l)
	}
	op, err := operator.New(operator.Config{ConnConfig: ccfg.ConnConfig, Latest: col.Snapshot, Logger: ccfg.Logger})
	if err != nil {
		return err
	}
	return tui.Run(ctx, col, dashboardOptions(dsn, l, op, o))
}

// serveMetrics serves the exporter on listen (default 127.0.0.1:9817, else a free
// port) and returns its /metrics URL.
func serveMetrics(listen string, src exporter.SnapshotSource) (string, func(), error) {
	fallback := false
	if listen == "" {
		listen, fallback = exporter.DefaultListen, true
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil && fallback {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return "", nil, fmt.Errorf("exporter: listen on %s: %w", listen, err)
	}
	// Labelled database="demo", as the exporter of a fleet labels its members: the
	// shipped dashboard and rules read the demo as they read production.
	fleet, err := exporter.NewFleet([]exporter.Member{{Name: "demo", Source: src}}, exporter.Options{})
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	hs := &http.Server{Handler: fleet.Handler(func() error { return nil }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/metrics", func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// CheckDSN reports, in one line that names the fix, a --dsn the demo cannot
// use; "" (the demo's own throwaway server) is fine.
func CheckDSN(dsn string) error {
	if dsn == "" {
		return nil
	}
	_, err := hostPort(dsn)
	return err
}

// hostPort returns the host:port of a single-host URL DSN: the demo puts one
// fault proxy per node in front of that one server (its H key hangs the link).
func hostPort(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the demo takes --dsn as a URL (postgres://user@host:5432/db): it rewrites the host to put a fault proxy in front of the server")
	}
	if strings.Contains(u.Host, ",") {
		return "", fmt.Errorf("--dsn names several hosts (%s): the demo puts one fault proxy in front of one server; give it one host:port (the primary, or an HAProxy or PgBouncer address that follows it). Multi-host DSNs are for pgleader node", u.Host)
	}
	if u.Hostname() == "" || strings.HasPrefix(u.Hostname(), "/") || u.Query().Get("host") != "" {
		return "", fmt.Errorf("--dsn must name a TCP host (postgres://user@host:5432/db): the demo's fault proxy cannot stand in front of a Unix socket")
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// withHost returns dsn with its host:port replaced.
func withHost(dsn, hostport string) string {
	u, _ := url.Parse(dsn)
	u.Host = hostport
	return u.String()
}

// redactDSN hides a password.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// lockedWriter serialises writes from the demo's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
