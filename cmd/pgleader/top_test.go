package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/tui"
)

// teatest leaves one goroutine waiting for SIGINT for the life of the process.
func init() {
	pgtest.IgnoreLeaks(goleak.IgnoreAnyFunction("github.com/charmbracelet/x/exp/teatest/v2.NewTestModel.func2"))
}

var ansi = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-_])`)

func screenShows(s string) func([]byte) bool {
	return func(b []byte) bool { return bytes.Contains(ansi.ReplaceAll(b, nil), []byte(s)) }
}

// TestTopEndToEnd: real nodes, a real collector, the real dashboard model: kill
// the leader and the scope's row shows its successor.
func TestTopEndToEnd(t *testing.T) {
	dsn, c := startNodes(t, "e2e", "alpha", "bravo")
	col := runCollector(t, dsn)

	m := tui.New(col, tui.Options{NoColor: true, Database: "e2e"})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	wait := teatest.WithDuration(20 * time.Second)
	teatest.WaitFor(t, tm.Output(), screenShows("(leading)"), wait)

	first := waitLeader(t, col, "e2e", 0)
	if _, err := c.Node(first.Leader).Kill(); err != nil {
		t.Fatal(err)
	}
	second := waitLeader(t, col, "e2e", first.Epoch)
	if second.Leader == first.Leader {
		t.Fatalf("%s still leads after kill -9", first.Leader)
	}
	// The terms pane shows how the first term ended: only the new frame has it
	// (crashed, or lost_connection when the successor claimed before the dead
	// process's guard backend was gone).
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return screenShows("crashed")(b) || screenShows("lost_connection")(b)
	}, wait)
	tm.Type("q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*tui.Model)
	view := ansi.ReplaceAllString(final.View().Content, "")
	// The scopes row: "▸ e2e  ▲ DEGRADED  <leader>  <epoch> …": led, with no
	// live follower left (the killed node is down, not restarted).
	row := regexp.MustCompile(`(?m)^\S?\s*e2e\s+▲ DEGRADED\s+(\S+)\s+(\d+)\s`).FindStringSubmatch(view)
	if row == nil || row[1] != second.Leader || row[2] != strconv.FormatInt(second.Epoch, 10) {
		t.Fatalf("scope row %q: want leader %s at epoch %d (was %s)\n%s", row, second.Leader, second.Epoch, first.Leader, view)
	}
}

// TestTopHandover: the dashboard with the actions `top --allow-actions` wires
// (topActions over a real operator and collector) hands a scope over to its follower: O
// names the follower, y hands the scope over, the follower leads, the term
// ends as handed_over naming it (pgleader history), and the request is
// audited as from pgleader top.
func TestTopHandover(t *testing.T) {
	dsn, _ := startNodes(t, "ho", "ho-1", "ho-2")
	col := runCollector(t, dsn)

	first := waitLeader(t, col, "ho", 0)
	other := map[string]string{"ho-1": "ho-2", "ho-2": "ho-1"}[first.Leader]
	op, err := newOperator(cli.Target{Config: parseDSN(t, dsn)}, col.Snapshot, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	m := tui.New(col, tui.Options{NoColor: true, Database: "ho", Actions: topActions{op}})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	wait := teatest.WithDuration(20 * time.Second)
	// The follower is on the scope's row once it waits for the lock.
	teatest.WaitFor(t, tm.Output(), screenShows("1: "+other), wait)
	shift := func(r rune) tea.KeyPressMsg {
		return tea.KeyPressMsg{Code: unicode.ToLower(r), ShiftedCode: r, Mod: tea.ModShift, Text: string(r)}
	}
	tm.Send(shift('O'))
	teatest.WaitFor(t, tm.Output(), screenShows("Hand ho over to "+other+"?"), wait)
	tm.Type("y")
	teatest.WaitFor(t, tm.Output(), screenShows("handed ho over to "+other), wait)
	if second := waitLeader(t, col, "ho", first.Epoch); second.Leader != other {
		t.Fatalf("%s leads ho after the handover, want %s", second.Leader, other)
	}
	tm.Type("q")
	tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second))

	r := pgleader(t, nil, "history", "--dsn", dsn, "--scope", "ho")
	if r.code != 0 || !strings.Contains(r.stdout, "handed_over → "+other) {
		t.Fatalf("history: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var via string
	if err := pgtest.Connect(t, dsn).QueryRow(context.Background(),
		"SELECT detail->>'via' FROM pgleader.audit WHERE kind = 'handover_requested' AND scope = 'ho'").Scan(&via); err != nil || via != "pgleader top" {
		t.Fatalf("audited via %q (%v), want pgleader top", via, err)
	}
}

// waitLeader waits until the collector sees scope led under an epoch above after.
func waitLeader(t *testing.T, col *collector.Collector, scope string, after int64) collector.Scope {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s := col.Snapshot(); s != nil {
			if sc, ok := s.Scope(scope); ok && sc.HasLeader() && sc.Epoch > after {
				return sc
			}
		}
		col.Refresh()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no leader above epoch %d within 20s", scope, after)
	return collector.Scope{}
}

// TestTopSmokeTmux opens `pgleader top` in a real terminal (tmux), waits for the
// leader to be on screen, quits with q and checks the terminal came back.
func TestTopSmokeTmux(t *testing.T) {
	pgtest.Slow(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		if strings.EqualFold(getenv("CI"), "true") {
			t.Fatal("tmux missing in CI: .ci/install-deps installs it")
		}
		t.Skip("tmux not installed")
	}
	dsn, _ := startNodes(t, "smoke", "smoke-node")
	session := "pgleader-smoke-" + strings.ReplaceAll(t.Name(), "/", "-")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30",
		binary+" top --dsn '"+dsn+"'; echo TOP-EXITED-$?; sleep 30")
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	capture := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitScreen := func(what string) string {
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := capture()
			if strings.Contains(s, what) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("screen never showed %q:\n%s", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The node is listed as soon as it registers, a moment before its first claim:
	// wait for the verdict itself.
	screen := waitScreen("✔ OK smoke")
	for _, want := range []string{"smoke-node", "SCOPES", "NODES", "? help"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tmux("send-keys", "-t", session, "q")
	screen = waitScreen("TOP-EXITED-")
	if !strings.Contains(screen, "TOP-EXITED-0") {
		t.Fatalf("top did not exit 0:\n%s", screen)
	}
	if strings.Contains(screen, "SCOPES") {
		t.Errorf("the dashboard is still on screen after quitting (terminal not restored):\n%s", screen)
	}
}

func getenv(k string) string { return os.Getenv(k) }

// runCollector runs a collector on dsn (polling every 200ms) until the test ends.
func runCollector(t *testing.T, dsn string) *collector.Collector {
	t.Helper()
	cfg := collector.DefaultConfig()
	cfg.ConnConfig = parseDSN(t, dsn)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Logger = quietLogger()
	col, err := collector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- col.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return col
}

// parseDSN parses dsn or fails the test.
func parseDSN(t *testing.T, dsn string) *pgx.ConnConfig {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// TestTopTheme: --theme takes light, dark or auto and refuses anything else
// before it connects.
func TestTopTheme(t *testing.T) {
	r := pgleader(t, nil, "top", "--once", "--theme", "solarized", "--dsn", unreachable)
	if r.code != cli.ExitBadInput || !strings.Contains(r.stderr, `--theme must be light, dark or auto (got "solarized")`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r := pgleader(t, nil, "top", "--help"); !strings.Contains(r.stdout, "--theme string") {
		t.Fatalf("--help does not list --theme:\n%s", r.stdout)
	}
}
