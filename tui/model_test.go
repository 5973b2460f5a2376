package tui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

type bundle struct {
	feed    *fakeFeed
	actions *fakeActions
	faults  *fakeFaults
}

// setup builds a dashboard over snap at 120×40 with actions and faults on.
func setup(t *testing.T, snap *collector.Snapshot, opts ...func(*Options)) (*Model, *bundle) {
	t.Helper()
	b := &bundle{feed: newFakeFeed(snap), actions: &fakeActions{}, faults: &fakeFaults{}}
	o := Options{NoColor: true, Now: fixedNow, Actions: b.actions, Faults: b.faults, Database: "app@db"}
	for _, f := range opts {
		f(&o)
	}
	m := New(b.feed, o)
	t.Cleanup(m.stop)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	return m, b
}

// keys sends key presses and returns the last command.
func keys(m *Model, ks ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range ks {
		_, cmd = m.Update(press(k))
	}
	return cmd
}

// typed sends each rune of s as a key press.
func typed(m *Model, s string) {
	for _, r := range s {
		m.Update(press(string(r)))
	}
}

// runCmd runs a command and feeds its message back, as the program would.
func runCmd(t *testing.T, m *Model, cmd tea.Cmd) {
	t.Helper()
	if cmd == nil {
		t.Fatal("expected a command")
	}
	if msg := cmd(); msg != nil {
		m.Update(msg)
	}
}

func scopeKeys(m *Model) []string {
	m.ensureRows()
	var out []string
	for _, r := range m.scopes.rows {
		out = append(out, r.key)
	}
	return out
}

func screen(m *Model) string { return plain(m.View().Content) }

// threeScopes: healthy billing and reports plus a degraded "archive".
func threeScopes() *collector.Snapshot {
	s := healthySnapshot()
	a := s.Scopes[0]
	a.Name, a.Verdict = "archive", collector.VerdictDegraded
	a.HeartbeatAge = time.Second
	s.Scopes = append([]collector.Scope{a}, s.Scopes...)
	return s
}

func TestQuit(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		m, b := setup(t, healthySnapshot())
		m.Init()
		cmd := keys(m, k)
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Fatalf("%s does not quit", k)
		}
		if b.feed.unsubs != 2 || m.ctx.Err() == nil {
			t.Fatalf("%s: unsubscribed %d times, ctx %v", k, b.feed.unsubs, m.ctx.Err())
		}
	}
}
