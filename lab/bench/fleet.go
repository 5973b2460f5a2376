package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/migrations/migrate"
	"github.com/pgleader/pgleader/tui"
)

// FleetOptions size a fleet dashboard benchmark.
type FleetOptions struct {
	DSN       string        // a migrated database; the fleet's databases are created on its server
	Databases int           // databases in the fleet (default 10)
	Scopes    int           // scopes per database (default 1000)
	Nodes     int           // forged nodes per database, every one a candidate of every scope (default 5)
	Refreshes int           // refreshes measured per configuration (default 30)
	Interval  time.Duration // the dashboard's poll interval the refresh is measured against (default 1s)
	Width     int           // frame size (default 120×40)
	Height    int
}

func (o *FleetOptions) defaults() {
	o.Databases = cmpOr(o.Databases, 10)
	o.Scopes = cmpOr(o.Scopes, 1000)
	o.Nodes = cmpOr(o.Nodes, 5)
	o.Refreshes = cmpOr(o.Refreshes, 30)
	o.Interval = cmpOr(o.Interval, time.Second)
	o.Width, o.Height = cmpOr(o.Width, 120), cmpOr(o.Height, 40)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// RefreshFigures are one configuration's refreshes: Read is the collectors'
// reads and, for a fleet, the merge (Fleet.Poll while the fleet runs: every
// member reads at once); Render is a dashboard taking the new snapshot and
// drawing a frame; Total is both, one refresh of `pgleader top`.
type RefreshFigures struct {
	Databases int             `json:"databases"`
	Scopes    int             `json:"scopes"`
	Nodes     int             `json:"nodes"`
	Read      []time.Duration `json:"-"`
	Render    []time.Duration `json:"-"`
	Total     []time.Duration `json:"-"`
	// HeapInUseMiB is the Go heap in use once the configuration ran, after a
	// GC, with its collectors and its last snapshot alive; RSSMiB the
	// process's resident set then (VmRSS: it includes what the earlier
	// configuration left to the runtime).
	HeapInUseMiB float64 `json:"heap_inuse_mib"`
	RSSMiB       float64 `json:"rss_mib"`
}

// FleetReport is the result of DashboardFleet: one database, then the fleet,
// measured in the same run.
type FleetReport struct {
	Interval time.Duration  `json:"interval"`
	One      RefreshFigures `json:"one_database"`
	Fleet    RefreshFigures `json:"fleet"`
}

// DashboardFleet measures a full refresh of `pgleader top` over a fleet
// against its poll interval: it creates o.Databases databases on the server
// of o.DSN (dropped afterwards), forges in each o.Scopes held scopes (claimed
// through pgleader.claim_scopes, as the other benchmarks do, by o.Nodes
// forged nodes that are candidates of every scope, with terms and node rows;
// no node process runs), then times o.Refreshes refreshes of one database
// alone (a Collector) and of all of them (a collector.Fleet), and the heap
// each leaves in use.
func DashboardFleet(ctx context.Context, o FleetOptions, logf func(string, ...any)) (*FleetReport, error) {
	o.defaults()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	admin, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	var capacity, used int
	if err := admin.QueryRow(ctx, `SELECT current_setting('max_locks_per_transaction')::int *
	       (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int),
	       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory')`).Scan(&capacity, &used); err != nil {
		return nil, err
	}
	if need := o.Databases * o.Scopes; used+need > capacity*6/10 {
		return nil, fmt.Errorf("%d databases × %d scopes hold %d advisory locks; with %d in use the server's lock table (%d) would be over 60%% full: "+
			"raise max_locks_per_transaction or forge fewer scopes", o.Databases, o.Scopes, need, used, capacity)
	}

	var dsns []string
	var holders []*pgx.Conn
	defer func() {
		for _, c := range holders {
			c.Close(context.Background())
		}
		for i := range dsns {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = admin.Exec(dctx, "DROP DATABASE IF EXISTS "+fleetDB(i)+" WITH (FORCE)")
			cancel()
		}
	}()
	for i := range o.Databases {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+fleetDB(i)+" WITH (FORCE)"); err != nil {
			return nil, err
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+fleetDB(i)+" TEMPLATE template0"); err != nil {
			return nil, err
		}
		dsn, err := withDatabase(o.DSN, fleetDB(i))
		if err != nil {
			return nil, err
		}
		dsns = append(dsns, dsn)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		if _, err := migrate.Up(ctx, cfg, nil); err != nil {
			return nil, fmt.Errorf("migrate %s: %w", fleetDB(i), err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		holders = append(holders, conn)
		if err := forgeFleetDB(ctx, conn, o.Scopes, o.Nodes); err != nil {
			return nil, fmt.Errorf("forge %s: %w", fleetDB(i), err)
		}
		logf("fleet: %s forged: %d scopes held by %d nodes", fleetDB(i), o.Scopes, o.Nodes)
	}

	rep := &FleetReport{Interval: o.Interval}
	one, err := newBenchCollector(dsns[0], o.Interval)
	if err != nil {
		return nil, err
	}
	if rep.One, err = measureRefreshes(ctx, o, one, 1, logf); err != nil {
		return rep, fmt.Errorf("one database: %w", err)
	}
	var members []collector.FleetMember
	for i, dsn := range dsns {
		c, err := newBenchCollector(dsn, o.Interval)
		if err != nil {
			return rep, err
		}
		members = append(members, collector.FleetMember{Name: strings.TrimPrefix(fleetDB(i), "pgleader_bench_"), Collector: c})
	}
	fleet, err := collector.NewFleet(members, collector.FleetConfig{})
	if err != nil {
		return rep, err
	}
	if rep.Fleet, err = measureRefreshes(ctx, o, fleet, o.Databases, logf); err != nil {
		return rep, fmt.Errorf("fleet: %w", err)
	}
	return rep, nil
}

func fleetDB(i int) string { return fmt.Sprintf("pgleader_bench_fleet_%02d", i) }

// withDatabase is dsn with its database replaced by db.
func withDatabase(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("the fleet benchmark needs a URL DSN (postgres://…): %q", dsn)
	}
	u.Path = "/" + db
	return u.String(), nil
}

func newBenchCollector(dsn string, interval time.Duration) (*collector.Collector, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return collector.New(collector.Config{ConnConfig: cc, Logger: discard(), PollInterval: interval, Source: collector.SourceModeNotify})
}

// forgeFleetDB forges one database of the fleet on conn: nodes candidates of
// every scope, each claiming its share of the scopes through claim_scopes (the
// locks stay with conn). The timing registered is long (a 10-minute
// heartbeat), so nothing goes stale while nobody heartbeats.
func forgeFleetDB(ctx context.Context, conn *pgx.Conn, scopes, nodes int) error {
	if _, err := conn.Exec(ctx, `
INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, leads, heartbeat_interval_ms, trust_window_ms, session_lease_ms)
SELECT 'node-' || n, 'host-' || n, 1000 + n, 'bench',
       ARRAY(SELECT 'scope-' || lpad(s::text, 4, '0') FROM generate_series(0, $1::int - 1) s),
       ARRAY(SELECT 'scope-' || lpad(s::text, 4, '0') FROM generate_series(0, $1::int - 1) s WHERE s % $2::int = n - 1),
       600000, 1800000, 2400000
  FROM generate_series(1, $2::int) n`, scopes, nodes); err != nil {
		return err
	}
	for n := 1; n <= nodes; n++ {
		var won int
		if err := conn.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE acquired) FROM pgleader.claim_scopes($1, 'host-' || $2::int, 0, 600000, 600000, 1800000, 2400000,
       ARRAY(SELECT 'scope-' || lpad(s::text, 4, '0') FROM generate_series(0, $3::int - 1) s WHERE s % $4::int = $2::int - 1),
       ARRAY(SELECT pgleader.lock_key('scope-' || lpad(s::text, 4, '0')) FROM generate_series(0, $3::int - 1) s WHERE s % $4::int = $2::int - 1))`,
			"node-"+strconv.Itoa(n), n, scopes, nodes).Scan(&won); err != nil {
			return err
		}
		if want := (scopes + nodes - n) / nodes; won != want {
			return fmt.Errorf("node-%d claimed %d scopes, want %d", n, won, want)
		}
	}
	return nil
}

// feed is what measureRefreshes runs and reads: a Collector or a Fleet.
type feed interface {
	tui.Feed
	Run(context.Context) error
	Poll(context.Context) (*collector.Snapshot, error)
}

// measureRefreshes runs f and times o.Refreshes refreshes: a read of every
// database (and the merge), then a dashboard drawing the snapshot.
func measureRefreshes(ctx context.Context, o FleetOptions, f feed, dbs int, logf func(string, ...any)) (RefreshFigures, error) {
	fig := RefreshFigures{Databases: dbs}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(60 * time.Second)
	for s := f.Snapshot(); s == nil || len(s.Scopes) < dbs*o.Scopes; s = f.Snapshot() {
		if time.Now().After(deadline) {
			return fig, errors.New("no full snapshot within 60s")
		}
		select {
		case <-ctx.Done():
			return fig, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var snap *collector.Snapshot
	for i := range o.Refreshes + 2 { // two to warm up
		start := time.Now()
		s, err := f.Poll(ctx)
		if err != nil {
			return fig, err
		}
		read := time.Since(start)
		start = time.Now()
		drawFrame(s, o.Width, o.Height)
		render := time.Since(start)
		snap = s
		if i < 2 {
			continue
		}
		fig.Read, fig.Render, fig.Total = append(fig.Read, read), append(fig.Render, render), append(fig.Total, read+render)
		logf("fleet: %d database(s): refresh %d/%d read %v render %v", dbs, i-1, o.Refreshes, read, render)
	}
	fig.Scopes, fig.Nodes = len(snap.Scopes), len(snap.Nodes)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fig.HeapInUseMiB = float64(ms.HeapInuse) / (1 << 20)
	fig.RSSMiB = float64(rssKiB()) / 1024
	runtime.KeepAlive(snap)
	return fig, nil
}

// drawFrame is a dashboard receiving s and drawing one frame of w×h.
func drawFrame(s *collector.Snapshot, w, h int) {
	m := tui.New(staticFeed{s}, tui.Options{Now: func() time.Time { return s.At }})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	_ = m.View()
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}) // quit: ends its context
}

// staticFeed serves one snapshot.
type staticFeed struct{ s *collector.Snapshot }

func (f staticFeed) Snapshot() *collector.Snapshot { return f.s }
func (f staticFeed) Updates() (<-chan *collector.Snapshot, func()) {
	ch := make(chan *collector.Snapshot)
	close(ch)
	return ch, func() {}
}
func (f staticFeed) Subscribe(int) (<-chan collector.Event, func()) {
	ch := make(chan collector.Event)
	close(ch)
	return ch, func() {}
}
func (staticFeed) Refresh()                      {}
func (staticFeed) SetPollInterval(time.Duration) {}
func (staticFeed) PollInterval() time.Duration   { return time.Second }

// rssKiB is this process's VmRSS (0 when unknown).
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
