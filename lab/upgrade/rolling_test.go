package upgrade_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

// nodeArgs is the timing of every node, of both releases (chaos's: I=100ms
// T=150ms W=500ms L=700ms), and the fenced workload: a write every 20ms. Flags
// both releases must accept.
var nodeArgs = []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "150ms",
	"--trust-window", trustWindow.String(), "--session-lease", "700ms", "--drain-timeout", "1s",
	"--work-interval", "20ms", "--log-level", "warn"}

const trustWindow = 500 * time.Millisecond

var scopes = []string{"upgrade-a", "upgrade-b", "upgrade-c"}

// TestRollingUpgrade runs the upgrade an operator runs: three nodes of the
// previous release lead and write (fenced) on three scopes; the current
// release's migrate runs under them; then each node is replaced by one of the
// current release, one at a time. During the mixed phase a current node is
// killed while it leads and only previous nodes can take over, and later a
// previous node is killed while it leads and only current nodes can: leadership
// crosses releases both ways, by crash as well as by handover and shutdown. The
// whole history is judged by the chaos checker (H1–H5, no gate overlap).
func TestRollingUpgrade(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.DSN(t)
	from := migrate(t, previous, dsn)
	c := cluster.New(cluster.Options{Bin: previous, DSN: dsn, Dir: t.TempDir(), Scopes: scopes,
		NodeArgs: nodeArgs, Env: []string{"GORACE=atexit_sleep_ms=0"}})
	r := &roll{t: t, c: c, dsn: dsn, release: map[string]string{}}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, e := range c.Events() {
				if e.Event != "heartbeat_ok" && e.Event != "action_ok" {
					t.Logf("%d %s %s %s epoch=%d %s", e.MonoNS, e.Node, e.Scope, e.Event, e.Epoch, e.Reason)
				}
			}
		}
	})

	for _, id := range []string{"p1", "p2", "p3"} {
		r.start(previous, id)
	}
	r.everyScopeWorks(0, previous)

	// The current release's migrate, under running nodes of the previous one,
	// which must keep leading and writing on the schema it leaves: writes two
	// trust windows after it, so that their gates stayed open through heartbeats
	// on that schema too.
	if to := migrate(t, current, dsn); to != migrations.Latest || to < from {
		t.Fatalf("current migrate left schema version %d (from %d), want %d", to, from, migrations.Latest)
	}
	r.everyScopeWorks(monotime.Now()+int64(2*trustWindow), previous)
	t.Logf("migrated from schema version %d to %d under the previous release's nodes", from, migrations.Latest)

	// Mixed phase: from the first current node's start to the last previous
	// node's death.
	r.stop("p1")
	mixedFrom := monotime.Now()
	r.start(current, "c1")
	// c1 leads and dies; p2 and p3 (previous) are the only candidates.
	scope := r.lead("c1")
	r.takeover(scope, r.kill("c1"), "c1", previous)
	r.start(current, "c1") // the crashed node comes back, current as before
	r.stop("p2")
	r.start(current, "c2")
	// p3 leads and dies; c1 and c2 (current) are the only candidates.
	scope = r.lead("p3")
	mixedTo := r.kill("p3")
	r.takeover(scope, mixedTo, "p3", current)
	r.start(current, "c3")

	// All current.
	r.everyScopeWorks(monotime.Now(), current)
	end := monotime.Now()

	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	h, err := checker.ReadHistory(context.Background(), dsn, scopes, c.Events(), r.faults, end)
	if err != nil {
		t.Fatal(err)
	}
	rep := checker.Check(h, checker.Footprint{Takeover: true, FaultApplied: true})
	if !rep.OK() {
		t.Errorf("history: %s", rep)
	}
	if ov := rep.Figures.GateOverlap; ov > 0 {
		t.Errorf("gates of different nodes were open at once for %v: %v", ov, rep.Figures.Overlaps)
	}

	// Leadership crossed releases both ways (the two crashes make sure of it;
	// shutdowns and handovers add more).
	crossed := map[string]int{}
	for _, tr := range transitions(h.Events) {
		if a, b := r.release[tr.from], r.release[tr.to]; a != b {
			crossed[release(a)+" → "+release(b)]++
		}
	}
	t.Logf("leadership changes across releases: %v", crossed)
	for _, dir := range [][2]string{{previous, current}, {current, previous}} {
		if k := release(dir[0]) + " → " + release(dir[1]); crossed[k] == 0 {
			t.Errorf("no leadership change %s", k)
		}
	}

	// Both releases' nodes wrote during the mixed phase: acknowledged writes
	// whose rows are in pgleader.demo_actions.
	rows := map[string]bool{}
	for _, w := range h.Writes {
		rows[w.RequestID] = true
	}
	wrote := map[string]int{}
	for _, e := range h.Events {
		if e.Event == "action_ok" && e.MonoNS > mixedFrom && e.MonoNS < mixedTo && rows[e.RequestID] {
			wrote[r.release[e.Node]]++
		}
	}
	for _, bin := range []string{previous, current} {
		if wrote[bin] == 0 {
			t.Errorf("no fenced write of the %s's nodes landed during the mixed phase", release(bin))
		}
	}
	t.Logf("mixed phase: %d writes by previous-release nodes, %d by current; whole run: %d acknowledged, %d rejected",
		wrote[previous], wrote[current], rep.Figures.Acked, rep.Figures.Rejected)
}

// roll drives the nodes of a rolling upgrade and records the faults it applies.
type roll struct {
	t       *testing.T
	c       *cluster.Cluster
	dsn     string
	release map[string]string // node id → its binary
	faults  []checker.Fault
}

// start starts node id from bin and waits until it has registered.
func (r *roll) start(bin, id string) {
	r.t.Helper()
	n, err := r.c.StartBin(bin, id)
	if err != nil {
		r.t.Fatal(err)
	}
	r.release[id] = bin
	r.waitFor(fmt.Sprintf("node %s (%s) to register", id, release(bin)), func(conn *pgx.Conn) (bool, error) {
		var up bool
		err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pgleader.nodes WHERE node_id = $1
		    AND os_pid = $2 AND stopped_at IS NULL AND last_seen > started_at)`, id, n.PID()).Scan(&up)
		return up, err
	})
}

// stop stops node id gracefully (SIGTERM), as a rolling restart does, and
// requires a clean exit.
func (r *roll) stop(id string) {
	r.t.Helper()
	n := r.c.Node(id)
	t0, err := n.Signal(syscall.SIGTERM)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := n.Wait(20 * time.Second); err != nil {
		r.t.Fatalf("%s (%s) after SIGTERM: %v", id, release(r.release[id]), err)
	}
	r.faults = append(r.faults, checker.Fault{Kind: "sigterm", Node: id, StartMono: t0, EndMono: monotime.Now()})
}

// kill kills node id (SIGKILL) and returns when.
func (r *roll) kill(id string) int64 {
	r.t.Helper()
	at, err := r.c.Node(id).Kill()
	if err != nil {
		r.t.Fatal(err)
	}
	r.faults = append(r.faults, checker.Fault{Kind: "kill9", Node: id, StartMono: at, EndMono: at})
	return at
}

// lead returns a scope that node id leads, with a write acknowledged in its
// term, handing one over to it (with the current release's CLI) if it leads none.
func (r *roll) lead(id string) string {
	r.t.Helper()
	r.poll()
	for _, s := range scopes {
		if l, epoch := r.c.Leader(s); l == id {
			r.wrote(s, id, epoch, 0)
			return s
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range scopes {
			asked := monotime.Now()
			code, out := pgleader(r.t, current, r.dsn, "handover", s, "--to", id, "--timeout", "10s")
			if code != 0 { // refused (not yet live, cooling down): the next scope
				r.t.Logf("handover %s to %s: exit %d: %s", s, id, code, strings.TrimSpace(out))
				continue
			}
			r.faults = append(r.faults, checker.Fault{Kind: "handover", Node: id, StartMono: asked, EndMono: monotime.Now()})
			r.t.Logf("handed %s over to %s (%s)", s, id, release(r.release[id]))
			open := r.wait("gate_open of "+id+" in "+s, func(e eventlog.Record) bool {
				return e.Event == "gate_open" && e.Node == id && e.Scope == s && e.MonoNS > asked
			})
			r.wrote(s, id, open.Epoch, asked)
			return s
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no scope could be handed over to %s within 20s", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// takeover waits for the node that takes scope over after node dead was killed
// at killed, requires it to be of release want and to write in its new term.
func (r *roll) takeover(scope string, killed int64, dead, want string) {
	r.t.Helper()
	next := r.wait("a takeover of "+scope+" after "+dead+" was killed", func(e eventlog.Record) bool {
		return e.Event == "gate_open" && e.Scope == scope && e.MonoNS > killed && e.Node != dead
	})
	if r.release[next.Node] != want {
		r.t.Fatalf("%s (%s) took %s over from %s, want a node of the %s", next.Node, release(r.release[next.Node]),
			scope, dead, release(want))
	}
	r.wrote(scope, next.Node, next.Epoch, killed)
	r.t.Logf("%s (%s) took %s over from the killed %s (%s) at epoch %d after %v", next.Node, release(want),
		scope, dead, release(r.release[dead]), next.Epoch, time.Duration(next.MonoNS-killed).Round(time.Millisecond))
}

// everyScopeWorks waits until every scope is led by a node of release bin that
// has acknowledged a fenced write after mono time since.
func (r *roll) everyScopeWorks(since int64, bin string) {
	r.t.Helper()
	for _, s := range scopes {
		r.seenOrWait(fmt.Sprintf("a write in %s by a node of the %s", s, release(bin)), func(e eventlog.Record) bool {
			return e.Event == "action_ok" && e.Scope == s && e.MonoNS > since && r.release[e.Node] == bin
		})
	}
}

// wrote waits for node's acknowledged write in scope at epoch after since.
func (r *roll) wrote(scope, node string, epoch, since int64) {
	r.t.Helper()
	r.seenOrWait(fmt.Sprintf("a write by %s in %s at epoch %d", node, scope, epoch), func(e eventlog.Record) bool {
		return e.Event == "action_ok" && e.Scope == scope && e.Node == node && e.Epoch == epoch && e.MonoNS > since
	})
}

func (r *roll) poll() {
	r.t.Helper()
	if _, err := r.c.Poll(); err != nil {
		r.t.Fatal(err)
	}
}

// wait waits up to 20s for a new record matching match.
func (r *roll) wait(what string, match func(eventlog.Record) bool) eventlog.Record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := r.c.WaitFor(ctx, match)
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
	return e
}

// seenOrWait is wait for a record that may have been read already.
func (r *roll) seenOrWait(what string, match func(eventlog.Record) bool) eventlog.Record {
	r.t.Helper()
	r.poll()
	for _, e := range r.c.Events() {
		if match(e) {
			return e
		}
	}
	return r.wait(what, match)
}

// waitFor polls cond on a connection to the database for up to 20s.
func (r *roll) waitFor(what string, cond func(*pgx.Conn) (bool, error)) {
	r.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := cond(conn)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out after 20s waiting for %s (last error: %v)", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// transition is leadership of a scope passing from one node to another: the
// first gate_open of a new (node, epoch) after another node's.
type transition struct{ scope, from, to string }

// transitions lists the leadership changes in events (sorted by mono_ns).
func transitions(events []eventlog.Record) []transition {
	var out []transition
	last := map[string]eventlog.Record{} // scope → latest new-term gate_open
	for _, e := range events {
		if e.Event != "gate_open" {
			continue
		}
		prev, seen := last[e.Scope]
		if seen && prev.Node == e.Node && prev.Epoch == e.Epoch {
			continue // the same term's gate reopening
		}
		if seen && prev.Node != e.Node {
			out = append(out, transition{e.Scope, prev.Node, e.Node})
		}
		last[e.Scope] = e
	}
	return out
}
