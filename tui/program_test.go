package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

var escapes = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-_])`)

// shows waits until the terminal output, escape codes removed, contains s.
func shows(s string) func([]byte) bool {
	return func(b []byte) bool { return bytes.Contains(escapes.ReplaceAll(b, nil), []byte(s)) }
}

// TestProgram drives the real program loop: the feed delivers snapshots, the
// screen follows, q quits and every goroutine ends (TestMain checks).
func TestProgram(t *testing.T) {
	feed := newFakeFeed(nil)
	m := New(feed, Options{NoColor: true, Now: fixedNow, Database: "app@db"})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	wait := teatest.WithDuration(10 * time.Second)

	teatest.WaitFor(t, tm.Output(), shows("connecting to app@db"), wait)

	first := healthySnapshot()
	first.Scopes[0].Leader = "alpha-1"
	feed.push(first)
	teatest.WaitFor(t, tm.Output(), shows("alpha-1"), wait)

	second := healthySnapshot()
	second.Seq = 101
	second.Scopes[0].Leader = "BRAVO_2"
	second.Scopes[0].Epoch = 43
	feed.push(second)
	teatest.WaitFor(t, tm.Output(), shows("BRAVO_2"), wait)

	tm.Type("q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
	if got := final.snap.Scopes[0].Leader; got != "BRAVO_2" {
		t.Fatalf("final leader %q", got)
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.unsubs != 2 {
		t.Fatalf("unsubscribed %d times, want 2", feed.unsubs)
	}
}

// pipes are the terminal for run in tests.
func pipes(t *testing.T) []tea.ProgramOption {
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	return []tea.ProgramOption{tea.WithInput(r), tea.WithOutput(io.Discard), tea.WithWindowSize(80, 24), tea.WithoutSignalHandler()}
}

func TestRunStopsWithContext(t *testing.T) {
	feed := newFakeFeed(healthySnapshot())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, feed, Options{NoColor: true}, pipes(t)...) }()
	time.Sleep(50 * time.Millisecond) // let it draw; the assertion does not depend on it
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.unsubs != 2 {
		t.Fatalf("unsubscribed %d times", feed.unsubs)
	}
}

func TestRunRecoversPanic(t *testing.T) {
	feed := newFakeFeed(healthySnapshot())
	boom := func() time.Time { panic("clock exploded") } // View calls Now
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), feed, Options{NoColor: true, Now: boom}, pipes(t)...) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPanic) {
			t.Fatalf("Run after a panic: %v, want ErrPanic", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after a panic")
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.unsubs != 2 {
		t.Fatalf("unsubscribed %d times", feed.unsubs)
	}
}

// TestResignKeyFromTerminal types shift+r and y on the program's input, through
// Bubble Tea's own key decoder: shift+r arrives as "R" (not r, refresh) and
// asks for the resign, which y confirms.
func TestResignKeyFromTerminal(t *testing.T) {
	if got := (tea.KeyPressMsg{Code: 'r', ShiftedCode: 'R', Mod: tea.ModShift, Text: "R"}).String(); got != "R" {
		t.Fatalf("shift+r is %q", got)
	}
	feed := newFakeFeed(healthySnapshot())
	actions := &fakeActions{}
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), feed, Options{NoColor: true, Now: fixedNow, Actions: actions},
			tea.WithInput(r), tea.WithOutput(io.Discard), tea.WithWindowSize(120, 40), tea.WithoutSignalHandler())
	}()
	if _, err := w.Write([]byte("R")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // two keys in one read would still be two keys; keep it like a person
	if _, err := w.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(actions.resignCalls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("shift+r, y did not ask for a resign")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := w.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not quit")
	}
	if calls := actions.resignCalls(); len(calls) != 1 || calls[0].scope != "billing" {
		t.Fatalf("Resign calls %v", calls)
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.refreshes != 0 {
		t.Fatalf("shift+r refreshed %d times", feed.refreshes)
	}
}
