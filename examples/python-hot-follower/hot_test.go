// Package hotfollower tests the python-hot-follower example: on three
// replicas, a Python service that is always up beside `pgleader node --listen
// unix:…`, follows /v1/transitions, and acts only while its node leads — its
// database writes fenced, its external effects preceded by GET /v1/leader —
// as real processes against a real PostgreSQL.
package hotfollower

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/pgrun"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/history"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const scope = "ledger"

// effect is one line of the sink: an external effect a service performed.
type effect struct {
	Replica string `json:"replica"`
	Epoch   int64  `json:"epoch"`
	StartNS int64  `json:"start_ns"` // CLOCK_MONOTONIC
	EndNS   int64  `json:"end_ns"`
}

func readEffects(t *testing.T, path string) []effect {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []effect
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e effect
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		out = append(out, e)
	}
	return out
}

// TestOnlyTheLeaderActs runs the service on three replicas, freezes the
// leader's node (SIGSTOP, past its lease), then kills it (kill -9), then
// stops it (SIGTERM), and checks that each time another replica's service
// takes over, that no two replicas' external effects ever overlap, that each
// lies inside an open gate of its own node under the same epoch, and that every
// fenced write belongs to its writer's term.
func TestOnlyTheLeaderActs(t *testing.T) {
	pgtest.Slow(t)
	python := pgrun.Python(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, string(schema)); err != nil {
		t.Fatal(err)
	}
	service, err := filepath.Abs("hot_follower.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sink := filepath.Join(dir, "effects.jsonl")
	c := cluster.New(cluster.Options{Bin: pgrun.Build(t), DSN: dsn, Dir: dir, Scopes: []string{scope}, NodeArgs: pgrun.Fast})
	t.Cleanup(c.Close)
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range []string{"r1", "r2", "r3"} {
				b, _ := os.ReadFile(filepath.Join(dir, id+".log"))
				t.Logf("--- node %s's log:\n%s", id, b)
			}
		}
	})
	replicas := []string{"r1", "r2", "r3"}
	for _, id := range replicas {
		sock := "unix:" + filepath.Join(dir, id+".sock")
		if _, err := c.Start(id, "--listen", sock); err != nil {
			t.Fatal(err)
		}
		pgrun.Start(t, id+"-service", []string{"DATABASE_URL=" + dsn}, python, service,
			"--api", sock, "--scope", scope, "--replica", id, "--sink", sink)
	}

	// acting returns the replica whose service performed an effect since mono.
	acting := func(since int64) (string, int64) {
		for _, e := range readEffects(t, sink) {
			if e.StartNS > since {
				return e.Replica, e.StartNS
			}
		}
		return "", 0
	}
	var leader string
	pgtest.WaitFor(t, "a replica's service to act", 30*time.Second, func() bool { leader, _ = acting(0); return leader != "" })

	type figure struct {
		fault          string
		from, to       string
		takeover, last time.Duration // fault → the successor's first effect; fault → the old leader's last effect's end
	}
	var figures []figure
	faults := []struct {
		name  string
		apply func(n *cluster.Node) error
		undo  func(n *cluster.Node) error
	}{
		{"SIGSTOP of the leader's node for 1.5 s", func(n *cluster.Node) error { _, err := n.Signal(syscall.SIGSTOP); return err },
			func(n *cluster.Node) error {
				time.Sleep(1500 * time.Millisecond)
				_, err := n.Signal(syscall.SIGCONT)
				return err
			}},
		{"kill -9 of the leader's node", func(n *cluster.Node) error { _, err := n.Kill(); return err },
			func(n *cluster.Node) error {
				_, err := c.Start(n.ID, "--listen", "unix:"+filepath.Join(dir, n.ID+".sock"))
				return err
			}},
		{"SIGTERM of the leader's node", func(n *cluster.Node) error { _, err := n.Signal(syscall.SIGTERM); return err },
			func(n *cluster.Node) error {
				if err := n.Wait(10 * time.Second); err != nil {
					return err
				}
				_, err := c.Start(n.ID, "--listen", "unix:"+filepath.Join(dir, n.ID+".sock"))
				return err
			}},
	}
	settled := int64(0) // effects before it belong to the previous fault
	for _, f := range faults {
		// The leader acts, after the previous fault was undone.
		var since int64
		pgtest.WaitFor(t, "the leader's service to act", 20*time.Second, func() bool {
			leader, since = acting(settled)
			return leader != ""
		})
		n := c.Node(leader)
		t0 := monotime.Now()
		if err := f.apply(n); err != nil {
			t.Fatal(err)
		}
		var next string
		var at int64
		pgtest.WaitFor(t, "another replica's service to act after "+f.name, 20*time.Second, func() bool {
			for _, e := range readEffects(t, sink) {
				if e.StartNS > t0 && e.Replica != leader {
					next, at = e.Replica, e.StartNS
					return true
				}
			}
			return false
		})
		if err := f.undo(n); err != nil {
			t.Fatalf("%s on %s (pid %d): %v", f.name, n.ID, n.PID(), err)
		}
		settled = monotime.Now()
		var last int64
		for _, e := range readEffects(t, sink) {
			if e.Replica == leader && e.StartNS >= since && e.EndNS > last {
				last = e.EndNS
			}
		}
		figures = append(figures, figure{f.name, leader, next, time.Duration(at - t0), time.Duration(last - t0)})
	}
	end := monotime.Now()
	if _, err := c.Poll(); err != nil {
		t.Fatal(err)
	}

	// The external effects: never two replicas at once, each inside an open
	// gate of its own node, under that gate's epoch.
	effects := readEffects(t, sink)
	gates := history.GateIntervals(c.Events(), scope, end)
	for i, a := range effects {
		inside := slices.ContainsFunc(gates, func(g history.Interval) bool {
			return g.Node == a.Replica && g.Epoch == a.Epoch && g.Start <= a.StartNS && a.EndNS <= g.End
		})
		if !inside {
			t.Errorf("effect of %s under epoch %d [%d, %d] lies outside every open gate of its node", a.Replica, a.Epoch, a.StartNS, a.EndNS)
		}
		for _, b := range effects[i+1:] {
			if a.Replica != b.Replica && a.StartNS < b.EndNS && b.StartNS < a.EndNS {
				t.Errorf("effects of %s (epoch %d) and %s (epoch %d) overlapped", a.Replica, a.Epoch, b.Replica, b.Epoch)
			}
		}
	}
	// The fenced writes: each by its term's holder, none after the next term began.
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM hot_writes w JOIN pgleader.terms t ON t.scope = w.scope AND t.epoch = w.epoch
	               WHERE t.holder <> w.replica`); n != 0 {
		t.Errorf("%d fenced writes by another replica than their term's holder", n)
	}
	if n := count(`SELECT count(*) FROM hot_writes w WHERE EXISTS (SELECT 1 FROM pgleader.terms t
	               WHERE t.scope = w.scope AND t.epoch > w.epoch AND t.acquired_at <= w.at)`); n != 0 {
		t.Errorf("%d fenced writes committed after a later term began", n)
	}
	if n := count(`SELECT count(DISTINCT replica) FROM hot_writes`); n < 2 {
		t.Errorf("writes by %d replicas; the faults should have moved the work", n)
	}
	t.Logf("%d effects, %d fenced writes; pgleader node %s", len(effects), count("SELECT count(*) FROM hot_writes"), strings.Join(pgrun.Fast, " "))
	for _, f := range figures {
		t.Logf("%s: %s → %s; the successor's first effect %v after the fault; the old leader's last effect ended %v after it",
			f.fault, f.from, f.to, f.takeover.Round(time.Millisecond), f.last.Round(time.Millisecond))
	}
}
