package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestNodeSIGHUP: SIGHUP reopens the events file (logrotate moved it away) and
// never stops the node; --events-heartbeats=false leaves heartbeat_ok out.
func TestNodeSIGHUP(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	p := startBinary(t, "node", "--dsn", dsn, "--scope", "hup", "--id", "hup-1",
		"--events", events, "--events-heartbeats=false", "--heartbeat-interval", "100ms", "--heartbeat-timeout", "100ms",
		"--trust-window", "300ms", "--session-lease", "500ms")
	cmd, exited, stderr := p.cmd, p.exited, p.stderr
	waitEvents(t, events, exited, "gate_open", func(ls []map[string]any) bool { return has(ls, "gate_open", "") })

	rotated := events + ".1"
	if err := os.Rename(events, rotated); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "the reopen logged", 10*time.Second, func() bool {
		return strings.Contains(stderr.String(), "events file reopened")
	})
	// A resign after the reopen goes to the new file, at the old path.
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, events, exited, "resigned in the new file", func(ls []map[string]any) bool { return has(ls, "resigned", "") })
	select {
	case err := <-exited:
		t.Fatalf("the node exited after SIGHUP: %v", err)
	default:
	}
	for _, f := range []string{rotated, events} {
		for i, l := range pgtest.JSONLines(t, f) {
			if l["event"] == "heartbeat_ok" {
				t.Fatalf("%s line %d is a heartbeat_ok, with --events-heartbeats=false", filepath.Base(f), i+1)
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("node after SIGTERM: %v", err)
	}
}

// TestRunBadInputBeforeCampaigning: pgleader run refuses what it cannot run
// before it touches the database: one line, exit 2, and no node registered.
func TestRunBadInputBeforeCampaigning(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scope", "x"}, "no command"},
		{[]string{"--scope", "x", "--", "/nonexistent/job"}, "cannot run"},
		{[]string{"--scope", "x", "--scope", "y", "--", "true"}, "exactly one --scope"},
		{[]string{"--scope", "x", "--restart", "sometimes", "--", "true"}, "invalid restart policy"},
		{[]string{"--scope", "x", "--wait", "1s", "--", "true"}, "--wait applies to --once"},
		{[]string{"--scope", "x", "--listen", "0.0.0.0:1", "--", "true"}, "not a loopback address"},
		{[]string{"--scope", "x", "--once-per", "10ms", "--", "true"}, "at least 1s"},
		{[]string{"--scope", "x", "--skipped-exit", "75", "--", "true"}, "--skipped-exit applies to --once"},
		{[]string{"--scope", "x", "--once", "--skipped-exit", "256", "--", "true"}, "0 to 255"},
	} {
		cmd := exec.Command(binary, append([]string{"run", "--dsn", dsn, "--id", "bad-input"}, tc.args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2", tc.args, err)
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: %q, want one line containing %q", tc.args, out, tc.want)
		}
	}
	conn := pgtest.Connect(t, dsn)
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'bad-input'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d nodes registered as bad-input (%v): bad input must not campaign", n, err)
	}
}

// TestRunSignalWhileWaiting: SIGTERM to a pgleader run that waits for
// leadership (another node leads) exits 0 at once, its command never started.
func TestRunSignalWhileWaiting(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	dir := t.TempDir()
	holder := startBinary(t, "node", "--dsn", dsn, "--scope", "wait", "--id", "holder", "--events", filepath.Join(dir, "holder.jsonl"))
	waitEvents(t, filepath.Join(dir, "holder.jsonl"), holder.exited, "the holder leading", func(ls []map[string]any) bool { return has(ls, "gate_open", "") })

	marker := filepath.Join(dir, "ran")
	// --log-level info: a --once run is quiet by default, and the test waits
	// for the line that says the waiter follows.
	for _, extra := range [][]string{nil, {"--once", "--wait", "1m", "--log-level", "info"}} {
		args := append([]string{"run", "--dsn", dsn, "--scope", "wait", "--id", "waiter"}, extra...)
		p := startBinary(t, append(args, "--", "touch", marker)...)
		cmd, exited, stderr := p.cmd, p.exited, p.stderr
		pgtest.WaitFor(t, "the waiter following", 10*time.Second, func() bool { return strings.Contains(stderr.String(), "leader observed") })
		sent := time.Now()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("%v: exit after SIGTERM while waiting: %v\n%s", extra, err, stderr.String())
			}
			t.Logf("%v: exited %v after SIGTERM", extra, time.Since(sent).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Fatalf("%v: still running 5s after SIGTERM while waiting", extra)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%v: the command ran although another node led", extra)
		}
	}
}

// TestHistoryShowsRuns: a term in which pgleader run --once ran its command
// says in history whether the run completed, and with which exit code.
func TestHistoryShowsRuns(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	// A keyed run and a plain --once run: both recorded.
	for flag, command := range map[string]string{"--once-key=day-1": "true", "--once": "false"} {
		cmd := exec.Command(binary, "run", "--dsn", dsn, "--scope", "hist-run", flag, "--", command)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if command == "true" && err != nil || command == "false" && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
			t.Fatalf("run -- %s: %v\n%s", command, err, out)
		}
	}
	cmd := exec.Command(binary, "history", "--dsn", dsn, "--scope", "hist-run")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("history: %v\n%s", err, out)
	}
	for _, want := range []string{"shutdown · run completed", "shutdown · run failed (exit 1)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
}

// TestHistoryShowsCrashedChild: a term whose supervised command crashed (an
// exit code, a signal) ends as shutdown (the node stopped because its command
// did), and history says the command crashed and how, in the table, the TSV
// and the JSON; a command that exits 0 reads as exited, not crashed.
func TestHistoryShowsCrashedChild(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	for _, c := range []struct {
		scope, script string
		code          int
	}{
		{"child-exit3", "exit 3", 3},
		{"child-segv", "kill -SEGV $$", 128 + 11},
		{"child-ok", "exit 0", 0},
	} {
		cmd := exec.Command(binary, "run", "--dsn", dsn, "--scope", c.scope, "--", "sh", "-c", c.script)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if c.code == 0 && err != nil || c.code != 0 && (!errors.As(err, &ee) || ee.ExitCode() != c.code) {
			t.Fatalf("run -- sh -c %q: want exit %d, got %v\n%s", c.script, c.code, err, out)
		}
	}
	history := func(format string) string {
		cmd := exec.Command(binary, "history", "--dsn", dsn, "-o", format)
		cmd.Env = cleanEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("history -o %s: %v\n%s", format, err, out)
		}
		return string(out)
	}
	table := history("table")
	for _, want := range []string{"shutdown · command crashed (exit 3)", "shutdown · command crashed (signal 11 (SIGSEGV))",
		"shutdown · command exited (exit 0)"} {
		if !strings.Contains(table, want) {
			t.Errorf("history lacks %q:\n%s", want, table)
		}
	}
	var terms []struct {
		Scope   string `json:"scope"`
		EndedBy string `json:"ended_by"`
		Child   *struct {
			Exits    int    `json:"exits"`
			ExitCode int    `json:"exit_code"`
			Cause    string `json:"cause"`
		} `json:"child"`
	}
	if err := json.Unmarshal([]byte(history("json")), &terms); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tm := range terms {
		if tm.Child == nil {
			t.Errorf("JSON term of %s has no child", tm.Scope)
			continue
		}
		got[tm.Scope] = fmt.Sprintf("%s %d %s %d", tm.EndedBy, tm.Child.ExitCode, tm.Child.Cause, tm.Child.Exits)
	}
	want := map[string]string{"child-exit3": "shutdown 3 exit 1", "child-segv": "shutdown 139 signal 1", "child-ok": "shutdown 0 exit 1"}
	if !maps.Equal(got, want) {
		t.Errorf("JSON child exits %v, want %v", got, want)
	}
	if tsv := history("tsv"); !strings.Contains(strings.SplitN(tsv, "\n", 2)[0], "\tchild_exit") || !strings.Contains(tsv, "\tsignal 11 (SIGSEGV)\n") {
		t.Errorf("TSV lacks child_exit:\n%s", tsv)
	}
}

// process is a pgleader process a test started (startBinary).
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error    // its exit, once
	done   chan struct{} // closed when it has exited
}

// startBinary starts the pgleader binary with args and a clean environment; the
// test's cleanup kills it if it still runs, and logs its stderr if the test
// failed.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	return startCommand(t, exec.Command(binary, args...), args[0])
}

// startCommand starts cmd (a pgleader process, maybe behind a shell that execs
// it) as startBinary does; label names it in the failure log.
func startCommand(t *testing.T, cmd *exec.Cmd, label string) *process {
	t.Helper()
	p := &process{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1), done: make(chan struct{})}
	p.cmd.Env = cleanEnv()
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", label, p.stderr.String())
		}
	})
	return p
}
