package cluster_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
)

// failbackAfter is the --preferred delay of the failback tests: twenty heartbeat
// intervals of nodeArgs.
const failbackAfter = time.Second

// TestPreferredFailsBack: a node of higher priority that joins does not take a
// scope over unless it is preferred; a preferred one takes it back by a handover
// once it has been up for its delay — not before — and keeps it (no flapping);
// killed, it is replaced by a failover, and restarted, it takes the scope back
// again; an operator's handover away from it is not undone. The fenced workload runs throughout and the history is checked. In lock
// mode, and in lease mode through PgBouncer.
func TestPreferredFailsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	t.Run("lock", func(t *testing.T) {
		conclusively(t, func(t *testing.T) { c, dsn := setup(t, 0); failsBack(t, c, dsn) })
	})
	t.Run("lease", func(t *testing.T) {
		conclusively(t, func(t *testing.T) { c, dsn := setupLease(t, 0); failsBack(t, c, dsn) })
	})
}

func failsBack(t *testing.T, c *cluster.Cluster, dsn string) {
	from := monotime.Now()
	astray := func(format string, args ...any) { t.Helper(); astray(t, c, dsn, from, format, args...) }
	start := func(id string, args ...string) *cluster.Node {
		t.Helper()
		n, err := c.Start(id, args...)
		if err != nil {
			t.Fatal(err)
		}
		waitRegistered(t, dsn, n)
		return n
	}
	start("low", "--priority", "1")
	if old, _ := leader(t, c); old.ID != "low" {
		t.Fatalf("%s leads, want low (the only node)", old.ID)
	}
	stays := func(node string, d time.Duration) { t.Helper(); stays(t, c, node, d, astray) }

	// Higher priority without --preferred: no failback.
	start("plain", "--priority", "3")
	stays("low", 2*failbackAfter)

	// Preferred: a handover to it once it has been up for its delay.
	preferred := []string{"--priority", "2", "--preferred=" + failbackAfter.String()}
	for round := range 2 {
		t0 := monotime.Now()
		start("pref", preferred...)
		next := wait(t, c, "the preferred node takes the scope back", gateOpenAfter(t0, ""))
		if next.Node != "pref" {
			astray("round %d: %s took the scope, want pref", round, next.Node)
		}
		// The term before was handed over by a failback to pref (a machine stall
		// can make it a failover instead: astray), and not before pref's delay.
		var via, to string
		queryRow(t, dsn, `SELECT coalesce(max(detail->>'via'), ''), coalesce(max(detail->>'to'), '') FROM pgleader.audit
		                   WHERE kind = 'handover_requested' AND scope = 's' AND epoch = $1`,
			[]any{next.Epoch - 1}, &via, &to)
		if via != "failback" || to != "pref" {
			astray("round %d: pref took the scope at epoch %d, but not by a failback (a handover requested via %q to %q)", round, next.Epoch, via, to)
		}
		if waited := time.Duration(next.MonoNS - t0); waited < failbackAfter {
			t.Errorf("round %d: pref led %v after it started, before its failback delay (%v)", round, waited, failbackAfter)
		}
		if round == 0 { // what operators see: status marks the preferred node
			code, out := pgleader(t, dsn, "status")
			if code != 0 || !strings.Contains(out, "2 (preferred: fails back after 1s)") {
				t.Errorf("status exited %d without marking pref preferred:\n%s", code, out)
			}
		}
		// Nobody takes it back: low is below pref, plain is not preferred.
		stays("pref", 2*failbackAfter)
		if round == 1 {
			// An operator's handover to a lower priority is not undone.
			asked := monotime.Now()
			if code, out := pgleader(t, dsn, "handover", "s", "--to", "low"); code != 0 {
				astray("handover to low: exit %d: %s", code, out)
			}
			// The command returns once the database names low; low's gate opens a
			// moment later, before the watch for a failback starts.
			seenOrWait(t, c, "low's gate opens", func(r eventlog.Record) bool {
				return r.Event == "gate_open" && r.Node == "low" && r.MonoNS > asked
			})
			stays("low", 2*failbackAfter)
			break
		}
		// Killed: an ordinary failover, to the highest live priority (plain).
		killed, err := c.Node("pref").Kill()
		if err != nil {
			t.Fatal(err)
		}
		if n := wait(t, c, "failover after kill -9", gateOpenAfter(killed, "pref")); n.Node != "plain" {
			astray("%s took over from the killed pref, want plain (priority 3)", n.Node)
		}
		// plain outranks pref: pref, restarted, must not take the scope back.
		start("pref", preferred...)
		stays("plain", 2*failbackAfter)
		// Both stopped (SIGTERM): the scope goes to pref, then back to low.
		stopped := sigterm(t, c, "plain")
		if n := wait(t, c, "takeover after plain stopped", gateOpenAfter(stopped, "plain")); n.Node != "pref" {
			astray("%s led after plain stopped, want pref (priority 2)", n.Node)
		}
		stopped = sigterm(t, c, "pref")
		if n := wait(t, c, "takeover after pref stopped", gateOpenAfter(stopped, "pref")); n.Node != "low" {
			astray("%s led after pref stopped, want low", n.Node)
		}
	}
	checkHistory(t, c, dsn)
}

// sigterm stops node gracefully and waits for it to exit; it returns when the
// signal was sent.
func sigterm(t *testing.T, c *cluster.Cluster, node string) int64 {
	t.Helper()
	n := c.Node(node)
	t0, err := n.Signal(syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Wait(20 * time.Second); err != nil {
		t.Fatalf("%s after SIGTERM: %v", node, err)
	}
	return t0
}

// stays asserts that node keeps leading scope s for d: no other node's gate
// opens. It reports a failure through astray.
func stays(t *testing.T, c *cluster.Cluster, node string, d time.Duration, astray func(string, ...any)) {
	t.Helper()
	from := monotime.Now()
	time.Sleep(d)
	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Events() {
		if r.Event == "gate_open" && r.MonoNS > from {
			astray("%s's gate opened at epoch %d while %s was to keep the scope", r.Node, r.Epoch, node)
		}
	}
	if id, _ := c.Leader("s"); id != node {
		astray("%q leads, want %s", id, node)
	}
}
