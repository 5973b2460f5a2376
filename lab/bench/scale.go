package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
)

// ScaleOptions configure a scale benchmark: Nodes processes, each campaigning for
// the same Scopes scopes.
type ScaleOptions struct {
	Bin        string        // pgleader binary for the nodes (and the limit's holder)
	DSN        string        // a migrated database
	Dir        string        // scratch directory (events files, logs)
	Nodes      int           // node processes (≥ 2)
	Scopes     int           // scopes every node campaigns for (≥ 1)
	LimitN     int           // physical-limit samples (0: none)
	IdleWindow time.Duration // idle load, CPU and memory window; default 10s
	NodeArgs   []string      // extra node flags (timing, a scope cap, …)
	Progress   io.Writer     // progress lines (may be nil)
	Timeout    time.Duration // per phase (all led, settled, all re-led); default 2m
}

// NodeFigures are one node's figures in a scale run.
type NodeFigures struct {
	Node        string         `json:"node"`
	PID         int            `json:"pid"`
	Led         int            `json:"led"` // scopes it led once settled
	Connections int            `json:"connections"`
	ByRole      map[string]int `json:"connections_by_role"` // application_name "pgleader <role> <node>"
	RSSKiB      int64          `json:"rss_kib"`             // VmRSS at the end of the idle window
	IdleCPUMS   float64        `json:"idle_cpu_ms"`         // utime+stime over the idle window
	IdleCPUPct  float64        `json:"idle_cpu_percent"`    // of one core, over the idle window
	Killed      bool           `json:"killed,omitempty"`
}

// ScaleReport is the result of a scale run.
type ScaleReport struct {
	Machine map[string]string `json:"machine"`
	Timing  map[string]string `json:"timing"`
	Nodes   int               `json:"nodes"`
	Scopes  int               `json:"scopes"`
	// AllLedMS: from starting the first node to the last scope's first gate open.
	AllLedMS float64 `json:"all_led_ms"`
	Led      int     `json:"led"` // scopes led by then (Scopes when all were)
	// Connections of the nodes once settled, and the server's max_connections.
	Connections    int           `json:"connections"`
	MaxConnections int           `json:"max_connections"`
	PerNode        []NodeFigures `json:"per_node"`
	Load           *Load         `json:"idle_load,omitempty"`
	Limit          *Stat         `json:"limit,omitempty"`
	// Takeover: kill -9 of Killed (the node leading the most scopes, KilledLed of
	// them) → a successor's gate open, one sample per scope it led; ReLed of them
	// were led again within the timeout.
	Takeover  *Stat  `json:"takeover,omitempty"`
	Killed    string `json:"killed,omitempty"`
	KilledLed int    `json:"killed_led"`
	ReLed     int    `json:"re_led"`
	AllReLed  bool   `json:"all_re_led"`
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// RunScale runs the scale benchmark. On an error it returns what it measured so far.
func RunScale(ctx context.Context, o ScaleOptions) (*ScaleReport, error) {
	if o.Nodes < 2 || o.Scopes < 1 {
		return nil, fmt.Errorf("need at least 2 nodes and 1 scope (got nodes=%d, scopes=%d)", o.Nodes, o.Scopes)
	}
	if o.IdleWindow <= 0 {
		o.IdleWindow = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := &ScaleReport{Machine: machine(ctx, o.DSN), Timing: timing(o.NodeArgs), Nodes: o.Nodes, Scopes: o.Scopes}
	tag := time.Now().Format("150405.000")
	scopes := make([]string, o.Scopes)
	for i := range scopes {
		scopes[i] = fmt.Sprintf("bench-scale-%s-%04d", tag, i+1)
	}
	c := cluster.New(cluster.Options{Bin: o.Bin, DSN: o.DSN, Dir: o.Dir, Scopes: scopes,
		NodeArgs: append([]string{"--log-level", "warn"}, o.NodeArgs...)})
	defer c.Close()
	w := &scaleWatch{o: o, c: c, scopes: scopes, observed: map[string]map[string]int64{}, firstOpen: map[string]int64{}}

	t0 := monotime.Now()
	ids := make([]string, o.Nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("scale-%d", i+1)
		if _, err := c.Start(ids[i]); err != nil {
			return rep, err
		}
	}
	fmt.Fprintf(o.Progress, "scale: %d nodes × %d scopes started\n", o.Nodes, o.Scopes)
	err := w.until(ctx, "every scope led", func() (bool, string) {
		return len(w.firstOpen) == len(scopes), fmt.Sprintf("%d/%d scopes led", len(w.firstOpen), len(scopes))
	})
	rep.Led = len(w.firstOpen)
	for _, at := range w.firstOpen {
		rep.AllLedMS = max(rep.AllLedMS, ms(at-t0))
	}
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "scale: every scope led %.0f ms after the start\n", rep.AllLedMS)
	if err := w.until(ctx, "every follower follows", w.settled); err != nil {
		return rep, err
	}

	admin, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		return rep, err
	}
	defer admin.Close(context.Background())
	_ = admin.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&rep.MaxConnections)
	byNode, err := nodeConnections(ctx, admin, ids)
	if err != nil {
		return rep, err
	}
	led := map[string]int{}
	for _, s := range scopes {
		n, _ := w.leadership.Leader(s)
		led[n]++
	}
	for _, id := range ids {
		f := NodeFigures{Node: id, PID: c.Node(id).PID(), Led: led[id], ByRole: byNode[id]}
		for _, k := range f.ByRole {
			f.Connections += k
		}
		rep.Connections += f.Connections
		rep.PerNode = append(rep.PerNode, f)
	}

	// Idle: transactions, CPU and memory over one window.
	before := make([]procSample, len(ids))
	for i, f := range rep.PerNode {
		if before[i], err = readProc(f.PID); err != nil {
			return rep, err
		}
	}
	began := time.Now()
	if rep.Load, err = idleLoad(ctx, o.DSN, o.Nodes, heartbeatInterval(o.NodeArgs), o.IdleWindow, o.Progress); err != nil {
		return rep, err
	}
	wall := time.Since(began)
	for i := range rep.PerNode {
		f := &rep.PerNode[i]
		after, err := readProc(f.PID)
		if err != nil {
			return rep, err
		}
		f.RSSKiB = after.rssKiB
		f.IdleCPUMS = float64(after.ticks-before[i].ticks) * 1000 / clockTicks
		f.IdleCPUPct = f.IdleCPUMS / float64(wall.Milliseconds()) * 100
	}
	rep.Load.Note = fmt.Sprintf("transactions committed by the whole database while %d nodes × %d scopes idled", o.Nodes, o.Scopes)
	if _, err := w.poll(); err != nil { // the idle window's events (heartbeats)
		return rep, err
	}

	if o.LimitN > 0 {
		xs, err := limitSamples(ctx, o.Bin, o.DSN, o.LimitN, 30*time.Second, o.Progress)
		if err != nil {
			return rep, fmt.Errorf("limit: %w", err)
		}
		s := summarize(limitStatName, limitWhat+" (same server, this run, beside the idle nodes)", xs)
		rep.Limit = &s
	}

	// kill -9 of the busiest leader → each of its scopes led again.
	busiest := rep.PerNode[0]
	for _, f := range rep.PerNode {
		if f.Led > busiest.Led {
			busiest = f
		}
	}
	rep.Killed = busiest.Node
	old := map[string]int64{}
	for _, s := range scopes {
		if n, e := w.leadership.Leader(s); n == busiest.Node {
			old[s] = e
		}
	}
	rep.KilledLed = len(old)
	for i := range rep.PerNode {
		rep.PerNode[i].Killed = rep.PerNode[i].Node == busiest.Node
	}
	fmt.Fprintf(o.Progress, "scale: kill -9 %s, which leads %d scopes\n", busiest.Node, len(old))
	w.victim = busiest.Node
	killedAt, err := fault.Kill9.Apply(ctx, fault.Target{Node: c.Node(busiest.Node)})
	if err != nil {
		return rep, err
	}
	taken := map[string]float64{}
	w.onRecord = func(r eventlog.Record) {
		if e, ok := old[r.Scope]; ok && r.Event == "gate_open" && r.Epoch > e && r.Node != busiest.Node {
			if _, seen := taken[r.Scope]; !seen {
				taken[r.Scope] = ms(r.MonoNS - killedAt)
			}
		}
	}
	err = w.until(ctx, "every scope of the killed node led again", func() (bool, string) {
		return len(taken) == len(old), fmt.Sprintf("%d/%d led again", len(taken), len(old))
	})
	samples := make([]float64, 0, len(taken))
	for _, s := range scopes {
		if x, ok := taken[s]; ok {
			samples = append(samples, x)
		}
	}
	rep.ReLed, rep.AllReLed = len(taken), len(taken) == len(old)
	st := summarize("scale takeover", fmt.Sprintf("kill -9 of the node leading the most scopes → a successor's gate open, per scope (%d nodes × %d scopes)", o.Nodes, o.Scopes), samples)
	st.VsLimit = vsLimit(st, rep.Limit)
	rep.Takeover = &st
	return rep, err
}

// scaleWatch follows the cluster's events for many scopes incrementally (Poll's
// fresh records), so a phase costs no rescan of everything read before.
type scaleWatch struct {
	o          ScaleOptions
	c          *cluster.Cluster
	scopes     []string
	leadership cluster.Leadership
	observed   map[string]map[string]int64 // scope → follower → epoch it last saw lead
	firstOpen  map[string]int64            // scope → mono ns of its first gate open
	onRecord   func(eventlog.Record)
	victim     string // the node the benchmark kills: its exit is expected
}

// poll folds the fresh records in; a node that exited ends the run, with its last
// log line.
func (w *scaleWatch) poll() ([]eventlog.Record, error) {
	fresh, err := w.c.Poll()
	for _, r := range fresh {
		w.leadership.Apply(r)
		switch r.Event {
		case "gate_open":
			if at, ok := w.firstOpen[r.Scope]; !ok || r.MonoNS < at {
				w.firstOpen[r.Scope] = r.MonoNS
			}
		case "leader_observed":
			if w.observed[r.Scope] == nil {
				w.observed[r.Scope] = map[string]int64{}
			}
			w.observed[r.Scope][r.Node] = r.Epoch
		case cluster.ProcessExit:
			if r.Node != w.victim {
				return fresh, fmt.Errorf("node %s exited (%s): %s", r.Node, r.Reason, lastLogLine(filepath.Join(w.o.Dir, r.Node+".log")))
			}
		}
		if w.onRecord != nil {
			w.onRecord(r)
		}
	}
	return fresh, err
}

// until polls until done reports true, or the phase's timeout.
func (w *scaleWatch) until(ctx context.Context, phase string, done func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	lastReport := time.Now()
	for {
		if _, err := w.poll(); err != nil {
			return err
		}
		ok, status := done()
		if ok {
			return nil
		}
		if time.Since(lastReport) >= 2*time.Second {
			fmt.Fprintf(w.o.Progress, "scale: waiting until %s: %s\n", phase, status)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s after %v: %w", phase, status, w.o.Timeout, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// settled reports whether every running node other than a scope's leader has seen
// that leader's epoch, for every scope: every follower waits.
func (w *scaleWatch) settled() (bool, string) {
	running := w.c.Running()
	lagging := 0
	for _, s := range w.scopes {
		leader, epoch := w.leadership.Leader(s)
		if leader == "" {
			lagging += len(running)
			continue
		}
		for _, n := range running {
			if n.ID != leader && w.observed[s][n.ID] != epoch {
				lagging++
			}
		}
	}
	return lagging == 0, fmt.Sprintf("%d scope×follower pairs not following yet", lagging)
}

// nodeConnections counts the server connections of each node by role, from the
// application_name the engine gives them ("pgleader <role> <node id>", cut at 63
// bytes, PostgreSQL's limit).
func nodeConnections(ctx context.Context, conn *pgx.Conn, ids []string) (map[string]map[string]int, error) {
	rows, err := conn.Query(ctx, `SELECT application_name, count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'pgleader %' GROUP BY 1`)
	if err != nil {
		return nil, err
	}
	type group struct {
		app string
		n   int
	}
	groups, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (group, error) {
		var g group
		err := r.Scan(&g.app, &g.n)
		return g, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int{}
	for _, g := range groups {
		role, rest, ok := strings.Cut(strings.TrimPrefix(g.app, "pgleader "), " ")
		if !ok {
			continue
		}
		for _, id := range ids {
			if rest == id || (len(g.app) == 63 && strings.HasPrefix(id, rest)) {
				if out[id] == nil {
					out[id] = map[string]int{}
				}
				out[id][role] += g.n
				break
			}
		}
	}
	return out, nil
}

// procSample is a process's CPU time (utime+stime, in clock ticks) and resident
// memory, from /proc.
type procSample struct {
	ticks  int64
	rssKiB int64
}

func readProc(pid int) (procSample, error) {
	var p procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// The command name (field 2) may hold spaces and parentheses: fields are
	// counted from the last ')'. utime and stime are fields 14 and 15.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return p, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return p, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		p.ticks += n
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			p.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return p, nil
}

// lastLogLine is the last non-empty line of a node's log (its error, when it
// refused to start).
func lastLogLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
