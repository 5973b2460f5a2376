package dashboard_test

//lint:file-ignore SA1019 the classic dashboard model is deliberate (dashboard.go)

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/logical"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/promtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promServer is a real Prometheus (lab/promtest) scraping the exporters every
// second.
type promServer struct{ *promtest.Server }

// sample is one series of a query's result: its labels and its values (one for
// an instant query, one per step for a range query).
type sample struct {
	labels map[string]string
	values []float64
}

// query runs expr as the dashboard would: an instant query at now, or a range
// query from the server's start to now at a 1s step.
func (p promServer) query(instant bool, expr string) ([]sample, error) {
	var got []promtest.Series
	var err error
	if instant {
		got, err = p.Query(expr, time.Now())
	} else {
		got, err = p.QueryRange(expr, p.Started, time.Now(), time.Second)
	}
	if err != nil {
		return nil, err
	}
	out := make([]sample, len(got))
	for i, s := range got {
		out[i] = sample{labels: s.Labels, values: s.Values()}
	}
	return out, nil
}

func startPrometheus(t *testing.T, targets ...string) promServer {
	t.Helper()
	return promServer{promtest.Start(t, targets...)}
}

// labelValues asks Prometheus for the values of label among the series of
// metric: what Grafana's label_values(metric, label) runs.
func labelValues(t *testing.T, p promServer, label, metric string) []string {
	t.Helper()
	vs, err := p.LabelValues(label, metric)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// target is one query of one panel (or annotation) of the built dashboard.
type target struct {
	panel, refID, expr string
	instant            bool
}

func (tg target) String() string { return fmt.Sprintf("%s/%s", tg.panel, tg.refID) }

func targets(t *testing.T) []target {
	t.Helper()
	var out []target
	d := build(t)
	for _, a := range d.Annotations.List {
		if a.Expr != nil {
			out = append(out, target{panel: "annotation " + a.Name, refID: "expr", expr: *a.Expr})
		}
	}
	for _, p := range panels(d) {
		for _, tg := range p.Targets {
			q, ok := promQuery(tg)
			if !ok {
				t.Fatalf("panel %q: target %T", deref(p.Title), tg)
			}
			out = append(out, target{panel: deref(p.Title), refID: deref(q.RefId), expr: q.Expr,
				instant: q.Instant != nil && *q.Instant})
		}
	}
	return out
}

// expand substitutes the variables and Grafana's macros as Grafana would with
// the given database selection, a 1s scrape interval and the time range since
// start: $__rate_interval is 4 scrape intervals, $__interval the step.
func expand(expr, database string, rangeLen time.Duration) string {
	return strings.NewReplacer(
		"$database", database,
		"${database}", database,
		"$__rate_interval", "4s",
		"$__interval", "1s",
		"$__range", strconv.Itoa(int(rangeLen.Seconds())+1)+"s",
	).Replace(expr)
}

// expectation says what a panel query must show once the faults happened.
type expectation int

const (
	data     expectation = iota // a non-empty result (a 0-valued series counts: a check at its healthy value)
	positive                    // some value above 0: the fault the test caused shows
	someZero                    // some value 0 (a node DOWN)
)

// faults names the panel queries that show the faults the test causes, and what
// they must show; every other query must return data.
var faults = map[string]expectation{
	"Scopes without a leader/A":                       positive, // the squatted scope
	"Alerts firing/A":                                 positive,
	"Fenced writes rejected in range/A":               positive,
	"Foreign sessions on scope locks/A":               positive,
	"Leadership changes (failovers and handovers)/A":  positive,
	"Failover duration/A":                             positive, // the handover gap of the failover
	"Fenced writes rejected/A":                        positive,
	"Interference: foreign sessions on scope locks/A": positive,
	"Nodes up/A": someZero, // the node stopped
	"Supervised commands up (pgleader run)/A": positive,
	"Collector source/A":                      positive, // logical: 3
	"Epoch per scope/A":                       positive,
	"Heartbeat age vs trust window/B":         positive,
	"Collector now/A":                         positive,
	"Collector up over time/A":                positive,
	"annotation Leadership changes/expr":      positive,
}

func check(samples []sample, want expectation) string {
	if len(samples) == 0 {
		return "no data"
	}
	switch want {
	case positive:
		for _, s := range samples {
			if slices.ContainsFunc(s.values, func(v float64) bool { return v > 0 }) {
				return ""
			}
		}
		return fmt.Sprintf("no value above 0 in %d series", len(samples))
	case someZero:
		for _, s := range samples {
			if slices.Contains(s.values, 0) {
				return ""
			}
		}
		return fmt.Sprintf("no value 0 in %d series", len(samples))
	}
	return ""
}

// startNode runs a node until the test ends, with timing of its own, slower than
// testnode.FastConfig's.
func startNode(t *testing.T, dsn, id string, scopes ...string) *testnode.Node {
	t.Helper()
	cfg := testnode.FastConfig(dsn, id, scopes...)
	cfg.HeartbeatInterval, cfg.TrustWindow, cfg.SessionLease, cfg.ResignCooldown = 100*time.Millisecond, 400*time.Millisecond, 800*time.Millisecond, 0
	return testnode.Start(t, cfg)
}

// runCollector runs c until the test ends.
func runCollector(t *testing.T, c *collector.Collector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("collector Run: %v", err)
		}
	})
}

// TestDashboardQueriesLive evaluates every query of the dashboard against a real
// Prometheus scraping a real exporter over a live cluster, after causing what
// the panels show: a failover (the leader's session terminated), a fenced write
// refused under the old epoch, a squatter on a scope's lock, a node stopped.
// A second database whose collector cannot connect shows as down.
func TestDashboardQueriesLive(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel()
	promtest.Binary(t)
	ctx := context.Background()
	began := time.Now()
	dsn := pgtest.MigratedDSN(t)
	admin := pgtest.Connect(t, dsn)

	// A squatter holds the lock of scope reports before any node campaigns.
	squatter := pgtest.Connect(t, dsn)
	if _, err := squatter.Exec(ctx, "SELECT pg_advisory_lock_shared(pgleader.lock_key('reports'))"); err != nil {
		t.Fatal(err)
	}

	// The collector streams through a permanent slot (so the slot lag panel has
	// data), dropped once it stopped.
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	slot := fmt.Sprintf("pgleader_dashboard_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, dsn)
		if err != nil {
			t.Errorf("drop slot: %v", err)
			return
		}
		defer c.Close(context.Background())
		for {
			err := logical.DropSlot(dctx, c, slot)
			if errors.Is(err, logical.ErrSlotInUse) && dctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil && !errors.Is(err, logical.ErrNoSlot) {
				t.Errorf("drop slot: %v", err)
			}
			return
		}
	})
	col, err := collector.New(collector.Config{ConnConfig: cc, PollInterval: 200 * time.Millisecond,
		Source: collector.SourceModeLogical, Slot: slot, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCollector(t, col)

	// The second database: nothing listens on its port.
	downCC := cc.Copy()
	downCC.Host, downCC.Port = "127.0.0.1", uint16(freePort(t))
	downCC.ConnectTimeout = time.Second
	downCol, err := collector.New(collector.Config{ConnConfig: downCC, PollInterval: 200 * time.Millisecond,
		Source: collector.SourceModeNotify, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCollector(t, downCol)

	// The fleet exporter of `pgleader exporter --target app --target down`: each
	// database's series labelled with its name, the process's own (go_*)
	// without.
	fleet, err := exporter.NewFleet([]exporter.Member{{Name: "app", Source: col}, {Name: "down", Source: downCol}},
		exporter.Options{}, collectors.NewGoCollector())
	if err != nil {
		t.Fatal(err)
	}
	// Served twice, as two exporters of one database run for availability: the
	// panels must not count a fault twice.
	h := fleet.Handler(fleet.Ready(slog.New(slog.DiscardHandler)))
	srv, twin := httptest.NewServer(h), httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(twin.Close)

	nodes := map[string]*testnode.Node{}
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		nodes[id] = startNode(t, dsn, id, "billing", "reports")
	}
	// Released before the nodes stop (cleanups run last in, first out).
	t.Cleanup(func() { squatter.Close(context.Background()) })

	prom := startPrometheus(t, strings.TrimPrefix(srv.URL, "http://"), strings.TrimPrefix(twin.URL, "http://"))

	// A leader of billing, seen by the collector, with its gate open (it opens
	// a moment after the grant): its token is the one the failover makes stale.
	var oldEpoch int64
	var stale election.Token
	pgtest.WaitFor(t, "a leader of billing with an open gate", 20*time.Second, func() bool {
		s := col.Snapshot()
		if s == nil {
			return false
		}
		for _, sc := range s.Scopes {
			if sc.Name == "billing" && sc.HasLeader() && nodes[sc.Leader] != nil {
				tok, err := nodes[sc.Leader].Scope("billing").Require(ctx)
				if err != nil || tok.Epoch != sc.Epoch {
					return false
				}
				oldEpoch, stale = sc.Epoch, tok
				return true
			}
		}
		return false
	})
	// node-c supervises a command, as pgleader run records it (same login),
	// once it registered.
	pgtest.WaitFor(t, "node-c registered", 20*time.Second, func() bool {
		var ok bool
		if err := admin.QueryRow(ctx, `SELECT pgleader.node_supervisor('node-c', '{"command":"worker","state":"running","pid":4242,"restarts":0}')`).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	})
	// A few scrapes of the healthy cluster.
	waitProm(t, prom, `pgleader_scope_leader{database="app",scope="billing"}`, 3)

	// The failover: the leader's leadership session ends, as when its process dies.
	var pid int
	if err := admin.QueryRow(ctx, "SELECT holder_pid FROM pgleader.leader_state WHERE scope = 'billing'").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "a new term of billing", 20*time.Second, func() bool {
		s := col.Snapshot()
		for _, sc := range s.Scopes {
			if sc.Name == "billing" && sc.HasLeader() && sc.Epoch > oldEpoch {
				return true
			}
		}
		return false
	})

	// The old leader writes under its old epoch: the database refuses it, and
	// the refusal is reported as the engine's callers do.
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := election.Fence(ctx, tx, stale); !errors.Is(err, election.ErrFenced) {
		t.Fatalf("Fence with the epoch before the failover (%d): %v, want ErrFenced", stale.Epoch, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := election.ReportFenced(ctx, admin, stale, "dashboard test"); err != nil {
		t.Fatal(err)
	}

	// A node stops (cleanly): it shows DOWN. Not node-c, which supervises.
	stopped := "node-a"
	if leaderNow(col, "billing") == stopped {
		stopped = "node-b"
	}
	nodes[stopped].Stop()

	// Every panel query, for the database served, eventually shows what it must.
	tgs := targets(t)
	for key := range faults {
		if !slices.ContainsFunc(tgs, func(tg target) bool { return tg.String() == key }) {
			t.Fatalf("faults names %s, which is no panel query of the dashboard", key)
		}
	}
	pending := map[string]string{}
	eventually(t, "every panel query to show its data", 30*time.Second, func() string {
		clear(pending)
		for _, tg := range tgs {
			got, err := prom.query(tg.instant, expand(tg.expr, "app", time.Since(prom.Started)))
			if err != nil {
				pending[tg.String()] = err.Error()
				continue
			}
			if why := check(got, faults[tg.String()]); why != "" {
				pending[tg.String()] = why
			}
		}
		if len(pending) == 0 {
			return ""
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(pending)) {
			fmt.Fprintf(&b, "\n\t%s: %s", k, pending[k])
		}
		return b.String()
	})

	// The faults by name: the terms timeline shows billing's term before the
	// failover and its successor's, each with its epoch, on one row; Leaders
	// now names billing's new leader; the alerts table names the zombie's
	// fenced write and the squatter.
	results := func(panel string) []sample {
		t.Helper()
		for _, tg := range tgs {
			if tg.panel == panel {
				got, err := prom.query(tg.instant, expand(tg.expr, "app", time.Since(prom.Started)))
				if err != nil {
					t.Fatalf("%s: %v", tg, err)
				}
				return got
			}
		}
		t.Fatalf("no panel %q", panel)
		return nil
	}
	labelSets := func(panel string) []map[string]string {
		t.Helper()
		var out []map[string]string
		for _, s := range results(panel) {
			out = append(out, s.labels)
		}
		return out
	}
	var billingRows int
	var billingTerms []float64
	for _, s := range results("Terms per scope") {
		if s.labels["scope"] == "billing" {
			billingRows++
			for _, v := range s.values {
				if v > 0 && !slices.Contains(billingTerms, v) {
					billingTerms = append(billingTerms, v)
				}
			}
		}
	}
	// Under load a term may last less than a scrape (the nodes' trust window is
	// 400ms): not every epoch shows, but one row, two terms at least, and one
	// after the failover's.
	if billingRows != 1 || len(billingTerms) < 2 || slices.Max(billingTerms) <= float64(oldEpoch) {
		t.Errorf("Terms per scope shows billing in %d rows with terms %v; want one row with a term after %d and an earlier one", billingRows, billingTerms, oldEpoch)
	}
	eventually(t, "Leaders now to name billing's leader", 10*time.Second, func() string {
		var leadersNow []string
		for _, l := range labelSets("Leaders now") {
			if l["scope"] == "billing" {
				leadersNow = append(leadersNow, l["node"])
			}
		}
		got, err := prom.query(true, `pgleader_scope_leader{database="app",scope="billing"}`)
		if err != nil || len(got) == 0 || len(leadersNow) != 1 || leadersNow[0] != got[0].labels["node"] {
			return fmt.Sprintf("Leaders now shows billing led by %v; pgleader_scope_leader says %v (%v)", leadersNow, got, err)
		}
		return ""
	})
	alerts := map[string]string{}
	for _, l := range labelSets("Active alerts") {
		alerts[l["alert"]] = l["scope"] + "/" + l["node"]
	}
	if alerts["fence_rejected"] != "billing/"+stale.Holder || alerts["interference"] != "reports/" {
		t.Errorf("Active alerts: %v; want fence_rejected on billing by %s and interference on reports", alerts, stale.Holder)
	}

	// Each new term counts once in the bars of Leadership changes (at the
	// graph's step, $__interval): their sum over the run is the rise of
	// billing's epoch that Prometheus saw, where changes() over
	// $__rate_interval counted each one in four bars. Failover duration draws
	// the failover as one point, its handover gap (and none for a first term).
	sumOf := func(panel, scope string) (sum float64, points int) {
		for _, s := range results(panel) {
			if s.labels["scope"] == scope {
				for _, v := range s.values {
					sum += v
					points++
				}
			}
		}
		return sum, points
	}
	epochs, err := prom.Query(`pgleader_scope_epoch{database="app",scope="billing"}[10m]`, time.Now())
	if err != nil || len(epochs) == 0 {
		t.Fatalf("billing's epochs: %v, %v", epochs, err)
	}
	var seen []float64
	for _, s := range epochs { // each exporter's samples
		seen = append(seen, s.Values()...)
	}
	changes, _ := sumOf("Leadership changes (failovers and handovers)", "billing")
	if changes != slices.Max(seen)-slices.Min(seen) || changes < 1 {
		t.Errorf("Leadership changes sums to %g new terms of billing; its epoch rose from %g to %g", changes, slices.Min(seen), slices.Max(seen))
	}
	if n, _ := sumOf("Fenced writes rejected", "billing"); n != 1 {
		t.Errorf("Fenced writes rejected sums to %g for billing; want the one refused write", n)
	}
	// results gives a panel's first query: the handover gaps, one point per
	// interval that began a term after another (none for a first term).
	for _, s := range results("Failover duration") {
		if s.labels["scope"] != "billing" {
			continue
		}
		if len(s.values) < 1 || float64(len(s.values)) > changes || slices.Min(s.values) <= 0 {
			t.Errorf("Failover duration shows billing's handover gaps as %v; want one point above 0 per interval with a new term (%g terms)", s.values, changes)
		}
	}

	// The stats count each fault once, though two exporters report it: one
	// scope without a leader (reports), one foreign session, one fenced write
	// rejected (increase() extrapolates a little); as many alerts as the
	// Active alerts table has rows (two at least: the fenced write and the
	// squatter; a loaded machine may add one, as a late node).
	eventually(t, "Alerts firing to count the Active alerts table's rows", 10*time.Second, func() string {
		rows := len(labelSets("Active alerts"))
		got := results("Alerts firing")
		if rows < 2 || len(got) != 1 || got[0].values[0] != float64(rows) {
			return fmt.Sprintf("Alerts firing %+v, %d rows in Active alerts", got, rows)
		}
		return ""
	})
	for panel, want := range map[string][2]float64{
		"Scopes without a leader":         {1, 1},
		"Foreign sessions on scope locks": {1, 1},
		"Fenced writes rejected in range": {1, 1.9},
	} {
		for _, tg := range tgs {
			if tg.panel != panel {
				continue
			}
			got, err := prom.query(tg.instant, expand(tg.expr, "app", time.Since(prom.Started)))
			if err != nil || len(got) != 1 || got[0].values[0] < want[0] || got[0].values[0] > want[1] {
				t.Errorf("%s: %+v, %v; want one series in [%g, %g]", tg, got, err, want[0], want[1])
			}
		}
	}

	// The database whose collector cannot connect: collector_up 0 in
	// Prometheus, and the dashboard's collector panels show it DOWN, alone and
	// among all databases.
	got, err := prom.query(true, `pgleader_collector_up{database="down"}`)
	if err != nil || len(got) != 2 || got[0].values[0] != 0 || got[1].values[0] != 0 {
		t.Errorf(`pgleader_collector_up{database="down"}: %+v, %v; want a series at 0 per exporter`, got, err)
	}
	for _, tg := range tgs {
		if tg.panel != "Collector now" && tg.panel != "Collector up over time" {
			continue
		}
		for _, sel := range []string{"down", ".*", "(app|down)"} {
			got, err := prom.query(tg.instant, expand(tg.expr, sel, time.Since(prom.Started)))
			if err != nil {
				t.Errorf("%s with database %q: %v", tg, sel, err)
				continue
			}
			byDB := map[string]float64{}
			for _, s := range got {
				byDB[s.labels["database"]] = s.values[len(s.values)-1]
			}
			if v, ok := byDB["down"]; !ok || v != 0 {
				t.Errorf("%s with database %q: %v, want down at 0", tg, sel, byDB)
			}
			if sel != "down" && byDB["app"] != 1 {
				t.Errorf("%s with database %q: %v, want app at 1", tg, sel, byDB)
			}
		}
	}
	// What each query showed (go test -v).
	for _, tg := range tgs {
		got, err := prom.query(tg.instant, expand(tg.expr, "app", time.Since(prom.Started)))
		if err != nil {
			t.Errorf("%s: %v", tg, err)
			continue
		}
		var parts []string
		for _, s := range got {
			parts = append(parts, fmt.Sprintf("%v: max %g", without(s.labels, "instance", "job"), slices.Max(s.values)))
		}
		t.Logf("%s: %d series: %s", tg, len(got), strings.Join(parts, "; "))
	}
	// The database variable's choices, as Grafana asks Prometheus for
	// label_values(pgleader_collector_up, database): both databases.
	if got := labelValues(t, prom, "database", "pgleader_collector_up"); !slices.Equal(got, []string{"app", "down"}) {
		t.Errorf("label_values(pgleader_collector_up, database): %v, want [app down]", got)
	}
	// Every query also runs with All and with a multi-selection.
	for _, tg := range tgs {
		for _, sel := range []string{".*", "(app|down)"} {
			if got, err := prom.query(tg.instant, expand(tg.expr, sel, time.Since(prom.Started))); err != nil {
				t.Errorf("%s with database %q: %v", tg, sel, err)
			} else if why := check(got, faults[tg.String()]); why != "" {
				t.Errorf("%s with database %q: %s", tg, sel, why)
			}
		}
	}
	t.Logf("%d panel and annotation queries checked; %s since the test began", len(tgs), time.Since(began).Round(time.Millisecond))
}

// eventually polls cond every 250ms (each poll runs every query of the
// dashboard) until it returns "", or fails t after d with cond's last answer.
func eventually(t *testing.T, what string, d time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:%s", d, what, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func without(m map[string]string, keys ...string) map[string]string {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

func leaderNow(c *collector.Collector, scope string) string {
	for _, sc := range c.Snapshot().Scopes {
		if sc.Name == scope {
			return sc.Leader
		}
	}
	return ""
}

// waitProm waits until Prometheus holds at least n samples of expr's series
// (over the last minute).
func waitProm(t *testing.T, p promServer, expr string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d scrapes of %s", n, expr), 30*time.Second, func() string {
		got, err := p.query(true, fmt.Sprintf("count_over_time(%s[1m])", expr))
		switch {
		case err != nil:
			return err.Error()
		case len(got) == 0 || got[0].values[0] < float64(n):
			return fmt.Sprint(got)
		}
		return ""
	})
}
