// Package cronshell tests the cron-shell example: a nightly shell job that three
// hosts' cron starts through `pgleader run --once-per 24h --wait 0`, run as real
// processes against a real PostgreSQL.
package cronshell

import (
	"context"
	"encoding/json"
	"fmt"
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

// hosts is the test's three hosts: one pgleader binary, one database, the job.
type hosts struct {
	pgleader string
	dsn      string
	job      string
	db       *pgx.Conn
}

func setup(t *testing.T) *hosts {
	pgrun.Need(t, "install PostgreSQL's client: apt-get install -y postgresql-client (.ci/install-deps)", "psql", "sh")
	dsn := pgtest.MigratedDSN(t)
	h := &hosts{pgleader: pgrun.Build(t), dsn: dsn}
	var err error
	if h.job, err = filepath.Abs("nightly-report.sh"); err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if h.db, err = pgx.Connect(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.db.Close(context.Background()) })
	if _, err := h.db.Exec(context.Background(), string(schema)); err != nil {
		t.Fatal(err)
	}
	return h
}

// cron fires host's cron entry for the job of scope: the README's command line,
// with flags added after it (a later --wait wins).
func (h *hosts) cron(t *testing.T, host, scope string, flags []string, env ...string) *pgrun.Proc {
	args := append([]string{h.pgleader, "run", "--id", host, "--scope", scope}, pgrun.Fast...)
	args = append(append(args, "--once-per", "24h", "--wait", "0"), flags...)
	return pgrun.Start(t, host+"-"+scope, append([]string{"DATABASE_URL=" + h.dsn}, env...), append(args, "--", h.job)...)
}

// exits runs p to its end and checks its exit code and that its output says
// why; says "" means a quiet run: no output at all.
func (h *hosts) exits(t *testing.T, p *pgrun.Proc, code int, says string) {
	t.Helper()
	got := p.Wait(t, 30*time.Second)
	switch {
	case got != code:
		t.Errorf("%s exited %d, want %d; output:\n%s", p.Name, got, code, p.Output())
	case says == "" && p.Output() != "":
		t.Errorf("%s is not quiet; output:\n%s", p.Name, p.Output())
	case !strings.Contains(p.Output(), says):
		t.Errorf("%s's output does not say %q:\n%s", p.Name, says, p.Output())
	}
}

// quietRun checks that a run of the job printed the job's own line only:
// pgleader run logs nothing on success.
func quietRun(t *testing.T, p *pgrun.Proc) {
	t.Helper()
	if strings.Contains(p.Output(), "level=") {
		t.Errorf("%s logged on a successful run:\n%s", p.Name, p.Output())
	}
}

func (h *hosts) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := h.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// reports returns the scope's report rows as "node/epoch".
func (h *hosts) reports(t *testing.T, scope string) []string {
	t.Helper()
	rows, err := h.db.Query(context.Background(), "SELECT node || '/' || epoch FROM nightly_reports WHERE scope = $1 ORDER BY id", scope)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// statusAlerts returns the alerts of pgleader status -o json as "kind scope".
func (h *hosts) statusAlerts(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command(h.pgleader, "status", "-o", "json", "--dsn", h.dsn)
	out, _ := cmd.Output() // non-zero while alerts are up
	var st struct {
		Alerts []struct{ Alert, Scope string }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("pgleader status -o json: %v\n%s", err, out)
	}
	var got []string
	for _, a := range st.Alerts {
		got = append(got, a.Alert+" "+a.Scope)
	}
	return got
}

// runs returns the scope's rows of pgleader.runs as "holder:exit_code".
func (h *hosts) runs(t *testing.T, scope string) []string {
	t.Helper()
	rows, err := h.db.Query(context.Background(),
		"SELECT holder || ':' || coalesce(exit_code::text, 'none') FROM pgleader.runs WHERE scope = $1 ORDER BY id", scope)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNightly fires three hosts' cron for the nightly job at slightly different
// times, as the README sets it up.
func TestNightly(t *testing.T) {
	pgtest.Slow(t)
	h := setup(t)

	// host1's cron fires first and its job runs long; host2's fires while it
	// runs; host3's after it completed. The job runs once, on host1.
	t.Run("OncePerDay", func(t *testing.T) {
		const scope = "nightly-report"
		hold := filepath.Join(t.TempDir(), "hold")
		if err := os.WriteFile(hold, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		host1 := h.cron(t, "host1", scope, nil, "NIGHTLY_HOLD="+hold)
		pgtest.WaitFor(t, "host1's run to begin", 20*time.Second, func() bool {
			return h.count(t, "SELECT count(*) FROM pgleader.runs WHERE scope = $1 AND holder = 'host1' AND ended_at IS NULL", scope) == 1
		})
		h.exits(t, h.cron(t, "host2", scope, []string{"--log-level", "info"}), 0, "another node leads: not running the command")
		if err := os.Remove(hold); err != nil {
			t.Fatal(err)
		}
		h.exits(t, host1, 0, "nightly-report: written by host1")
		quietRun(t, host1)
		h.exits(t, h.cron(t, "host3", scope, []string{"--log-level", "info"}), 0, "this period's run already completed: not running the command")
		h.exits(t, h.cron(t, "host4", scope, nil), 0, "") // quiet when skipped too

		if got := h.reports(t, scope); len(got) != 1 || !strings.HasPrefix(got[0], "host1/") {
			t.Errorf("reports %v, want exactly one, by host1", got)
		}
		if got := h.runs(t, scope); len(got) != 1 || got[0] != "host1:0" {
			t.Errorf("pgleader.runs %v, want exactly one completed run, host1's", got)
		}
	})

	// host1's job fails (exit 1, nothing written): the day is not done, and
	// host2's cron, firing next, runs it; host3's finds it done.
	t.Run("FailedRunIsRetried", func(t *testing.T) {
		const scope = "nightly-report-retried"
		h.exits(t, h.cron(t, "host1", scope, nil, "NIGHTLY_FAIL=1"), 1, "source unreachable")
		h.exits(t, h.cron(t, "host2", scope, nil), 0, "nightly-report: written by host2")
		h.exits(t, h.cron(t, "host3", scope, nil), 0, "")

		if got := h.reports(t, scope); len(got) != 1 || !strings.HasPrefix(got[0], "host2/") {
			t.Errorf("reports %v, want exactly one, by host2", got)
		}
		if got := h.runs(t, scope); strings.Join(got, " ") != "host1:1 host2:0" {
			t.Errorf("pgleader.runs %v, want host1's failed run, then host2's completed one", got)
		}
		if n := h.count(t, "SELECT count(*) FROM pgleader.runs WHERE scope = $1 AND exit_code = 0", scope); n != 1 {
			t.Errorf("%d completed runs, want 1", n)
		}
	})

	// host1's pgleader run dies (kill -9) while its job runs: its guard kills
	// the job, which wrote nothing; the day is not done, and host2 runs it.
	t.Run("HostDiesMidRun", func(t *testing.T) {
		const scope = "nightly-report-crashed"
		hold := filepath.Join(t.TempDir(), "hold")
		if err := os.WriteFile(hold, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		host1 := h.cron(t, "host1", scope, nil, "NIGHTLY_HOLD="+hold)
		var guards, jobs []int
		pgtest.WaitFor(t, "host1's job to start under its guard", 20*time.Second, func() bool {
			guards, jobs = pgrun.Children(host1.Pid()), nil
			for _, g := range guards {
				jobs = append(jobs, pgrun.Children(g)...)
			}
			return len(jobs) > 0
		})
		host1.Kill9(t)
		pgtest.WaitFor(t, "host1's guard and job to exit", 10*time.Second, func() bool {
			return !slices.ContainsFunc(append(guards, jobs...), func(pid int) bool { return !pgrun.Gone(pid) })
		})
		h.exits(t, h.cron(t, "host2", scope, nil, "NIGHTLY_HOLD="+hold+"-not-there"), 0, "nightly-report: written by host2")

		if got := h.reports(t, scope); len(got) != 1 || !strings.HasPrefix(got[0], "host2/") {
			t.Errorf("reports %v, want exactly one, by host2", got)
		}
		if got := h.runs(t, scope); strings.Join(got, " ") != "host1:none host2:0" {
			t.Errorf("pgleader.runs %v, want host1's unfinished run, then host2's completed one", got)
		}
	})

	// Hosts whose cron fires together with --wait retry a failed run within the
	// period: host1 wins, its job fails; host2, waiting, wins next, finds the
	// day's run not completed, and runs it.
	t.Run("FailedRunIsRetriedWithinWait", func(t *testing.T) {
		const scope = "nightly-report-waited"
		hold := filepath.Join(t.TempDir(), "hold")
		if err := os.WriteFile(hold, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		host1 := h.cron(t, "host1", scope, []string{"--wait", "30s"}, "NIGHTLY_HOLD="+hold, "NIGHTLY_FAIL=1")
		pgtest.WaitFor(t, "host1's run to begin", 20*time.Second, func() bool {
			return h.count(t, "SELECT count(*) FROM pgleader.runs WHERE scope = $1 AND holder = 'host1' AND ended_at IS NULL", scope) == 1
		})
		host2 := h.cron(t, "host2", scope, []string{"--wait", "30s"})
		pgtest.WaitFor(t, "host2 to wait as a candidate", 20*time.Second, func() bool {
			return h.count(t, "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'host2' AND $1 = ANY (scopes) AND stopped_at IS NULL", scope) == 1
		})
		if err := os.Remove(hold); err != nil {
			t.Fatal(err)
		}
		h.exits(t, host1, 1, "source unreachable")
		h.exits(t, host2, 0, "nightly-report: written by host2")
		quietRun(t, host2)
		if got := h.runs(t, scope); strings.Join(got, " ") != "host1:1 host2:0" {
			t.Errorf("pgleader.runs %v, want host1's failed run, then host2's completed one", got)
		}
		// A host that waits while the run completes elsewhere wins, finds it done,
		// and skips it.
		h.exits(t, h.cron(t, "host3", scope, []string{"--wait", "5s"}), 0, "")
	})

	// --skipped-exit tells a skipped run from one that ran (flock -E).
	t.Run("SkippedExit", func(t *testing.T) {
		const scope = "nightly-report-skipped"
		skip := []string{"--skipped-exit", "75"}
		h.exits(t, h.cron(t, "host1", scope, skip), 0, "nightly-report: written by host1")
		h.exits(t, h.cron(t, "host2", scope, skip), 75, "")
		h.exits(t, h.cron(t, "host3", scope, skip, "NIGHTLY_FAIL=1"), 75, "") // skipped: the job never ran
	})

	// A nightly scope's terms are planned changes (each run's term ends with a
	// shutdown), so the collector never counts them as flapping, however many
	// fall within its window; the same number of terms ended by crashes does.
	t.Run("NightlyTermsAreNotFlapping", func(t *testing.T) {
		const calm, crashing = "nightly-many", "nightly-crashing"
		for i := range 8 {
			key := []string{"--once-key", fmt.Sprintf("day-%d", i)}
			h.exits(t, h.cron(t, fmt.Sprintf("host%d", i%3+1), calm, key), 0, "nightly-report: written by")
			p := h.cron(t, fmt.Sprintf("host%d", i%3+1), crashing, key, "NIGHTLY_HOLD=/")
			pgtest.WaitFor(t, "the run to begin", 20*time.Second, func() bool {
				return h.count(t, "SELECT count(*) FROM pgleader.runs WHERE scope = $1 AND run_key = $2", crashing, key[1]) == 1
			})
			p.Kill9(t)
		}
		alerts := h.statusAlerts(t)
		if n := h.count(t, "SELECT count(*) FROM pgleader.terms WHERE scope = $1", calm); n != 8 {
			t.Fatalf("%s has %d terms, want 8", calm, n)
		}
		if slices.Contains(alerts, "flapping "+calm) {
			t.Errorf("%d cron runs of %s raised flapping: %v", 8, calm, alerts)
		}
		if !slices.Contains(alerts, "flapping "+crashing) {
			t.Errorf("8 crashed terms of %s within the window did not raise flapping: %v", crashing, alerts)
		}
	})

	// The job's write is fenced: run with the epoch of a term that has ended
	// (host2's above; host3's claim came after it), psql stops at the fence,
	// the job exits 3 and writes nothing.
	t.Run("StaleEpochIsRefused", func(t *testing.T) {
		const scope = "nightly-report-retried"
		var stale int64
		if err := h.db.QueryRow(context.Background(), "SELECT epoch FROM pgleader.runs WHERE scope = $1 AND holder = 'host2'", scope).Scan(&stale); err != nil {
			t.Fatal(err)
		}
		before := len(h.reports(t, scope))
		job := pgrun.Start(t, "stale-job", []string{"DATABASE_URL=" + h.dsn, "PGLEADER_SCOPE=" + scope,
			"PGLEADER_EPOCH=" + strconv.FormatInt(stale, 10), "PGLEADER_NODE_ID=host2", "PGLEADER_RUN_KEY=replayed"}, h.job)
		h.exits(t, job, 3, "which is no longer current")
		if after := len(h.reports(t, scope)); after != before {
			t.Errorf("a write with stale epoch %d committed: %d reports, want %d", stale, after, before)
		}
	})
}
