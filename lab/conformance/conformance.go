// Package conformance checks a node implementation of pgleader's SQL protocol
// written outside this repository — in Python, Rust, C#, anything that speaks
// PostgreSQL — against the protocol (docs/protocol.md) and beside the reference,
// `pgleader node`: the "foreign" node runs with two `pgleader node` processes
// on one scope, every one of them doing fenced writes, and the kit applies the
// faults that concern the foreign node, in both directions: it is killed,
// stopped, frozen, its session terminated, the server restarted under it; it is
// asked to resign and to hand over, and handed the scope; it must take over
// from a reference node that crashed or froze.
//
// Each fault is a scenario of its own, on its own scope
// (conformance-<fault>-<seed>), with fresh processes, applied Rounds times. Its
// history — every node's events file, pgleader.terms, pgleader.demo_actions —
// is judged as chaos judges it (package checker: H1–H5, a footprint that proves
// the fault did something), and further:
//
//   - gates of two nodes never open at once (no fault here allows it);
//   - each round, the node that must lead next does (a reference node after the
//     foreign node was killed, the foreign node after a handover to it, …);
//   - a term the foreign node ended itself records the reason the protocol
//     names (shutdown after SIGTERM, resigned, handed_over), and the foreign
//     node exits 0 after SIGTERM;
//   - the foreign node campaigns again after every fault that left it alive,
//     and after its restart;
//   - its events file keeps the contract (obligations.go): well-formed lines,
//     each gate_open after its term's acquired, a trust no longer than the
//     trust window it registered, action outcomes with request ids, none
//     before its gate opened.
//
// Across the scenarios, takeovers must happen in both directions: from the
// foreign node to a reference node and back.
//
// The foreign node's obligations (the command line, the events it writes, its
// fenced writes into pgleader.demo_actions) are docs/protocol.md §16;
// docs/conformance.md says how to run the kit and read a failure.
package conformance

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/chaos"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgserver"
)

// Node ids: the foreign node sorts between the reference nodes, so the ring
// (node_id order) has it both watch a reference node and be watched by one.
const (
	Foreign = "n2-foreign"
	ref1    = "n1-ref"
	ref2    = "n3-ref"
)

var refs = []string{ref1, ref2}

// RefArgs is the timing and workload of the reference nodes: faster than the
// defaults (I + T < W < L holds), a fenced write every 20 ms.
var RefArgs = []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "150ms",
	"--trust-window", "500ms", "--session-lease", "700ms", "--drain-timeout", "1s",
	"--work-interval", "20ms", "--log-level", "warn"}

// waitBound bounds every wait of the kit for the nodes: a leader, a new term,
// a node campaigning again. A foreign node's session lease must be well below.
const waitBound = 30 * time.Second

// Options configure a run.
type Options struct {
	Bin    string           // pgleader: the reference nodes, and the operator's handover and resign
	Node   Template         // the foreign node's command line
	DSN    string           // a migrated database
	Server *pgserver.Server // the server behind DSN when the kit owns it (the restart fault); nil: that fault is skipped
	Dir    string           // scratch: events files and logs, one directory per scope
	Seed   int64            // scope names and random choices
	Rounds int              // times each fault strikes (default 2)
	Faults []string         // names; empty: all
	// RefArgs are extra flags for the reference nodes, after RefArgs.
	RefArgs  []string
	Progress io.Writer
}

// Report is the verdict of a run.
type Report struct {
	Node    string         `json:"node"`
	Seed    int64          `json:"seed"`
	Results []chaos.Result `json:"results"`
	// ToForeign and FromForeign count the takeovers (a new term by another
	// node than the previous leader, after a fault) towards the foreign node and
	// away from it, over every scenario.
	ToForeign   int `json:"takeovers_to_foreign"`
	FromForeign int `json:"takeovers_from_foreign"`
	// ToForeignMS and FromForeignMS are, for each round whose fault ended a
	// term, the time from the fault to the next term's gate_open, in
	// milliseconds: when the foreign node opened it, and when a reference node
	// did after the foreign node's term.
	ToForeignMS   []float64 `json:"takeover_by_foreign_ms,omitempty"`
	FromForeignMS []float64 `json:"takeover_from_foreign_ms,omitempty"`
	// Missing names what the whole run should have shown and did not (a
	// direction of takeover), when every fault ran.
	Missing []string `json:"missing,omitempty"`
}

// OK reports a run in which every scenario passed (or was skipped) and
// nothing is missing.
func (r Report) OK() bool {
	if len(r.Missing) > 0 {
		return false
	}
	for _, s := range r.Results {
		if !s.OK() {
			return false
		}
	}
	return true
}

// Names lists the faults in the order they run.
func Names() []string {
	var out []string
	for _, f := range faults {
		out = append(out, f.name)
	}
	return out
}

// Run runs the selected faults one after the other.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Rounds <= 0 {
		o.Rounds = 2
	}
	for _, name := range o.Faults {
		if !slices.Contains(Names(), name) {
			return Report{}, fmt.Errorf("unknown fault %q: choose from %s", name, strings.Join(Names(), ", "))
		}
	}
	rep := Report{Node: o.Node.String(), Seed: o.Seed}
	all := true
	for _, f := range faults {
		if len(o.Faults) > 0 && !slices.Contains(o.Faults, f.name) {
			all = false
			continue
		}
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(o.Progress, "── %s: %s\n", f.name, f.about)
		r, to, from, byF, fromF := o.run(ctx, f)
		verdict := "PASS"
		switch {
		case r.Skipped != "":
			verdict, all = "skipped: "+r.Skipped, false
		case !r.OK():
			verdict = "FAIL"
		}
		fmt.Fprintf(o.Progress, "   %s after %.0fs, %d faults\n", verdict, r.Seconds, r.Faults)
		rep.Results = append(rep.Results, r)
		rep.ToForeign += to
		rep.FromForeign += from
		rep.ToForeignMS = append(rep.ToForeignMS, byF...)
		rep.FromForeignMS = append(rep.FromForeignMS, fromF...)
	}
	if all && ctx.Err() == nil {
		if rep.ToForeign == 0 {
			rep.Missing = append(rep.Missing, "no takeover by the foreign node from a reference node")
		}
		if rep.FromForeign == 0 {
			rep.Missing = append(rep.Missing, "no takeover by a reference node from the foreign node")
		}
	}
	return rep, ctx.Err()
}

// WriteReport prints the verdict of every scenario (chaos's table), then what
// is missing and the verdict of the run.
func WriteReport(w io.Writer, r Report) {
	chaos.WriteTable(w, r.Results)
	fmt.Fprintf(w, "\ntakeovers: %d from a reference node to the foreign node, %d from the foreign node to a reference node\n",
		r.ToForeign, r.FromForeign)
	fmt.Fprintf(w, "fault to the next gate_open: by the foreign node %s; by a reference node after the foreign node %s\n",
		spread(r.ToForeignMS), spread(r.FromForeignMS))
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing: %s\n", m)
	}
	failed, skipped := 0, 0
	for _, s := range r.Results {
		switch {
		case s.Skipped != "":
			skipped++
		case !s.OK():
			failed++
		}
	}
	switch {
	case !r.OK():
		fmt.Fprintf(w, "NOT CONFORMANT: %d of %d faults failed (seed %d): %s\n", failed, len(r.Results), r.Seed, r.Node)
	case skipped > 0 || len(r.Results) < len(faults):
		fmt.Fprintf(w, "conformant under the %d faults run of %d, %d skipped (seed %d): %s\n",
			len(r.Results)-skipped, len(faults), skipped, r.Seed, r.Node)
	default:
		fmt.Fprintf(w, "conformant under all %d faults (seed %d): %s\n", len(r.Results), r.Seed, r.Node)
	}
}

// env is what a scenario works with.
type env struct {
	o      Options
	f      fault
	c      *cluster.Cluster
	rng    *rand.Rand
	admin  *pgx.Conn
	scope  string
	dir    string
	faults []checker.Fault
	broken []string // obligations the foreign node broke during the rounds
	// takeover times (ms), fault to the next gate_open: by the foreign node,
	// and by a reference node after the foreign node
	byForeign, fromForeign []float64
	end                    int64 // mono ns when the rounds finished
}

func (o Options) run(ctx context.Context, f fault) (r chaos.Result, to, from int, byForeign, fromForeign []float64) {
	r = chaos.Result{Scenario: f.name, About: f.about}
	if f.needsServer && o.Server == nil {
		r.Skipped = "needs a PostgreSQL server the kit can restart: run without --dsn"
		return r, 0, 0, nil, nil
	}
	began := time.Now()
	scope := fmt.Sprintf("conformance-%s-%d", f.name, o.Seed)
	// A scope's history is judged whole: one that has some already (the same
	// seed run twice on this database) would mix two runs.
	dir := filepath.Join(o.Dir, scope)
	if err := os.Mkdir(dir, 0o755); err != nil {
		r.Err = fmt.Sprintf("%v: run with another --seed, or another scratch directory", err)
		return r, 0, 0, nil, nil
	}
	c := cluster.New(cluster.Options{Bin: o.Bin, DSN: o.DSN, Dir: dir, Scopes: []string{scope},
		NodeArgs: append(slices.Clone(RefArgs), o.RefArgs...), Env: []string{"DATABASE_URL=" + o.DSN}})
	admin, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		r.Err = err.Error()
		return r, 0, 0, nil, nil
	}
	var used bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgleader.terms WHERE scope = $1)
	        OR EXISTS (SELECT 1 FROM pgleader.demo_actions WHERE scope = $1)`, scope).Scan(&used); err != nil || used {
		_ = admin.Close(ctx)
		r.Err = fmt.Sprintf("scope %s has a history in this database already (%v): run with another --seed", scope, err)
		return r, 0, 0, nil, nil
	}
	e := &env{o: o, f: f, c: c, admin: admin, scope: scope, dir: dir,
		rng: rand.New(rand.NewPCG(uint64(o.Seed), uint64(len(f.name))))}
	runErr := func() error {
		defer c.Close()
		if err := e.setUp(ctx); err != nil {
			return err
		}
		// Faults strike a settled cluster: every node's ring watch aimed.
		e.pause(ctx, 500*time.Millisecond, 700*time.Millisecond)
		for round := 0; round < o.Rounds && ctx.Err() == nil; round++ {
			if err := e.round(ctx); err != nil {
				return fmt.Errorf("round %d: %w", round+1, err)
			}
		}
		e.end = monotime.Now() // before the nodes are stopped: teardown is not part of the run
		return nil
	}()
	_ = e.admin.Close(context.Background())
	r.Faults, r.Seconds = len(e.faults), time.Since(began).Seconds()
	if runErr != nil {
		r.Err = runErr.Error() + " (logs: " + dir + ")"
	}
	if _, err := c.Poll(); err != nil {
		r.Err = strings.TrimSpace(r.Err + "; " + err.Error())
		return r, 0, 0, nil, nil
	}
	end := e.end
	if end == 0 {
		end = monotime.Now()
	}
	h, err := checker.ReadHistory(ctx, o.DSN, []string{scope}, c.Events(), e.faults, end)
	if err != nil {
		r.Err = strings.TrimSpace(r.Err + "; " + err.Error())
		return r, 0, 0, nil, nil
	}
	r.Report = checker.Check(h, f.expect)
	if d := r.Report.Figures.GateOverlap; d > 0 {
		r.Extra = append(r.Extra, fmt.Sprintf("gates of two nodes were open at once for %v in total", d))
		for i, ov := range r.Report.Figures.Overlaps {
			if i == 5 {
				break
			}
			r.Extra = append(r.Extra, "  "+ov.String())
		}
	}
	r.Extra = append(r.Extra, e.broken...)
	w, err := e.trustWindow(ctx)
	if err != nil {
		r.Extra = append(r.Extra, err.Error())
	}
	r.Extra = append(r.Extra, recordChecks(c.Events(), Foreign, scope, w)...)
	to, from = directions(h, scope)
	return r, to, from, e.byForeign, e.fromForeign
}

// setUp starts the nodes, the one that must lead first alone, and waits until
// it leads (with a write acknowledged) and every node campaigns.
func (e *env) setUp(ctx context.Context) error {
	first, then := []string{Foreign}, refs
	if e.f.leader == "ref" {
		first, then = refs, []string{Foreign}
	}
	for _, id := range first {
		if err := e.start(id); err != nil {
			return err
		}
	}
	if _, _, err := e.working(ctx); err != nil {
		if e.f.leader == "foreign" {
			return fmt.Errorf("the foreign node, alone, did not lead with a write acknowledged (action_ok) within %v: see %s", waitBound, filepath.Join(e.dir, Foreign+".log"))
		}
		return err
	}
	for _, id := range then {
		if err := e.start(id); err != nil {
			return err
		}
	}
	for _, id := range append(first, then...) {
		if err := e.campaigning(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// round strikes once: the right node leads, the fault strikes, the next term
// opens (by the node it must), the fault is undone, everyone campaigns again.
func (e *env) round(ctx context.Context) error {
	leader, epoch, err := e.arrange(ctx)
	if err != nil {
		return err
	}
	n := e.c.Node(leader)
	t0 := monotime.Now()
	s, err := e.f.strike(ctx, e, n, epoch)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", e.f.name, leader, err)
	}
	next, err := e.next(ctx, epoch)
	if err != nil {
		if s.undo != nil {
			_ = s.undo(ctx)
		}
		return fmt.Errorf("after %s on %s (epoch %d): %w", e.f.name, leader, epoch, err)
	}
	if s.at != 0 {
		t0 = s.at
	}
	end := t0
	if s.undo != nil {
		if err := s.undo(ctx); err != nil {
			return fmt.Errorf("undoing %s on %s: %w", e.f.name, leader, err)
		}
		end = monotime.Now()
	}
	e.faults = append(e.faults, checker.Fault{Kind: e.f.name, Node: leader, StartMono: t0, EndMono: end})
	took := float64(next.MonoNS-t0) / 1e6
	switch {
	case next.Node == Foreign && leader != Foreign:
		e.byForeign = append(e.byForeign, took)
	case next.Node != Foreign && leader == Foreign:
		e.fromForeign = append(e.fromForeign, took)
	}
	switch want := e.f.next; {
	case s.nextBy != "" && next.Node != s.nextBy:
		e.broke("after %s on %s (epoch %d), %s led next (epoch %d); want %s", e.f.name, leader, epoch, next.Node, next.Epoch, s.nextBy)
	case want == "foreign" && next.Node != Foreign:
		e.broke("after %s on %s (epoch %d), %s led next (epoch %d); want the foreign node", e.f.name, leader, epoch, next.Node, next.Epoch)
	case want == "ref" && next.Node == Foreign:
		e.broke("after %s on %s (epoch %d), the foreign node led next (epoch %d); want a reference node", e.f.name, leader, epoch, next.Epoch)
	}
	if e.f.reason != "" {
		got, err := e.releaseReason(ctx, epoch)
		switch {
		case err != nil:
			e.broke("epoch %d of %s (%s): %v", epoch, leader, e.f.name, err)
		case got != e.f.reason:
			e.broke("epoch %d of %s ended by %s was released as %q; the protocol says %q (docs/protocol.md §11)", epoch, leader, e.f.name, got, e.f.reason)
		}
	}
	for _, m := range e.c.Running() {
		if err := e.campaigning(ctx, m.ID); err != nil {
			if m.ID == Foreign {
				e.broke("after %s: %v", e.f.name, err)
				continue
			}
			return err
		}
	}
	e.pause(ctx, 200*time.Millisecond, 600*time.Millisecond)
	return nil
}

// strike is what a fault did: when it struck the leader (mono ns; 0: when the
// strike began), the node that must lead next when the fault names it (a
// handover's target), and how to undo the fault (nil: nothing to undo),
// called once the next term opened.
type strike struct {
	at     int64
	nextBy string
	undo   func(ctx context.Context) error
}

// arrange waits for a working leader and, if it is not of the kind the fault
// strikes, hands the scope over to one that is.
func (e *env) arrange(ctx context.Context) (string, int64, error) {
	id, epoch, err := e.working(ctx)
	if err != nil {
		return "", 0, err
	}
	if (id == Foreign) == (e.f.leader == "foreign") {
		return id, epoch, nil
	}
	to := Foreign
	if e.f.leader == "ref" {
		to = pick(e.rng, e.runningRefs())
	}
	if err := e.handover(ctx, to); err != nil {
		return "", 0, fmt.Errorf("to have %s lead before %s: %w", to, e.f.name, err)
	}
	if id, epoch, err = e.working(ctx); err != nil {
		return "", 0, err
	}
	if id != to {
		return "", 0, fmt.Errorf("handed over to %s before %s, but %s leads (epoch %d)", to, e.f.name, id, epoch)
	}
	return id, epoch, nil
}

func (e *env) runningRefs() []string {
	var out []string
	for _, m := range e.c.Running() {
		if m.ID != Foreign {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// start starts node id: the foreign node from its template, a reference node
// as pgleader node.
func (e *env) start(id string) error {
	if id != Foreign {
		_, err := e.c.Start(id)
		return err
	}
	_, err := e.c.StartCommand(id, func(events string) []string {
		return e.o.Node.Argv(id, e.scope, e.o.DSN, events)
	})
	return err
}

// working waits until some node leads the scope and has acknowledged a write
// in that term.
func (e *env) working(ctx context.Context) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	for {
		if _, err := e.c.Poll(); err != nil {
			return "", 0, err
		}
		if id, epoch := e.c.Leader(e.scope); id != "" {
			for _, r := range slices.Backward(e.c.Events()) {
				if r.Node == id && r.Scope == e.scope && r.Event == string(eventlog.ActionOK) && r.Epoch == epoch {
					return id, epoch, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			id, epoch := e.c.Leader(e.scope)
			return "", 0, fmt.Errorf("no leader of %s with a write acknowledged in its term within %v (gate open: %q, epoch %d)", e.scope, waitBound, id, epoch)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// next waits until some node opens its gate for the scope above epoch.
func (e *env) next(ctx context.Context, epoch int64) (eventlog.Record, error) {
	match := func(r eventlog.Record) bool {
		return r.Scope == e.scope && r.Event == "gate_open" && r.Epoch > epoch
	}
	for _, r := range e.c.Events() {
		if match(r) {
			return r, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	r, err := e.c.WaitFor(ctx, match)
	if err != nil {
		return r, fmt.Errorf("no gate opened for %s above epoch %d within %v", e.scope, epoch, waitBound)
	}
	return r, nil
}

// campaigning waits until node id is registered for the scope, live (its
// beacon held), and not stopped.
func (e *env) campaigning(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	var last error
	for {
		var up bool
		last = e.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgleader.live_nodes(pgleader.lock_map()) n
		        WHERE n.node_id = $1 AND $2 = ANY (n.scopes))`, id, e.scope).Scan(&up)
		if last == nil && up {
			return nil
		}
		if last != nil && e.admin.IsClosed() {
			if c, err := pgx.Connect(ctx, e.o.DSN); err == nil {
				_ = e.admin.Close(ctx)
				e.admin = c
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: not campaigning for %s within %v (%v)", id, e.scope, waitBound, last)
			}
			return fmt.Errorf("%s: not campaigning for %s within %v: not registered, stopped, or its beacon not held", id, e.scope, waitBound)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// releaseReason waits until term epoch of the scope is closed and returns its
// release_reason.
func (e *env) releaseReason(ctx context.Context, epoch int64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	for {
		var reason *string
		err := e.admin.QueryRow(ctx, `SELECT release_reason FROM pgleader.terms WHERE scope = $1 AND epoch = $2`,
			e.scope, epoch).Scan(&reason)
		if err == nil && reason != nil {
			return *reason, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the term was not closed within %v (last read: %v)", waitBound, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// handover runs `pgleader handover SCOPE --to id`, which exits 0 once id leads.
func (e *env) handover(ctx context.Context, to string) error {
	out, err := exec.CommandContext(ctx, e.o.Bin, "handover", e.scope, "--to", to, "--timeout", "10s", "--dsn", e.o.DSN).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgleader handover %s --to %s: %w: %s", e.scope, to, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// trustWindow is the trust window the foreign node registered (0 when it
// never did).
func (e *env) trustWindow(ctx context.Context) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, e.o.DSN)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var ms *int
	err = conn.QueryRow(ctx, `SELECT trust_window_ms FROM pgleader.nodes WHERE node_id = $1`, Foreign).Scan(&ms)
	if err != nil || ms == nil {
		return 0, nil
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func (e *env) broke(format string, args ...any) {
	e.broken = append(e.broken, fmt.Sprintf(format, args...))
}

// pause sleeps a random time in [lo, hi).
func (e *env) pause(ctx context.Context, lo, hi time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(lo + time.Duration(e.rng.Int64N(int64(hi-lo)))):
	}
}

// directions counts the takeovers of a history: each first gate_open of a
// (node, epoch) after the first fault, by another node than the one that
// opened a gate before it, towards the foreign node and away from it.
func directions(h checker.History, scope string) (to, from int) {
	var first int64 = -1
	for _, f := range h.Faults {
		if first < 0 || f.StartMono < first {
			first = f.StartMono
		}
	}
	var prev string
	seen := map[string]bool{}
	for _, r := range h.Events {
		if r.Scope != scope || r.Event != "gate_open" || (h.EndMono > 0 && r.MonoNS > h.EndMono) {
			continue
		}
		k := r.Node + "/" + strconv.FormatInt(r.Epoch, 10)
		if seen[k] {
			continue
		}
		seen[k] = true
		if prev != "" && prev != r.Node && first >= 0 && r.MonoNS >= first {
			switch {
			case r.Node == Foreign:
				to++
			case prev == Foreign:
				from++
			}
		}
		prev = r.Node
	}
	return to, from
}

// spread formats the median and the maximum of figures in milliseconds.
func spread(ms []float64) string {
	if len(ms) == 0 {
		return "-"
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return fmt.Sprintf("p50 %.1f ms, max %.1f ms (%d)", s[len(s)/2], s[len(s)-1], len(s))
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }
