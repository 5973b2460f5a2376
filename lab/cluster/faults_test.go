package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/history"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := cluster.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	pgtest.Main(m, cleanup)
}

// hbInterval is the heartbeat interval I of nodeArgs.
const hbInterval = 50 * time.Millisecond

// fast timing: I=50ms T=200ms W=300ms L=500ms; a fenced write every 20ms. T is
// the most that I + T < W allows: these nodes are race-built, and a machine of
// two cores shared with other work stalls one now and then (see stall).
var nodeArgs = []string{"--heartbeat-interval", hbInterval.String(), "--heartbeat-timeout", "200ms",
	"--trust-window", "300ms", "--session-lease", "500ms", "--drain-timeout", "1s", "--work-interval", "20ms"}

func setup(t *testing.T, nodes int) (*cluster.Cluster, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	return startCluster(t, nodes, dsn, dsn, nodeArgs), dsn
}

// startCluster migrates the database at dsn and starts nodes that reach it
// through nodeDSN (dsn itself, or a pooler in front of it) with args.
// asNode migrates dsn's database and returns dsn logging in as cluster.NodeRole:
// the owner may not signal a superuser's sessions, so nodes under the test's
// superuser would never have their doorbells rung.
func asNode(t *testing.T, dsn string) string {
	t.Helper()
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	as, why := cluster.NodeLogin(context.Background(), dsn)
	if why != "" {
		t.Fatal(why)
	}
	return as
}

func startCluster(t *testing.T, nodes int, dsn, nodeDSN string, args []string) *cluster.Cluster {
	t.Helper()
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	c := cluster.New(cluster.Options{Bin: binary, DSN: nodeDSN, Dir: t.TempDir(), Scopes: []string{"s"},
		NodeArgs: args, Env: []string{"GORACE=atexit_sleep_ms=0"}})
	t.Cleanup(func() {
		c.Close()
		if t.Failed() || t.Skipped() { // skipped: an inconclusive attempt (astray)
			for _, n := range c.Running() {
				t.Logf("node %s still running", n.ID)
			}
			for _, r := range c.Events() {
				if r.Event != "heartbeat_ok" && r.Event != "action_ok" {
					t.Logf("%d %s %s epoch=%d %s %s", r.MonoNS, r.Node, r.Event, r.Epoch, r.Reason, r.Holder)
				}
			}
		}
	})
	for i := range nodes {
		if _, err := c.Start(fmt.Sprintf("n%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func wait(t *testing.T, c *cluster.Cluster, what string, match func(eventlog.Record) bool) eventlog.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.WaitFor(ctx, match)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return r
}

// seenOrWait is wait for a record that may already have been read (in the same
// poll as the record an earlier wait returned).
func seenOrWait(t *testing.T, c *cluster.Cluster, what string, match func(eventlog.Record) bool) eventlog.Record {
	t.Helper()
	for _, r := range c.Events() {
		if match(r) {
			return r
		}
	}
	return wait(t, c, what, match)
}

func gateOpenAfter(t0 int64, notNode string) func(eventlog.Record) bool {
	return func(r eventlog.Record) bool {
		return r.Event == "gate_open" && r.MonoNS > t0 && r.Node != notNode
	}
}

// leader waits until some node's gate is open and returns it.
func leader(t *testing.T, c *cluster.Cluster) (*cluster.Node, int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		if id, epoch := c.Leader("s"); id != "" {
			// A leader that has written: faults then strike a working leader.
			wait(t, c, "a write by the leader", func(r eventlog.Record) bool {
				return r.Event == "action_ok" && r.Node == id && r.Epoch == epoch
			})
			return c.Node(id), epoch
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader within 20s")
		}
		time.Sleep(5 * time.Millisecond) // as cluster.WaitFor: leave the CPU to the nodes
	}
}

// checkHistory asserts no gate overlap and that the database agrees with every
// acknowledged and rejected action (each ok request exactly once, no rejected one).
func checkHistory(t *testing.T, c *cluster.Cluster, dsn string) {
	t.Helper()
	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	if ivs := history.GateIntervals(c.Events(), "s", monotime.Now()); len(ivs) < 2 {
		t.Fatalf("only %d gate intervals: the overlap check would be vacuous", len(ivs))
	}
	checkSafety(t, c, dsn)
}

// checkSafety is checkHistory without its demand for two terms or more: for an
// attempt cut short (astray).
func checkSafety(t *testing.T, c *cluster.Cluster, dsn string) {
	t.Helper()
	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	recs := c.Events()
	ivs := history.GateIntervals(recs, "s", monotime.Now())
	if os := history.Overlaps(ivs); len(os) > 0 {
		t.Errorf("gate overlap %v: %v", history.TotalOverlap(os), os)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	oks := 0
	for _, r := range recs {
		if r.Event != "action_ok" && r.Event != "action_rejected" {
			continue
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgleader.demo_actions WHERE request_id = $1", r.RequestID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Event == "action_ok" && n != 1:
			t.Errorf("acknowledged write %s appears %d times", r.RequestID, n)
		case r.Event == "action_rejected" && n != 0:
			t.Errorf("rejected write %s appears %d times", r.RequestID, n)
		}
		if r.Event == "action_ok" {
			oks++
		}
	}
	if oks == 0 {
		t.Error("no acknowledged writes: the workload did not run")
	}
	// Every write committed under an epoch committed before the next epoch's claim.
	var late int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgleader.demo_actions a
		JOIN pgleader.terms nxt ON nxt.scope = a.scope AND nxt.epoch = a.epoch + 1
		WHERE a.at > nxt.acquired_at`).Scan(&late); err != nil {
		t.Fatal(err)
	}
	if late > 0 {
		t.Errorf("%d writes committed under an epoch after its successor's claim", late)
	}
}

func TestKillLeader(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 3)
	killRounds(t, c, 3, nil)
	checkHistory(t, c, dsn)
}

// killRounds kills the leader with SIGKILL rounds times, waits for another node's
// gate (at the next epoch), checks it with opened (when not nil) and restarts the
// killed node under its id.
func killRounds(t *testing.T, c *cluster.Cluster, rounds int, opened func(old *cluster.Node, killed int64, next eventlog.Record)) {
	t.Helper()
	for round := range rounds {
		old, epoch := leader(t, c)
		t0, err := old.Kill()
		if err != nil {
			t.Fatal(err)
		}
		next := wait(t, c, "takeover after kill -9", gateOpenAfter(t0, old.ID))
		if next.Epoch != epoch+1 {
			t.Fatalf("round %d: new epoch %d after %d", round, next.Epoch, epoch)
		}
		t.Logf("round %d: kill -9 → %s gate open in %v", round, next.Node, time.Duration(next.MonoNS-t0))
		if opened != nil {
			opened(old, t0, next)
		}
		if _, err := c.Start(old.ID); err != nil { // restarted under the same id
			t.Fatal(err)
		}
	}
}

func TestFrozenLeader(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 3)
	freezeAndThaw(t, c, dsn)
	checkHistory(t, c, dsn)
}

// lastTrust is the latest trust_until node announced before mono (0: none).
func lastTrust(c *cluster.Cluster, node string, mono int64) int64 {
	var trust int64
	for _, r := range c.Events() {
		if r.Node == node && r.MonoNS < mono && r.TrustUntilMonoNS > trust {
			trust = r.TrustUntilMonoNS
		}
	}
	return trust
}

// freezeAndThaw stops the leader with SIGSTOP until another node's gate opens (at
// the next epoch, after the frozen leader's trust ran out), resumes it, and checks
// that it lost its term, follows, and that none of its writes under the old epoch
// committed after the successor's claim.
func freezeAndThaw(t *testing.T, c *cluster.Cluster, dsn string) {
	t.Helper()
	old, epoch := leader(t, c)
	t0, err := old.Signal(syscall.SIGSTOP)
	if err != nil {
		t.Fatal(err)
	}
	next := wait(t, c, "takeover from a frozen leader", gateOpenAfter(t0, old.ID))
	if next.Epoch != epoch+1 {
		t.Fatalf("new epoch %d after %d", next.Epoch, epoch)
	}
	// The frozen leader's trust ran out before the successor's gate opened.
	trust := lastTrust(c, old.ID, t0)
	if trust == 0 || trust >= next.MonoNS {
		t.Fatalf("old trust until %d, successor opened at %d: gates overlapped", trust, next.MonoNS)
	}
	t.Logf("frozen → takeover %v; old gate closed %v before the new one opened",
		time.Duration(next.MonoNS-t0), time.Duration(next.MonoNS-trust))
	// Thawed, the old leader finds its gate closed, loses the term and follows.
	t1, _ := old.Signal(syscall.SIGCONT)
	wait(t, c, "old leader noticing it lost", func(r eventlog.Record) bool {
		return r.Node == old.ID && r.Event == "lost" && r.MonoNS > t1
	})
	seenOrWait(t, c, "old leader following the new one", func(r eventlog.Record) bool {
		return r.Node == old.ID && r.Event == "leader_observed" && r.Epoch >= next.Epoch
	})
	// A write acknowledged after the thaw under the old epoch is fine only if it
	// committed before the successor's claim (the freeze fell between its commit
	// and the acknowledgement); one that committed later is a fencing failure.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, r := range c.Events() {
		if r.Node == old.ID && r.Event == "action_ok" && r.MonoNS > t1 && r.Epoch == epoch {
			var late bool
			if err := conn.QueryRow(ctx, `SELECT a.at >= t.acquired_at FROM pgleader.demo_actions a, pgleader.terms t
				WHERE a.request_id = $1 AND t.scope = a.scope AND t.epoch = $2`, r.RequestID, epoch+1).Scan(&late); err != nil {
				t.Fatalf("write %s: %v", r.RequestID, err)
			}
			if late {
				t.Errorf("write %s under epoch %d committed after epoch %d was claimed", r.RequestID, epoch, epoch+1)
			}
		}
	}
}

func TestSIGTERMHandsOver(t *testing.T) {
	c, dsn := setup(t, 3)
	for round := range 2 {
		old, _ := leader(t, c)
		t0, err := old.Signal(syscall.SIGTERM)
		if err != nil {
			t.Fatal(err)
		}
		next := wait(t, c, "handover after SIGTERM", gateOpenAfter(t0, old.ID))
		if err := old.Wait(10 * time.Second); err != nil {
			t.Fatalf("node exit after SIGTERM: %v", err)
		}
		t.Logf("round %d: SIGTERM → %s gate open in %v", round, next.Node, time.Duration(next.MonoNS-t0))
		var reason string
		conn, _ := pgx.Connect(context.Background(), dsn)
		err = conn.QueryRow(context.Background(), "SELECT release_reason FROM pgleader.terms WHERE scope='s' AND epoch=$1", next.Epoch-1).Scan(&reason)
		conn.Close(context.Background())
		if err != nil || reason != "shutdown" {
			t.Fatalf("handed-over term closed as %q (%v), want shutdown", reason, err)
		}
		if _, err := c.Start(old.ID); err != nil {
			t.Fatal(err)
		}
	}
	checkHistory(t, c, dsn)
}

func TestTerminatedBackend(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 3)
	for round := range 3 {
		old, epoch := leader(t, c)
		t0 := monotime.Now()
		conn, _ := pgx.Connect(context.Background(), dsn)
		_, err := conn.Exec(context.Background(), "SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope='s'")
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		next := wait(t, c, "takeover after pg_terminate_backend", func(r eventlog.Record) bool {
			return r.Event == "gate_open" && r.MonoNS > t0 && r.Epoch > epoch
		})
		t.Logf("round %d: terminate → %s gate open in %v", round, next.Node, time.Duration(next.MonoNS-t0))
		if old.Exited() {
			t.Fatalf("node %s exited after its backend was terminated; it must rejoin", old.ID)
		}
	}
	checkHistory(t, c, dsn)
}

// TestStaleWriteRejectedAfterThaw: the leader stalls between its gate check and its
// write (Kleppmann's window), is frozen there for longer than the session lease, a
// follower takes over, and after SIGCONT the old leader's write reaches the
// database under its old epoch: the fence refuses it.
func TestStaleWriteRejectedAfterThaw(t *testing.T) {
	pgtest.Slow(t)
	c, dsn := setup(t, 0)
	old, err := c.Start("n1", "--test-pause-before-write", "300ms")
	if err != nil {
		t.Fatal(err)
	}
	paused := wait(t, c, "n1 pausing before a write", func(r eventlog.Record) bool {
		return r.Node == "n1" && r.Event == "action_paused"
	})
	if _, err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n2", "n3"} {
		if _, err := c.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	next := wait(t, c, "takeover while n1 is frozen", func(r eventlog.Record) bool {
		return r.Event == "gate_open" && r.Node != "n1" && r.Epoch > paused.Epoch
	})
	t1, _ := old.Signal(syscall.SIGCONT)
	rej := wait(t, c, "n1's stale write refused", func(r eventlog.Record) bool {
		return r.Node == "n1" && r.Event == "action_rejected" && r.RequestID == paused.RequestID
	})
	if rej.Epoch != paused.Epoch || !strings.Contains(rej.Reason, "fenced") {
		t.Fatalf("rejection %+v, want epoch %d refused by the fence", rej, paused.Epoch)
	}
	for _, r := range c.Events() {
		if r.Node == "n1" && r.Event == "action_ok" && r.MonoNS > t1 && r.Epoch < next.Epoch {
			t.Errorf("stale write %s acknowledged after the thaw", r.RequestID)
		}
	}
	t.Logf("n1 paused in epoch %d, %s took over with epoch %d; n1's write after the thaw: %s",
		paused.Epoch, next.Node, next.Epoch, rej.Reason)
	wait(t, c, "a write by the new leader", func(r eventlog.Record) bool {
		return r.Node == next.Node && r.Event == "action_ok" && r.Epoch == next.Epoch
	})
	checkHistory(t, c, dsn)
}
