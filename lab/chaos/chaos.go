// Package chaos runs pgleader under faults and judges what happened: real
// `pgleader node` processes doing fenced writes (lab/cluster), a fault schedule
// per scenario drawn from a seeded random source, then the history — every node's
// events, pgleader.terms and pgleader.demo_actions — checked by package checker
// (H1–H5, gate overlap, figures, and a vacuity guard: each scenario names the
// footprint it must leave, e.g. "a takeover happened", so a fault that silently did
// nothing fails the run instead of passing it).
//
// Each scenario runs on its own scopes (chaos-<scenario>-<seed>-a/b) with a fresh
// cluster of nodes, so histories never mix. Scenarios that restart PostgreSQL need
// a server the runner owns (the throwaway one); with a user's --dsn they are
// skipped and the verdict says so.
package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/faultnet"
	"github.com/pgleader/pgleader/lab/history"
	"github.com/pgleader/pgleader/lab/pgbouncer"
	"github.com/pgleader/pgleader/lab/pgserver"
)

// Timing of chaos nodes: faster than the defaults (I + T < W < L still holds), so a
// run packs many faults into its duration. Overridable with Options.NodeArgs.
var defaultNodeArgs = []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "150ms",
	"--trust-window", "500ms", "--session-lease", "700ms", "--drain-timeout", "1s",
	"--work-interval", "20ms", "--log-level", "warn"}

// Options configure a run.
type Options struct {
	Bin       string           // pgleader binary for the nodes
	DSN       string           // a migrated database
	Server    *pgserver.Server // the server behind DSN when the runner owns it (restart scenarios); nil otherwise
	Dir       string           // scratch directory
	Seed      int64            // fault schedule; the same seed gives the same schedule
	Duration  time.Duration    // per scenario
	Scenarios []string         // names; empty: all
	NodeArgs  []string         // extra node flags after the chaos timing
	// Mode "lease" runs every node in lease mode through a PgBouncer in
	// transaction mode that the runner starts in front of DSN's server (the
	// harness itself reads the database directly); "" or "lock": lock mode,
	// straight to DSN.
	Mode string
	// NoTestHooks says Bin is the shipped build, whose node has no --test-*
	// flags: the scenarios that need them are skipped, saying why. A lab build
	// (-tags pgleader_lab: cluster.Build, make chaos) has them.
	NoTestHooks bool
	// Supervised runs every node as `pgleader run` (one scope) with a child that
	// does the fenced writes (`pgleader lab-writer`, a lab build), in the
	// scenarios of supervisedScenarios; it adds the supervisor's checks: no two
	// nodes' children running at once, and none alive after the run.
	Supervised bool
	Progress   io.Writer

	nodeDSN string // lease mode: the bouncer's DSN (set by Run)
}

// Result is the verdict of one scenario.
type Result struct {
	Scenario string         `json:"scenario"`
	About    string         `json:"about"`
	Skipped  string         `json:"skipped,omitempty"`
	Faults   int            `json:"faults"`
	Seconds  float64        `json:"seconds"`
	Report   checker.Report `json:"report"`
	Extra    []string       `json:"extra_violations,omitempty"` // runner-level checks (dense epochs, …)
	// ResumeMS are, for the failover scenarios, the times from the moment the new
	// primary accepted writes to the first gate opened on it, one per scope and
	// failover; for the squat scenario, from the squatter's unlock to the next
	// gate opened; in milliseconds.
	ResumeMS []float64 `json:"resume_after_promotion_ms,omitempty"`
	// SquattersNamed is, for the squat scenario, how many single collector reads
	// named the squatter with the interference alert (two per fault: waiting, then
	// holding; a read that did not fails the run).
	SquattersNamed int `json:"squatters_named,omitempty"`
	// Children, for a supervised run: the figures of the children's lives.
	Children *ChildFigures `json:"children,omitempty"`
	// NodeLogin is the login of lock-mode nodes (cluster.NodeRole), or why they
	// run under the harness's own.
	NodeLogin string `json:"node_login,omitempty"`
	Err       string `json:"error,omitempty"` // the run itself failed
}

// OK reports a scenario that ran and passed every check, or was skipped.
func (r Result) OK() bool {
	return r.Skipped != "" || (r.Err == "" && r.Report.OK() && len(r.Extra) == 0)
}

// Names lists the scenarios in the order they run.
func Names() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

// Lookup reports whether name is a scenario.
func Lookup(name string) bool { return slices.Contains(Names(), name) }

// Run runs the selected scenarios one after the other.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Mode != "" && o.Mode != "lock" && o.Mode != "lease" {
		return nil, fmt.Errorf("mode %q: want lock or lease", o.Mode)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Duration <= 0 {
		o.Duration = 20 * time.Second
	}
	if o.Mode == "lease" {
		stop, err := o.startBouncer(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	var out []Result
	for _, sc := range scenarios {
		if len(o.Scenarios) > 0 && !slices.Contains(o.Scenarios, sc.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(o.Progress, "── %s: %s\n", sc.name, sc.about)
		r := o.run(ctx, sc)
		verdict := "PASS"
		switch {
		case r.Skipped != "":
			verdict = "skipped: " + r.Skipped
		case !r.OK():
			verdict = "FAIL"
		}
		fmt.Fprintf(o.Progress, "   %s after %.0fs, %d faults\n", verdict, r.Seconds, r.Faults)
		switch {
		case len(r.ResumeMS) > 0 && r.SquattersNamed > 0:
			fmt.Fprintf(o.Progress, "   squatter named by %d single collector reads; leadership resumed after it let go: %s (p50 / max of %d)\n",
				r.SquattersNamed, resumeSummary(r.ResumeMS), len(r.ResumeMS))
		case len(r.ResumeMS) > 0:
			fmt.Fprintf(o.Progress, "   leadership resumed after the promotion: %s (p50 / max of %d); acknowledged writes lost with the old primary: %d\n",
				resumeSummary(r.ResumeMS), len(r.ResumeMS), r.Report.Figures.LostWithPrimary)
		}
		out = append(out, r)
	}
	return out, ctx.Err()
}

// env is what a scenario's schedule works with.
type env struct {
	o        Options
	c        *cluster.Cluster
	rng      *rand.Rand
	admin    *pgx.Conn
	scopes   []string
	deadline time.Time
	faults   []checker.Fault
	progress io.Writer
	end      int64                      // mono ns when the schedule finished
	proxies  map[string]*faultnet.Proxy // node id → its path to PostgreSQL (viaProxy scenarios)
	dsn      string                     // what nodes and the harness connect to (a pair's multi-host DSN)
	pair     *pair                      // the primary and standby of a failover scenario
	loss     []checker.Window           // where the database may have lost acknowledged commits
	resumes  []time.Duration            // failover scenarios: promotion → first gate open
	// squat scenario: collector reads that named the squatter (each one required)
	squatsNamed int
	// handover scenario: scope → the node that handed it over last (it cools down)
	handedOver map[string]string
	// node id → its network namespace (netns scenarios)
	namespaces map[string]*faultnet.Namespace
}

func (o Options) run(ctx context.Context, sc scenario) Result {
	r := Result{Scenario: sc.name, About: sc.about}
	if sc.needsServer && o.Server == nil {
		r.Skipped = "needs a PostgreSQL server the runner can restart: run without --dsn"
		return r
	}
	if sc.skip != nil {
		if why := sc.skip(); why != "" {
			r.Skipped = why
			return r
		}
	}
	if sc.needsHooks && o.NoTestHooks {
		r.Skipped = "needs the node's fault-test hooks: a lab build (go build -tags pgleader_lab; make chaos uses one)"
		return r
	}
	if o.Mode == "lease" && sc.notLease != "" {
		r.Skipped = "not in lease mode: " + sc.notLease
		return r
	}
	if o.Supervised && !slices.Contains(supervisedScenarios, sc.name) {
		r.Skipped = "not run supervised: its faults act on the node's own network path or workload, which a child does not share"
		return r
	}
	if o.Supervised && o.NoTestHooks {
		r.Skipped = "a supervised run needs a lab build (its child is pgleader lab-writer)"
		return r
	}
	if sc.viaProxy {
		if _, err := upstream(o.DSN); err != nil {
			r.Skipped = err.Error()
			return r
		}
	}
	dsn := o.DSN
	var pr *pair
	if sc.pair != "" {
		if o.Server == nil {
			r.Skipped = "needs PostgreSQL server binaries to build a primary and a standby: run without --dsn"
			return r
		}
		var err error
		if pr, err = newPair(ctx, sc.pair == "sync"); err != nil {
			r.Err = err.Error()
			return r
		}
		defer pr.close()
		dsn = pr.dsn()
	}
	began := time.Now()
	prefix := fmt.Sprintf("chaos-%s-%d", sc.name, o.Seed)
	scopes := []string{prefix + "-a", prefix + "-b"}
	if o.Supervised {
		prefix = fmt.Sprintf("chaos-run-%s-%d", sc.name, o.Seed)
		scopes = []string{prefix + "-a"} // pgleader run: one scope, one child
	}
	dir := filepath.Join(o.Dir, sc.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Err = err.Error()
		return r
	}
	namespaces := map[string]*faultnet.Namespace{}
	nodeDSN, nodeArgs := dsn, append([]string(nil), defaultNodeArgs...)
	if o.Mode == "lease" {
		nodeDSN, nodeArgs = o.nodeDSN, append(nodeArgs, "--mode", "lease")
	} else {
		// Lock-mode nodes log in as a member of the node role, as a service's
		// do: the owner may not signal a superuser's sessions, and nodes under
		// the harness's superuser would never have their doorbells rung.
		var why string
		nodeDSN, why = cluster.NodeLogin(ctx, dsn)
		r.NodeLogin = cmp.Or(why, cluster.NodeRole)
		if why != "" {
			fmt.Fprintf(o.Progress, "   %s\n", why)
		}
	}
	copts := cluster.Options{Bin: o.Bin, DSN: nodeDSN, Dir: dir, Scopes: scopes,
		NodeArgs: append(nodeArgs, o.NodeArgs...)}
	if o.Supervised {
		copts.NodeArgs = withoutFlag(copts.NodeArgs, "--work-interval")
		copts.Supervise = []string{o.Bin, "lab-writer", "--dsn", dsn, "--interval", "20ms", "--log-level", "warn"}
	}
	if sc.netns {
		copts.Wrap = func(id string) []string { return namespaces[id].Exec() }
	}
	c := cluster.New(copts)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	e := &env{o: o, c: c, rng: rand.New(rand.NewPCG(uint64(o.Seed), uint64(len(sc.name)))), admin: admin, dsn: dsn, pair: pr, handedOver: map[string]string{},
		scopes: scopes, deadline: time.Now().Add(o.Duration), progress: o.Progress, namespaces: namespaces}
	runErr := func() error {
		e.proxies = map[string]*faultnet.Proxy{}
		// Deferred first, so it runs after the nodes are stopped: a node must not
		// lose its path to the database in the middle of its shutdown.
		defer func() {
			for _, p := range e.proxies {
				_ = p.Close()
			}
			for _, ns := range namespaces {
				_ = ns.Close()
			}
		}()
		defer c.Close()
		nodes := sc.nodes
		if nodes == 0 {
			nodes = 3
		}
		for i := range nodes {
			id := fmt.Sprintf("n%d", i+1)
			args := sc.nodeArgs
			if sc.viaProxy {
				listen := "127.0.0.1:0"
				if sc.netns {
					ns, err := faultnet.NewNamespace(i + 1)
					if err != nil {
						return err
					}
					namespaces[id] = ns
					listen = ns.HostIP + ":0"
				}
				dsn, p, err := proxied(id, listen, nodeDSN)
				if err != nil {
					return err
				}
				e.proxies[id] = p
				args = append(append([]string(nil), args...), "--dsn", dsn) // the last --dsn wins
			}
			if _, err := c.Start(id, args...); err != nil {
				return err
			}
		}
		// Every node campaigns before the first fault: a node still starting when
		// the schedule strikes (a server restart, say) would take no part in the run.
		if err := e.awaitCampaigning(ctx, nodes); err != nil {
			return err
		}
		err := sc.run(ctx, e)
		// The run ends here, before the nodes are stopped: handovers during the
		// teardown are not part of it (the checker ignores them for figures and
		// footprints, and still holds them to H1, H2 and H5).
		e.end = monotime.Now()
		return err
	}()
	e.admin.Close(context.Background())
	r.Faults = len(e.faults)
	r.SquattersNamed = e.squatsNamed
	for _, d := range e.resumes {
		r.ResumeMS = append(r.ResumeMS, float64(d.Microseconds())/1000)
	}
	r.Seconds = time.Since(began).Seconds()
	if runErr != nil {
		r.Err = runErr.Error()
	}
	h, err := e.history(ctx, prefix)
	if err != nil {
		r.Err = strings.TrimSpace(r.Err + "; " + err.Error())
		return r
	}
	r.Report = checker.Check(h, sc.expect)
	r.Extra = sc.extraChecks(h)
	if o.Supervised {
		// The guards of the nodes killed at teardown record their children's
		// exits after the last read: wait for them, then read again.
		time.Sleep(200 * time.Millisecond)
		_, _ = c.Poll()
		v, figs := childChecks(c.Events())
		r.Extra, r.Children = append(r.Extra, v...), figs
	}
	// S5: no overlap of gates in any scenario, the pause between gate check and
	// write included (there the stale write lands outside every gate, and the
	// fence refuses it: StaleAccepted is H3's business).
	if o := r.Report.Figures.GateOverlap; o > 0 {
		r.Extra = append(r.Extra, fmt.Sprintf("gates of different nodes were open at once for %v in total", o))
		for i, ov := range r.Report.Figures.Overlaps {
			if i == 5 {
				r.Extra = append(r.Extra, fmt.Sprintf("  … and %d more", len(r.Report.Figures.Overlaps)-i))
				break
			}
			r.Extra = append(r.Extra, fmt.Sprintf("  %s: %s from mono %d ; %s %s, %s %s)", ov.A.Scope, ov,
				max(ov.A.Start, ov.B.Start), ov.A.Node, gateEnd(ov.A), ov.B.Node, gateEnd(ov.B)))
		}
	}
	return r
}

// history collects what the scenario left: events, terms and writes of its scopes.
func (e *env) history(ctx context.Context, _ string) (checker.History, error) {
	if _, err := e.c.Poll(); err != nil {
		return checker.History{}, err
	}
	end := e.end
	if end == 0 {
		end = monotime.Now()
	}
	h, err := checker.ReadHistory(ctx, e.dsn, e.scopes, e.c.Events(), e.faults, end)
	h.DataLoss = e.loss
	return h, err
}

// fault records a fault the schedule applied.
func (e *env) fault(kind, node string, start, end int64) {
	e.faults = append(e.faults, checker.Fault{Kind: kind, Node: node, StartMono: start, EndMono: end})
}

func (e *env) running() bool { return time.Now().Before(e.deadline) }

// pause sleeps a random time in [lo, hi), or until the scenario's deadline.
func (e *env) pause(ctx context.Context, lo, hi time.Duration) {
	d := lo
	if hi > lo {
		d += time.Duration(e.rng.Int64N(int64(hi - lo)))
	}
	if left := time.Until(e.deadline); d > left {
		d = max(left, 0)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// leader waits until some node leads scope and has acknowledged a write in that
// term, and returns it with its epoch.
func (e *env) leader(ctx context.Context, scope string) (*cluster.Node, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := e.c.Poll(); err != nil {
			return nil, 0, err
		}
		if id, epoch := e.c.Leader(scope); id != "" {
			if _, ok := lastMatch(e.c.Events(), func(r eventlog.Record) bool {
				return r.Node == id && r.Scope == scope && r.Event == "action_ok" && r.Epoch == epoch
			}); ok {
				return e.c.Node(id), epoch, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("no working leader of %s within 30s", scope)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// awaitCampaigning waits until the scenario's n nodes have each registered and hold
// their leadership session's beacon.
func (e *env) awaitCampaigning(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	for {
		var up int
		// Live as the schema judges it: a lock-mode node's beacon is held, a
		// lease-mode node heartbeats.
		err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pgleader.live_nodes(pgleader.lock_map()) n
		        WHERE n.node_id = ANY ($1)`, ids).Scan(&up)
		if err == nil && up == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes campaigning after 30s (last error: %v)", up, n, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leaderEpochs waits for a working leader of every scope and returns their epochs.
func (e *env) leaderEpochs(ctx context.Context) (map[string]int64, error) {
	epochs := map[string]int64{}
	for _, s := range e.scopes {
		_, epoch, err := e.leader(ctx, s)
		if err != nil {
			return nil, err
		}
		epochs[s] = epoch
	}
	return epochs, nil
}

// reconnectAdmin replaces the harness's admin session after the server it was on
// went away (a restart, a failover).
func (e *env) reconnectAdmin(ctx context.Context) error {
	_ = e.admin.Close(ctx)
	admin, err := reconnect(ctx, e.dsn)
	if err != nil {
		return err
	}
	e.admin = admin
	return nil
}

// newEpoch waits until some node's gate opens for scope with an epoch above epoch.
func (e *env) newEpoch(ctx context.Context, scope string, epoch int64) (eventlog.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r, ok := lastMatch(e.c.Events(), func(r eventlog.Record) bool {
		return r.Scope == scope && r.Event == "gate_open" && r.Epoch > epoch
	}); ok {
		return r, nil
	}
	return e.c.WaitFor(ctx, func(r eventlog.Record) bool {
		return r.Scope == scope && r.Event == "gate_open" && r.Epoch > epoch
	})
}

func lastMatch(rs []eventlog.Record, match func(eventlog.Record) bool) (eventlog.Record, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if match(rs[i]) {
			return rs[i], true
		}
	}
	return eventlog.Record{}, false
}

// pick returns a random element.
func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// reconnect connects to dsn, retrying for up to 30s (a server coming back up).
func reconnect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startBouncer starts the PgBouncer (transaction pooling) of a lease-mode run in
// front of DSN's server and points the nodes at it.
func (o *Options) startBouncer(ctx context.Context) (func(), error) {
	b, via, err := pgbouncer.Front(ctx, o.DSN, "transaction", nil)
	if err != nil {
		return nil, fmt.Errorf("lease mode: %w", err)
	}
	o.nodeDSN = via
	fmt.Fprintf(o.Progress, "chaos: lease mode: every node through PgBouncer (transaction pooling) on 127.0.0.1:%d\n", b.Port)
	return func() { _ = b.Close() }, nil
}

// upstream returns the host:port of a URL DSN: network faults proxy that address.
func upstream(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("network scenarios need a URL DSN with host and port (postgres://user@host:5432/db)")
	}
	return u.Host, nil
}

// proxied starts a faultnet proxy on listen to dsn's server and returns dsn
// rewritten to go through it.
func proxied(name, listen, dsn string) (string, *faultnet.Proxy, error) {
	up, err := upstream(dsn)
	if err != nil {
		return "", nil, err
	}
	p, err := faultnet.NewOn(name, listen, up)
	if err != nil {
		return "", nil, err
	}
	u, _ := url.Parse(dsn)
	u.Host = p.Addr()
	return u.String(), p, nil
}

// resumeSummary formats the median and maximum of failover resumption times.
func resumeSummary(ms []float64) string {
	s := slices.Clone(ms)
	slices.Sort(s)
	return fmt.Sprintf("%.1f ms / %.1f ms", s[len(s)/2], s[len(s)-1])
}

// gateEnd says how a gate interval ended, for an overlap's report.
func gateEnd(iv history.Interval) string {
	if iv.Closed {
		return "closed (" + iv.Reason + ")"
	}
	return "open until its trust ran out"
}
