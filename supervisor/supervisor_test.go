package supervisor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/child"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// The test binary is its own guard, as the pgleader binary is in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == GuardArg && os.Args[2] == "--" {
		os.Exit(RunGuard(os.Args[3:]))
	}
	pgtest.Main(m)
}

var guardArgv = []string{os.Args[0], GuardArg}

// fast is a short timing for tests: I + T < W < L.
func fast(dsn, node string, scopes ...string) election.Config {
	return election.Config{DSN: dsn, NodeID: node, Scopes: scopes,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond,
		DrainTimeout: 2 * time.Second}
}

func newElector(t *testing.T, cfg election.Config) *election.Elector {
	t.Helper()
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// readPids reads the pids a test child wrote, one per line.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

func TestCheckRefusesBeforeCampaigning(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no command", Config{Guard: guardArgv}, "no command"},
		{"not found", Config{Command: []string{"/nonexistent/job"}, Guard: guardArgv}, "cannot run"},
		{"not on PATH", Config{Command: []string{"no-such-program-pgleader"}, Guard: guardArgv}, "cannot run"},
		{"a directory", Config{Command: []string{"/tmp"}, Guard: guardArgv}, "cannot run"},
		{"bad policy", Config{Command: []string{"true"}, Guard: guardArgv, Restart: "sometimes"}, "invalid restart policy"},
		{"once restarts", Config{Command: []string{"true"}, Guard: guardArgv, Once: true, Restart: RestartAlways}, "--once"},
		{"tiny period", Config{Command: []string{"true"}, Guard: guardArgv, Once: true, Ledger: &Ledger{}, OncePer: time.Millisecond}, "at least 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	ok := Config{Command: []string{"true"}, Guard: guardArgv}
	if err := ok.Check(); err != nil || !filepath.IsAbs(ok.Command[0]) {
		t.Fatalf("Check() = %v, command %q: want nil and an absolute path", err, ok.Command[0])
	}
}

// TestGuard exercises the guard process alone: what protects the child's
// neighbours when the supervisor cannot act.
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// The child leaves a process in its group and one that escaped into a
	// session of its own, and records all three pids.
	script := `echo $$ >> ` + pids + `; sleep 60 & echo $! >> ` + pids + `; setsid sleep 60 & echo $! >> ` + pids + `; wait`

	start := func(t *testing.T) *guardProc {
		g, err := startGuard(append(guardArgv, "--", "/bin/sh", "-c", script))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(pids)
		if err := g.start(os.Environ()); err != nil {
			t.Fatal(err)
		}
		if r := parseReport(<-g.reports); r.kind != "started" {
			t.Fatalf("first report %+v, want started", r)
		}
		pgtest.WaitFor(t, "three pids", 5*time.Second, func() bool { return len(readPids(t, pids)) == 3 })
		return g
	}
	allGone := func(t *testing.T, ps []int) {
		t.Helper()
		pgtest.WaitFor(t, "every process of the child gone", 5*time.Second, func() bool {
			for _, p := range ps {
				if child.Alive(p) {
					return false
				}
			}
			return true
		})
	}

	t.Run("SupervisorGone", func(t *testing.T) {
		g := start(t)
		ps := readPids(t, pids)
		// The supervisor "dies": its end of the command pipe closes, nothing else.
		g.cmds.Close()
		allGone(t, ps)
		if err := <-g.exited; err != nil {
			t.Fatalf("guard exit: %v", err)
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		g := start(t)
		defer g.close()
		ps := readPids(t, pids)
		deadline := monotime.Now() + int64(300*time.Millisecond)
		if err := g.deadline(deadline); err != nil {
			t.Fatal(err)
		}
		r := parseReport(<-g.reports)
		if r.kind != "exited" || r.cause != "deadline" || r.code != 128+int(syscall.SIGKILL) {
			t.Fatalf("report %+v, want exited by the deadline with SIGKILL", r)
		}
		if r.mono < deadline {
			t.Fatalf("the child was reaped %v before the deadline", time.Duration(deadline-r.mono))
		}
		allGone(t, ps)
	})

	t.Run("DeadlineRenewed", func(t *testing.T) {
		g := start(t)
		defer g.close()
		for range 5 {
			if err := g.deadline(monotime.Now() + int64(200*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case l := <-g.reports:
			t.Fatalf("renewed deadline: the guard reported %q", l)
		default:
		}
		_ = g.deadline(0) // disarmed: nothing happens after the last deadline
		time.Sleep(300 * time.Millisecond)
		select {
		case l := <-g.reports:
			t.Fatalf("disarmed deadline: the guard reported %q", l)
		default:
		}
		_ = g.kill()
		if r := parseReport(<-g.reports); r.cause != "kill" {
			t.Fatalf("report %+v, want exited by kill", r)
		}
	})

	t.Run("ChildExitTakesItsDescendants", func(t *testing.T) {
		g, err := startGuard(append(guardArgv, "--", "/bin/sh", "-c",
			`sleep 60 & echo $! >> `+pids+`; setsid sleep 60 & echo $! >> `+pids+`; exit 7`))
		if err != nil {
			t.Fatal(err)
		}
		defer g.close()
		os.Remove(pids)
		_ = g.start(os.Environ())
		<-g.reports // started
		r := parseReport(<-g.reports)
		if r.kind != "exited" || r.code != 7 || r.cause != "exit" {
			t.Fatalf("report %+v, want exited 7", r)
		}
		allGone(t, readPids(t, pids))
	})
}

type recorder struct {
	mu     sync.Mutex
	causes []string
}

func (r *recorder) Child(event, _ string, _ int64, _, _ int, cause string, _, _ int64) {
	if event == EventChildExited {
		r.mu.Lock()
		r.causes = append(r.causes, cause)
		r.mu.Unlock()
	}
}

func (r *recorder) exits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.causes...)
}

// TestRun runs the supervisor against a real PostgreSQL.
func TestRun(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	t.Run("EnvironmentAndExitCode", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "env")
		e := newElector(t, fast(dsn, "env-node", "run-env"))
		s, err := New(e, Config{Scope: "run-env", Guard: guardArgv,
			Command: []string{"/bin/sh", "-c", `echo "$PGLEADER_SCOPE $PGLEADER_EPOCH $PGLEADER_NODE_ID" > ` + out + `; exit 3`}})
		if err != nil {
			t.Fatal(err)
		}
		code, err := s.Run(ctx)
		if err != nil || code != 3 {
			t.Fatalf("Run = %d, %v; want 3 (the command's code), nil", code, err)
		}
		b, _ := os.ReadFile(out)
		f := strings.Fields(string(b))
		var epoch int64
		if err := conn.QueryRow(ctx, "SELECT epoch FROM pgleader.terms WHERE scope = 'run-env' AND holder = 'env-node' ORDER BY epoch DESC LIMIT 1").Scan(&epoch); err != nil {
			t.Fatal(err)
		}
		if len(f) != 3 || f[0] != "run-env" || f[1] != strconv.FormatInt(epoch, 10) || f[2] != "env-node" {
			t.Fatalf("child saw %q, want \"run-env %d env-node\"", b, epoch)
		}
		var open bool
		if err := conn.QueryRow(ctx, "SELECT released_at IS NULL FROM pgleader.terms WHERE scope = 'run-env' AND epoch = $1", epoch).Scan(&open); err != nil || open {
			t.Fatalf("term still open after Run returned (%v)", err)
		}
	})

	t.Run("StopDrainsBeforeRelease", func(t *testing.T) {
		dir := t.TempDir()
		// The child takes 300 ms to finish after SIGTERM and records when it
		// ended (the database's clock runs on this host too).
		script := `trap 'sleep 0.3; date +%s.%N > ` + dir + `/ended; exit 0' TERM; echo $$ > ` + dir + `/pid; while :; do sleep 0.05; done`
		e := newElector(t, fast(dsn, "drain-node", "run-drain"))
		s, err := New(e, Config{Scope: "run-drain", Guard: guardArgv, DrainTimeout: time.Second, Command: []string{"/bin/sh", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan int, 1)
		go func() { code, _ := s.Run(rctx); done <- code }()
		pgtest.WaitFor(t, "the child running", 10*time.Second, func() bool { return len(readPids(t, dir+"/pid")) == 1 })
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("Run after a stop = %d, want 0", code)
		}
		b, err := os.ReadFile(dir + "/ended")
		if err != nil {
			t.Fatalf("the child did not get SIGTERM (or could not trap it): %v", err)
		}
		ended, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		var released float64
		if err := conn.QueryRow(ctx, "SELECT extract(epoch FROM released_at) FROM pgleader.terms WHERE scope = 'run-drain' ORDER BY epoch DESC LIMIT 1").Scan(&released); err != nil {
			t.Fatal(err)
		}
		if released < ended {
			t.Fatalf("the term was released %.3fs before the child ended: a successor's child could overlap", ended-released)
		}
	})

	t.Run("LossKillsTheGroupAtOnce", func(t *testing.T) {
		dir := t.TempDir()
		e := newElector(t, fast(dsn, "loss-node", "run-loss"))
		rec := &recorder{}
		s, err := New(e, Config{Scope: "run-loss", Guard: guardArgv, Restart: RestartNever, Recorder: rec, Log: slog.Default(),
			Command: []string{"/bin/sh", "-c", `trap '' TERM; echo $$ > ` + dir + `/pid; sleep 60 & echo $! >> ` + dir + `/pid; wait`}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		go func() { _, _ = s.Run(rctx); close(done) }()
		pgtest.WaitFor(t, "the child running", 10*time.Second, func() bool { return len(readPids(t, dir+"/pid")) == 2 })
		ps := readPids(t, dir+"/pid")
		// End the node's leadership session from the server: the gate closes.
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = 'pgleader leadership loss-node'`); err != nil {
			t.Fatal(err)
		}
		// Gone within the trust window: before any successor could be elected,
		// and although the child ignores SIGTERM.
		deadline := time.Now().Add(300 * time.Millisecond)
		for _, p := range ps {
			for child.Alive(p) && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if child.Alive(p) {
				t.Fatalf("pid %d still alive %v after the leadership session ended", p, 300*time.Millisecond)
			}
		}
		cancel()
		<-done
		// Killed by the supervisor when its gate closed, not later by the guard's
		// deadline (which alone would also have ended it within the window).
		if causes := rec.exits(); len(causes) == 0 || causes[0] != "killed" {
			t.Fatalf("exit causes %v, want killed first", causes)
		}
	})

	t.Run("OnceWaitZeroWhileAnotherLeads", func(t *testing.T) {
		other := newElector(t, fast(dsn, "other-node", "run-once"))
		octx, stopOther := context.WithCancel(ctx)
		defer func() { stopOther(); _ = other.Wait() }()
		if err := other.Start(octx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Scope("run-once").Await(ctx); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(t.TempDir(), "ran")
		e := newElector(t, fast(dsn, "late-node", "run-once"))
		s, err := New(e, Config{Scope: "run-once", Guard: guardArgv, Once: true, Command: []string{"/bin/sh", "-c", "touch " + marker}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, err := s.Run(ctx)
		if code != 0 || err != nil {
			t.Fatalf("Run = %d, %v; want 0, nil (another node leads)", code, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command ran although another node led the scope")
		}
		t.Logf("--once --wait 0 gave up after %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("OncePerPeriodAcrossHosts", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		count := filepath.Join(t.TempDir(), "count")
		runAs := func(node, script string) int {
			t.Helper()
			e := newElector(t, fast(dsn, node, "run-nightly"))
			s, err := New(e, Config{Scope: "run-nightly", Guard: guardArgv, Once: true, Ledger: &Ledger{Pool: pool}, RunKey: "2026-11-27",
				Command: []string{"/bin/sh", "-c", script}})
			if err != nil {
				t.Fatal(err)
			}
			code, err := s.Run(ctx)
			if err != nil {
				t.Fatalf("%s: %v", node, err)
			}
			return code
		}
		// The first host's job fails: the day is not done, the next host retries.
		if code := runAs("host-1", "echo x >> "+count+"; exit 1"); code != 1 {
			t.Fatalf("host-1 = %d, want the job's 1", code)
		}
		if code := runAs("host-2", "echo x >> "+count); code != 0 {
			t.Fatalf("host-2 = %d, want 0", code)
		}
		// Completed: a third host whose cron fires later does not run it.
		if code := runAs("host-3", "echo x >> "+count); code != 0 {
			t.Fatalf("host-3 = %d, want 0 (not run)", code)
		}
		b, _ := os.ReadFile(count)
		if n := strings.Count(string(b), "x"); n != 2 {
			t.Fatalf("the job ran %d times, want 2 (a failure, then one success)", n)
		}
		var done int
		var by string
		if err := conn.QueryRow(ctx, `SELECT count(*), min(holder) FROM pgleader.runs WHERE scope = 'run-nightly' AND run_key = '2026-11-27' AND exit_code = 0`).Scan(&done, &by); err != nil {
			t.Fatal(err)
		}
		if done != 1 || by != "host-2" {
			t.Fatalf("completed runs: %d by %q, want 1 by host-2", done, by)
		}
	})

	t.Run("RestartOnFailure", func(t *testing.T) {
		count := filepath.Join(t.TempDir(), "count")
		e := newElector(t, fast(dsn, "restart-node", "run-restart"))
		// Fails twice, then succeeds: on-failure restarts it and ends at exit 0.
		s, err := New(e, Config{Scope: "run-restart", Guard: guardArgv, Restart: RestartOnFailure,
			Command: []string{"/bin/sh", "-c", `echo x >> ` + count + `; [ $(wc -l < ` + count + `) -ge 3 ]`}})
		if err != nil {
			t.Fatal(err)
		}
		code, err := s.Run(ctx)
		if code != 0 || err != nil {
			t.Fatalf("Run = %d, %v; want 0, nil", code, err)
		}
		if st := s.Status(); st.Restarts != 2 {
			t.Fatalf("restarts = %d, want 2", st.Restarts)
		}
	})
}

// TestReportTo: the supervisor's state reaches pgleader.nodes.supervisor, from
// the node's own login only.
func TestReportTo(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	e := newElector(t, fast(dsn, "report-node", "report-scope"))
	rctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); _ = e.Wait() }()
	if err := e.Start(rctx); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pgtest.WaitFor(t, "the node registered", 10*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'report-node' AND stopped_at IS NULL").Scan(&n)
		return n == 1
	})
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	report, stop := ReportTo(cfg, "report-node", slog.New(slog.DiscardHandler))
	report(Status{Command: "worker", State: "running", PID: 4242, Restarts: 1})
	stop()
	var doc string
	if err := pool.QueryRow(ctx, "SELECT coalesce(supervisor::text, '') FROM pgleader.nodes WHERE node_id = 'report-node'").Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, `"pid": 4242`) || !strings.Contains(doc, `"command": "worker"`) {
		t.Fatalf("nodes.supervisor = %q, want the reported state", doc)
	}

	// Another login, even one that may campaign, cannot write this node's row.
	if _, err := pool.Exec(ctx, `CREATE ROLE report_other LOGIN; GRANT pgleader_node TO report_other`); err != nil {
		t.Fatal(err)
	}
	ocfg := cfg.Copy()
	ocfg.User = "report_other"
	other, err := pgx.ConnectConfig(ctx, ocfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var ok bool
	if err := other.QueryRow(ctx, `SELECT pgleader.node_supervisor('report-node', '{"command":"forged"}')`).Scan(&ok); err != nil || ok {
		t.Fatalf("another login's write: %v, %v; want false, nil", ok, err)
	}
	if err := other.QueryRow(ctx, `SELECT pgleader.node_supervisor('report-node', '[1,2]')`).Scan(&ok); err == nil {
		t.Fatal("a non-object document was accepted")
	}
	if err := pool.QueryRow(ctx, "SELECT supervisor::text FROM pgleader.nodes WHERE node_id = 'report-node'").Scan(&doc); err != nil || strings.Contains(doc, "forged") {
		t.Fatalf("nodes.supervisor = %q (%v): another login changed it", doc, err)
	}
}
