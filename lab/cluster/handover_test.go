package cluster_test

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// pgleader runs the pgleader binary on the test's database and returns its exit
// code and output.
func pgleader(t *testing.T, dsn string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--dsn", dsn)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

var newEpoch = regexp.MustCompile(`now leads s at epoch (\d+)`)

// TestHandoverToEachFollower hands the scope to each follower in turn while the
// fenced workload runs: the command exits 0 once the named node leads, the old
// gate closes before the new one opens, and no write of an old epoch commits
// after the new claim (checkHistory).
func TestHandoverToEachFollower(t *testing.T) {
	pgtest.Slow(t)
	conclusively(t, func(t *testing.T) {
		c, dsn := setup(t, 3)
		handoverRounds(t, c, dsn, 4)
		checkHistory(t, c, dsn)
		var handed int
		queryRow(t, dsn, "SELECT count(*) FROM pgleader.terms WHERE release_reason = 'handed_over' AND handed_to IS NOT NULL", nil, &handed)
		if handed != 4 {
			t.Errorf("%d terms recorded as handed over, want 4", handed)
		}
	})
}

// handoverRounds runs `pgleader handover s --to F` rounds times, F a follower
// other than the one that handed over last round (it cools down), and checks
// that each exits 0 naming the next epoch and that F's gate opens at it. It
// waits for every running node to register first: a node not registered yet is
// unknown to a handover.
func handoverRounds(t *testing.T, c *cluster.Cluster, dsn string, rounds int) {
	t.Helper()
	from := monotime.Now()
	for _, n := range c.Running() {
		waitRegistered(t, dsn, n)
	}
	previous := "" // it handed over last round and cools down
	for round := range rounds {
		old, epoch := leader(t, c)
		to := ""
		for _, n := range c.Running() {
			if n.ID != old.ID && n.ID != previous {
				to = n.ID
				break
			}
		}
		previous = old.ID
		code, out := pgleader(t, dsn, "handover", "s", "--to", to, "--timeout", "10s")
		if code != 0 {
			astray(t, c, dsn, from, "round %d: handover to %s: exit %d: %s", round, to, code, out)
		}
		m := newEpoch.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("round %d: handover printed no new epoch: %s", round, out)
		}
		if got, _ := strconv.ParseInt(m[1], 10, 64); got != epoch+1 {
			astray(t, c, dsn, from, "round %d: new epoch %d after %d", round, got, epoch)
		}
		next := wait(t, c, "the target's gate", func(r eventlog.Record) bool {
			return r.Event == "gate_open" && r.Node == to && r.Epoch == epoch+1
		})
		t.Logf("round %d: %s → %s at epoch %d", round, old.ID, next.Node, next.Epoch)
	}
}

// TestHandoverRefused: to an unknown node, a node of priority 0, the leader
// itself: exit 2 naming the reason, nothing changes.
func TestHandoverRefused(t *testing.T) {
	c, dsn := setup(t, 2)
	observer, err := c.Start("observer", "--priority", "0")
	if err != nil {
		t.Fatal(err)
	}
	old, epoch := leader(t, c)
	waitRegistered(t, dsn, observer)
	for _, tc := range []struct{ to, want string }{
		{"nobody", "is unknown"},
		{"observer", "priority 0"},
		{old.ID, "leads scope 's' already"},
	} {
		code, out := pgleader(t, dsn, "handover", "s", "--to", tc.to, "--timeout", "5s")
		if code != 2 || !regexp.MustCompile(regexp.QuoteMeta(tc.want)).MatchString(out) {
			t.Errorf("handover to %s: exit %d, %q; want exit 2 naming %q", tc.to, code, out, tc.want)
		}
	}
	var holder string
	var now int64
	queryRow(t, dsn, "SELECT holder, epoch FROM pgleader.leader_state WHERE scope = 's'", nil, &holder, &now)
	if holder != old.ID || now != epoch {
		t.Fatalf("after refused handovers the scope is %s at epoch %d, want %s at %d", holder, now, old.ID, epoch)
	}
	var pending int
	queryRow(t, dsn, "SELECT count(*) FROM pgleader.leader_state WHERE handover_to IS NOT NULL", nil, &pending)
	if pending != 0 {
		t.Fatal("a refused handover left a reservation")
	}
}

// TestHandoverTargetDies: the target freezes before it can claim and is then
// killed: the handover fails (another node took over) and the scope is led again
// within one ordinary failover of the kill, not after the handover's timeout.
func TestHandoverTargetDies(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 3)
	old, epoch := leader(t, c)
	var target *cluster.Node
	for _, n := range c.Running() {
		if n.ID != old.ID {
			target = n
			break
		}
	}
	// Frozen before it registered, the target would be refused as unknown and no
	// release would follow (seen once in CI, under the race detector).
	waitRegistered(t, dsn, target)
	if _, err := target.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := pgleader(t, dsn, "handover", "s", "--to", target.ID, "--timeout", "20s")
		done <- result{code, out}
	}()
	// The leader releases to the frozen target; then the target dies.
	wait(t, c, "the release to the target", func(r eventlog.Record) bool {
		return r.Event == "resigned" && r.Node == old.ID && r.Epoch == epoch
	})
	t0, err := target.Kill()
	if err != nil {
		t.Fatal(err)
	}
	next := wait(t, c, "a failover after the target died", func(r eventlog.Record) bool {
		return r.Event == "gate_open" && r.Epoch > epoch
	})
	took := time.Duration(next.MonoNS - t0)
	t.Logf("target killed → %s leads at epoch %d after %v", next.Node, next.Epoch, took)
	if next.Node == target.ID {
		t.Fatal("the killed target led")
	}
	if took > 5*time.Second {
		t.Errorf("the scope was leaderless %v after the target died", took)
	}
	r := <-done
	if r.code == 0 || !regexp.MustCompile(`took over|leads s`).MatchString(r.out) {
		t.Errorf("handover whose target died: exit %d, %q; want a failure naming the node that took over", r.code, r.out)
	}
	checkHistory(t, c, dsn)
}

// TestPriorityWinsUnderKill: with priorities 3, 2, 1, after every kill -9 of the
// leader the live candidate of highest priority leads next, every time.
func TestPriorityWinsUnderKill(t *testing.T) {
	pgtest.Slow(t)
	conclusively(t, priorityWinsUnderKill)
}

func priorityWinsUnderKill(t *testing.T) {
	c, dsn := setup(t, 0)
	prio := map[string]int{"p1": 1, "p2": 2, "p3": 3}
	for _, id := range []string{"p1", "p2", "p3"} { // the lowest first: it leads first
		n, err := c.Start(id, "--priority", fmt.Sprint(prio[id]))
		if err != nil {
			t.Fatal(err)
		}
		waitRegistered(t, dsn, n)
	}
	const rounds = 20
	for round := range rounds {
		old, epoch := leader(t, c)
		best := ""
		for _, n := range c.Running() {
			if n.ID != old.ID && (best == "" || prio[n.ID] > prio[best]) {
				best = n.ID
			}
		}
		t0, err := old.Kill()
		if err != nil {
			t.Fatal(err)
		}
		next := wait(t, c, "takeover after kill -9", gateOpenAfter(t0, old.ID))
		if next.Node != best || next.Epoch != epoch+1 {
			astray(t, c, dsn, t0, "round %d: %s (priority %d) led at epoch %d after %s died at %d, want %s (priority %d)",
				round, next.Node, prio[next.Node], next.Epoch, old.ID, epoch, best, prio[best])
		}
		n, err := c.Start(old.ID, "--priority", fmt.Sprint(prio[old.ID]))
		if err != nil {
			t.Fatal(err)
		}
		waitRegistered(t, dsn, n)
	}
	t.Logf("the highest-priority candidate won all %d kills", rounds)
	checkHistory(t, c, dsn)
}

// TestPriorityZeroNeverLeads: an observer of priority 0 stays a follower even
// when it is the last node; a candidate that joins leads at once.
func TestPriorityZeroNeverLeads(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 0)
	if _, err := c.Start("observer", "--priority", "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start("n1"); err != nil {
		t.Fatal(err)
	}
	old, _ := leader(t, c)
	if old.ID != "n1" {
		t.Fatalf("%s leads, want n1", old.ID)
	}
	t0, err := old.Kill()
	if err != nil {
		t.Fatal(err)
	}
	// Watch for ten session leases: every way a follower learns of a free scope
	// (the ring watcher, node_lost, its heartbeat) happens many times over.
	time.Sleep(5 * time.Second)
	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Events() {
		if r.Node == "observer" && (r.Event == "acquired" || r.Event == "gate_open") {
			t.Fatalf("the priority-0 observer %s at epoch %d", r.Event, r.Epoch)
		}
	}
	var heartbeats time.Time
	queryRow(t, dsn, "SELECT last_seen FROM pgleader.nodes WHERE node_id = 'observer'", nil, &heartbeats)
	if time.Since(heartbeats) > 2*time.Second {
		t.Errorf("the observer stopped heartbeating (last seen %v)", heartbeats)
	}
	if _, err := c.Start("n2"); err != nil {
		t.Fatal(err)
	}
	next := wait(t, c, "a candidate leads", gateOpenAfter(t0, "observer"))
	if next.Node != "n2" {
		t.Fatalf("%s leads, want n2", next.Node)
	}
}

// waitRegistered waits until the process of node has registered and heartbeats
// (its leadership session is up), so that a test's next fault finds it
// campaigning; a row of the node's previous process does not count.
func waitRegistered(t *testing.T, dsn string, node *cluster.Node) {
	t.Helper()
	// One connection, polled every 20 ms: a connection per poll would start a
	// server backend a hundred times a second, load that lands on the nodes
	// just as the one starting comes up.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pgleader.nodes WHERE node_id = $1 AND os_pid = $2 AND stopped_at IS NULL
		                            AND last_seen > started_at`, node.ID, node.PID()).Scan(&n)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("node %s did not register within 20s", node.ID)
		case err != nil:
			t.Fatal(err)
		case n == 1:
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queryRow scans the one row sql returns (with args) into dst.
func queryRow(t *testing.T, dsn, sql string, args []any, dst ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestHandoverBackAtOnce: `pgleader handover s --to B`, then at once `--to A`,
// back to the node that just handed over and cools down (2×I = 2 s here): the
// second command is accepted and exits 0, and A's gate opens well within A's
// cooldown after B's release (a handover reserved for A ends A's cooldown).
// Measured from B's release, not the command: each command also waits for the
// leader's drain of the fenced workload.
func TestHandoverBackAtOnce(t *testing.T) {
	pgtest.Slow(t)
	args := []string{"--heartbeat-interval", "1s", "--heartbeat-timeout", "200ms",
		"--trust-window", "1500ms", "--session-lease", "2s", "--drain-timeout", "1s", "--work-interval", "20ms"}
	dsn := pgtest.DSN(t)
	// As a node-role login: the wake-up measured here is the release's doorbell
	// (a superuser's nodes would learn at their next heartbeat, a whole I later).
	c := startCluster(t, 2, dsn, asNode(t, dsn), args)
	a, epoch := leader(t, c)
	var b *cluster.Node
	for _, n := range c.Running() {
		if n.ID != a.ID {
			b = n
		}
	}
	waitRegistered(t, dsn, b)
	if code, out := pgleader(t, dsn, "handover", "s", "--to", b.ID, "--timeout", "10s"); code != 0 {
		t.Fatalf("handover to %s: exit %d: %s", b.ID, code, out)
	}
	if code, out := pgleader(t, dsn, "handover", "s", "--to", a.ID, "--timeout", "10s"); code != 0 {
		t.Fatalf("handover back to %s, which cools down: exit %d: %s", a.ID, code, out)
	}
	released := seenOrWait(t, c, "b's release", func(r eventlog.Record) bool {
		return r.Event == "resigned" && r.Node == b.ID && r.Epoch == epoch+1
	})
	back := seenOrWait(t, c, "a's gate", func(r eventlog.Record) bool {
		return r.Event == "gate_open" && r.Node == a.ID && r.Epoch == epoch+2
	})
	if took := time.Duration(back.MonoNS - released.MonoNS); took > 500*time.Millisecond {
		t.Fatalf("%s led %v after %s's release: it waited out its cooldown (2 s)", a.ID, took, b.ID)
	} else {
		t.Logf("%s → %s → %s; %s led %v after %s's release", a.ID, b.ID, a.ID, a.ID, took, b.ID)
	}
	checkHistory(t, c, dsn)
}
