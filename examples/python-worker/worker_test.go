// Package pythonworker tests the python-worker example: a Python worker under
// `pgleader run` on two nodes, its writes fenced with $PGLEADER_EPOCH, as real
// processes against a real PostgreSQL, with Debian's python3 and psycopg2.
package pythonworker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/pgrun"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	python = "/usr/bin/python3" // Debian's, with python3-psycopg2
	scope  = "ledger-worker"
)

type node struct {
	id  string
	api string // its --listen address
	run *pgrun.Proc
}

// TestTakeoverFencesTheOldEpoch runs the worker under pgleader run on two nodes,
// kills the leader's pgleader run with SIGKILL, and checks that the successor's
// worker writes under a new epoch, that the killed node's worker is gone, and
// that a write with the old epoch is refused (PLF01) and never committed after
// the takeover.
func TestTakeoverFencesTheOldEpoch(t *testing.T) {
	pgtest.Slow(t)
	pgrun.Need(t, "install Debian's python3 (.ci/install-deps)", python)
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		pgrun.Missing(t, "psycopg2 missing for "+python+": apt-get install -y python3-psycopg2 (.ci/install-deps): "+strings.TrimSpace(string(out)))
	}
	dsn := pgtest.MigratedDSN(t)
	pgleader := pgrun.Build(t)
	worker, err := filepath.Abs("worker.py")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, string(schema)); err != nil {
		t.Fatal(err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}

	// The README's command line, on two nodes.
	nodes := make([]*node, 2)
	for i, id := range []string{"node-a", "node-b"} {
		n := &node{id: id, api: "127.0.0.1:" + strconv.Itoa(pgrun.FreePort(t))}
		args := append([]string{pgleader, "run", "--id", id, "--scope", scope, "--listen", n.api}, pgrun.Fast...)
		n.run = pgrun.Start(t, id, []string{"DATABASE_URL=" + dsn, "WORKER_INTERVAL=0.02"}, append(args, "--", python, worker)...)
		nodes[i] = n
	}
	leading := func() (*node, pgrun.Leader) {
		for _, n := range nodes {
			if l, err := pgrun.Ask(n.api, scope); err == nil && l.Leading && l.Supervisor.State == "running" {
				return n, l
			}
		}
		return nil, pgrun.Leader{}
	}
	var first *node
	var l1 pgrun.Leader
	pgtest.WaitFor(t, "a leader whose worker runs", 30*time.Second, func() bool { first, l1 = leading(); return first != nil })
	old, workerPID := l1.Epoch, l1.Supervisor.PID
	pgtest.WaitFor(t, "the first worker's writes", 20*time.Second, func() bool {
		return count("SELECT count(*) FROM worker_writes WHERE epoch = $1 AND pid = $2", old, workerPID) >= 5
	})
	// What the killed pgleader run leaves: its guard process and the worker,
	// the guard's child.
	guards := pgrun.Children(first.run.Pid())
	if len(guards) == 0 || !slices.ContainsFunc(guards, func(g int) bool { return slices.Contains(pgrun.Children(g), workerPID) }) {
		t.Fatalf("worker %d is not a child of a child (the guard) of pgleader run %d: children %v", workerPID, first.run.Pid(), guards)
	}

	killed := time.Now() // figures count from the signal
	first.run.Kill9(t)

	// The successor's worker writes under a new epoch.
	var next *node
	var l2 pgrun.Leader
	pgtest.WaitFor(t, "the other node to lead with a running worker", 20*time.Second, func() bool {
		next, l2 = leading()
		return next != nil
	})
	led := time.Since(killed)
	if next == first || l2.Epoch <= old {
		t.Fatalf("after the kill, %s leads with epoch %d; want the other node, epoch above %d", next.id, l2.Epoch, old)
	}
	pgtest.WaitFor(t, "the successor's writes", 20*time.Second, func() bool {
		return count("SELECT count(*) FROM worker_writes WHERE epoch = $1 AND node = $2", l2.Epoch, next.id) >= 5
	})

	// No orphan: the killed node's guard and worker are gone.
	pgtest.WaitFor(t, "the killed node's worker and guard to exit", 10*time.Second, func() bool {
		return pgrun.Gone(workerPID) && !slices.ContainsFunc(guards, func(g int) bool { return !pgrun.Gone(g) })
	})

	// The old epoch's worker, replayed: its write function refuses with PLF01
	// (exit 3) and writes nothing.
	before := count("SELECT count(*) FROM worker_writes WHERE epoch = $1", old)
	stale := pgrun.Start(t, "stale-write", []string{"DATABASE_URL=" + dsn, "PGLEADER_SCOPE=" + scope,
		"PGLEADER_EPOCH=" + strconv.FormatInt(old, 10), "PGLEADER_NODE_ID=" + first.id}, python, worker, "once")
	if code := stale.Wait(t, 20*time.Second); code != 3 || !strings.Contains(stale.Output(), "fenced (PLF01)") {
		t.Errorf("a write with stale epoch %d exited %d, want 3 (fenced, PLF01); output:\n%s", old, code, stale.Output())
	}
	if after := count("SELECT count(*) FROM worker_writes WHERE epoch = $1", old); after != before {
		t.Errorf("epoch %d has %d writes after the stale write, %d before", old, after, before)
	}
	if n := count("SELECT count(*) FROM pgleader.audit WHERE kind = 'fence_rejected' AND scope = $1 AND epoch = $2", scope, old); n != 1 {
		t.Errorf("%d fence_rejected audit rows for epoch %d, want the worker's report", n, old)
	}

	// Nothing under the old epoch was written after the successor's first
	// write: an old fenced transaction holds the bump off until it ends, and a
	// new one fences after the bump. Every write of the new epoch is the
	// successor's worker's.
	if n := count(`SELECT count(*) FROM worker_writes
	               WHERE epoch = $1 AND at >= (SELECT min(at) FROM worker_writes WHERE epoch = $2)`, old, l2.Epoch); n != 0 {
		t.Errorf("%d writes with epoch %d after the first write of epoch %d", n, old, l2.Epoch)
	}
	if n := count("SELECT count(DISTINCT (node, pid)) FROM worker_writes WHERE epoch = $1", l2.Epoch); n != 1 {
		t.Errorf("epoch %d written by %d processes, want 1", l2.Epoch, n)
	}
	t.Logf("epoch %d (%s, worker %d) → epoch %d (%s, worker %d): the successor led with its worker running %v after the kill (polled every 2 ms)",
		old, first.id, workerPID, l2.Epoch, next.id, l2.Supervisor.PID, led.Round(time.Millisecond))
}
