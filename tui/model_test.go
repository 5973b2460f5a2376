package tui

import (
	"errors"
	"regexp"
	"slices"
	"strings"
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

func TestFilter(t *testing.T) {
	m, _ := setup(t, threeScopes())

	keys(m, "/")
	if !m.filtering {
		t.Fatal("/ does not open the filter")
	}
	typed(m, "rep")
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports"}) {
		t.Fatalf("filter rep: scopes %v", got)
	}
	if !strings.Contains(screen(m), "filter: rep") {
		t.Error("the filter line is not shown while typing")
	}
	keys(m, "backspace", "backspace", "backspace")
	typed(m, "NODE-B") // matches the leader of reports and followers of billing, case-insensitively
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("filter node-b: scopes %v", got)
	}
	keys(m, "backspace")
	keys(m, "enter")
	if m.filtering || m.filter != "NODE-" {
		t.Fatalf("enter keeps the filter: filtering=%v filter=%q", m.filtering, m.filter)
	}
	if !strings.Contains(screen(m), "filter “NODE-”") {
		t.Error("the kept filter is not shown in the status line")
	}
	keys(m, "esc")
	if m.filter != "" || len(scopeKeys(m)) != 3 {
		t.Fatalf("esc does not clear the filter: %q %v", m.filter, scopeKeys(m))
	}

	// Nodes and events filter by the same substring.
	keys(m, "/")
	typed(m, "node-c")
	keys(m, "enter")
	m.ensureRows()
	if len(m.nodes.rows) != 1 || m.nodes.rows[0].key != "node-c" {
		t.Fatalf("nodes under filter node-c: %v", m.nodes.rows)
	}
}

func TestPause(t *testing.T) {
	m, _ := setup(t, healthySnapshot())

	keys(m, "space")
	if !m.paused || !strings.Contains(screen(m), "⏸ PAUSED") {
		t.Fatal("space does not pause, or the PAUSED banner is missing")
	}
	next := healthySnapshot()
	next.Seq = 200
	next.Scopes[0].Leader = "node-c"
	m.Update(snapshotMsg{next})
	m.Update(eventsMsg{[]collector.Event{{Seq: 9, At: t0, Kind: collector.EventElected, Scope: "billing", Node: "node-c", Epoch: 43}}})
	if m.snap.Seq != 100 {
		t.Fatalf("a paused dashboard applied snapshot %d", m.snap.Seq)
	}
	if len(m.events.entries) != 0 || len(m.pausedEvents) != 1 {
		t.Fatalf("paused events: log %d, buffer %d; want 0, 1", len(m.events.entries), len(m.pausedEvents))
	}
	if !strings.Contains(screen(m), "1 event buffered") {
		t.Error("the banner does not count the buffered events")
	}

	keys(m, "space")
	if m.paused || m.snap.Seq != 200 {
		t.Fatalf("resume: paused=%v seq=%d", m.paused, m.snap.Seq)
	}
	if len(m.events.entries) != 1 || len(m.pausedEvents) != 0 {
		t.Fatalf("resume: log %d, buffer %d; want 1, 0", len(m.events.entries), len(m.pausedEvents))
	}
}

func TestProblemsOnly(t *testing.T) {
	s := troubleSnapshot()
	ok := s.Scopes[0]
	ok.Name, ok.Verdict, ok.Alerts = "cron", collector.VerdictOK, nil
	s.Scopes = append(s.Scopes, ok)
	m, _ := setup(t, s)

	if got := scopeKeys(m); len(got) != 3 {
		t.Fatalf("scopes %v", got)
	}
	keys(m, "p")
	if got := scopeKeys(m); !slices.Equal(got, []string{"billing", "reports"}) {
		t.Fatalf("problems only: %v", got)
	}
	if got := m.nodes.rows; len(got) != 1 || got[0].key != "node-b" {
		t.Fatalf("problems only, nodes: %v (want the stale node-b)", got)
	}
	if !strings.Contains(screen(m), "problems only") {
		t.Error("the problems-only mode is not shown")
	}
	keys(m, "p")
	if got := scopeKeys(m); len(got) != 3 {
		t.Fatalf("p again: %v", got)
	}
}

func TestSort(t *testing.T) {
	m, _ := setup(t, threeScopes())
	// Default: worst verdict first, then name.
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("default sort: %v", got)
	}
	m.snap.Scopes[1].Verdict = collector.VerdictNoLeader // billing
	m.invalidate()
	if got := scopeKeys(m); !slices.Equal(got, []string{"billing", "archive", "reports"}) {
		t.Fatalf("verdict sort: %v", got)
	}
	keys(m, "s") // name
	if got := scopeKeys(m); !slices.Equal(got, []string{"archive", "billing", "reports"}) {
		t.Fatalf("name sort: %v", got)
	}
	keys(m, "S") // name, descending
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports", "billing", "archive"}) {
		t.Fatalf("name sort reversed: %v", got)
	}
	if !strings.Contains(screen(m), "SCOPE↓") {
		t.Error("the sorted column is not marked")
	}
	keys(m, "s", "s") // leader, epoch
	if got := scopeKeys(m); !slices.Equal(got, []string{"reports", "archive", "billing"}) {
		t.Fatalf("epoch sort: %v (epochs 7, 42, 42)", got)
	}

	// s on the nodes pane sorts the nodes.
	keys(m, "tab", "s") // state: stale first
	m.snap.Nodes[2].Live = false
	m.invalidate()
	m.ensureRows()
	if m.nodes.rows[0].key != "node-c" {
		t.Fatalf("node state sort: first %s, want the stale node-c", m.nodes.rows[0].key)
	}
}

func TestCursorKeepsScope(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	keys(m, "down")
	if got := m.scopes.selected(); got != "reports" {
		t.Fatalf("selected %q", got)
	}
	// A new snapshot adds scopes before it and reorders the rest.
	next := threeScopes()
	extra := next.Scopes[1]
	extra.Name, extra.Verdict = "accounts", collector.VerdictNoLeader
	next.Scopes = append(next.Scopes, extra)
	m.Update(snapshotMsg{next})
	if got := scopeKeys(m); !slices.Equal(got, []string{"accounts", "archive", "billing", "reports"}) {
		t.Fatalf("rows %v", got)
	}
	if got := m.scopes.selected(); got != "reports" {
		t.Fatalf("after refresh the cursor is on %q, want reports", got)
	}
	if !regexp.MustCompile(`(?m)^▸ reports `).MatchString(screen(m)) {
		t.Error("the cursor marker is not on the reports row")
	}
	// The selected row disappears: the cursor stays at its position.
	gone := threeScopes()
	gone.Scopes = gone.Scopes[:2] // archive, billing
	m.Update(snapshotMsg{gone})
	if got := m.selectedScope(); got != "billing" {
		t.Fatalf("row gone: cursor on %q, want billing (the last row)", got)
	}
}

func TestDetailView(t *testing.T) {
	m, _ := setup(t, troubleSnapshot())
	keys(m, "enter")
	if m.detail != "billing" {
		t.Fatalf("enter opened %q", m.detail)
	}
	s := screen(m)
	for _, want := range []string{"SCOPE billing", "holder pid 4242", "lock pids 4242, 6262 ✖ (≠ holder)", "split_brain", "terminate the backend", "TERMS 3", "hb history"} {
		if !strings.Contains(s, want) {
			t.Errorf("detail view lacks %q:\n%s", want, s)
		}
	}
	// The sparkline collects one sample per snapshot.
	for i := range 5 {
		n := troubleSnapshot()
		n.Seq = uint64(300 + i)
		n.Scopes[0].HeartbeatAge = time.Duration(i) * 300 * time.Millisecond
		m.Update(snapshotMsg{n})
	}
	if got := m.hb["billing"].values(); len(got) != 6 || got[5] != 1200*time.Millisecond {
		t.Fatalf("heartbeat ring %v", got)
	}
	keys(m, "esc")
	if m.detail != "" || !strings.Contains(screen(m), "SCOPES 2") {
		t.Fatal("esc does not return to the main view")
	}
}

func TestEvictConfirm(t *testing.T) {
	m, b := setup(t, healthySnapshot())

	keys(m, "x")
	if m.confirm == nil || !strings.Contains(screen(m), "Evict the leader of billing?") {
		t.Fatal("x does not ask for confirmation")
	}
	if cmd := keys(m, "n"); cmd != nil {
		t.Fatal("n returned a command")
	}
	if m.confirm != nil || len(b.actions.calls) != 0 {
		t.Fatalf("n: confirm=%v calls=%v", m.confirm, b.actions.calls)
	}
	keys(m, "x")
	if cmd := keys(m, "enter"); cmd != nil || len(b.actions.calls) != 0 {
		t.Fatal("enter is not a yes")
	}

	keys(m, "down", "x") // reports, led by node-b
	runCmd(t, m, keys(m, "y"))
	if want := []evictCall{{"reports", "operator eviction from pgleader top"}}; !slices.Equal(b.actions.calls, want) {
		t.Fatalf("Evict calls %v, want %v", b.actions.calls, want)
	}
	last := m.events.entries[len(m.events.entries)-1]
	if last.ev.Kind != eventAction || !strings.Contains(last.line, "evicted node-b, leader of reports") {
		t.Fatalf("log entry %+v", last)
	}

	// An error reaches the log and the status line.
	b.actions.err = errors.New("permission denied to terminate process")
	keys(m, "x")
	runCmd(t, m, keys(m, "Y"))
	if !strings.Contains(screen(m), "permission denied") {
		t.Error("the eviction error is not shown")
	}
}

func TestEvictGuards(t *testing.T) {
	t.Run("LeaderChangedWhileAsking", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "x")
		next := healthySnapshot()
		next.Seq = 101
		next.Scopes[0].Leader = "node-c"
		m.Update(snapshotMsg{next})
		if cmd := keys(m, "y"); cmd != nil || len(b.actions.calls) != 0 {
			t.Fatal("evicted a leader the operator did not confirm")
		}
		if !strings.Contains(screen(m), "not evicting: billing is now led by node-c, not node-a") {
			t.Fatalf("no explanation:\n%s", screen(m))
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Actions = nil })
		keys(m, "x")
		if m.confirm != nil || !strings.Contains(screen(m), "read-only") {
			t.Fatal("x without Actions must explain read-only mode")
		}
		keys(m, "?")
		if s := screen(m); strings.Contains(s, "evict: terminate") || strings.Contains(s, "resign the leader") {
			t.Error("help lists the actions in read-only mode")
		}
	})
	t.Run("NoLeader", func(t *testing.T) {
		m, b := setup(t, troubleSnapshot())
		keys(m, "down", "x") // reports has no leader
		if m.confirm != nil || !strings.Contains(screen(m), "reports has no leader") {
			t.Fatal("x on a leaderless scope must say so")
		}
		if len(b.actions.calls) != 0 {
			t.Fatal("Evict called")
		}
	})
	t.Run("FromDetail", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "down", "enter", "x")
		runCmd(t, m, keys(m, "y"))
		if len(b.actions.calls) != 1 || b.actions.calls[0].scope != "reports" {
			t.Fatalf("calls %v", b.actions.calls)
		}
	})
}

func TestResignConfirm(t *testing.T) {
	m, b := setup(t, healthySnapshot())

	keys(m, "R")
	s := screen(m)
	if m.confirm == nil || m.confirm.kind != actionResign || !strings.Contains(s, "Resign the leader of billing?") ||
		!strings.Contains(s, "Asks node-a through the database to hand billing over") || !strings.Contains(s, "y resign") {
		t.Fatalf("R does not ask for confirmation of a resign:\n%s", s)
	}
	if strings.Contains(s, "Evict") || strings.Contains(s, "Terminates") {
		t.Fatalf("the resign question reads like an eviction:\n%s", s)
	}
	if cmd := keys(m, "N"); cmd != nil {
		t.Fatal("N returned a command")
	}
	if m.confirm != nil || len(b.actions.resignCalls()) != 0 || !strings.Contains(screen(m), "resign billing cancelled") {
		t.Fatalf("N: confirm=%v calls=%v", m.confirm, b.actions.resignCalls())
	}

	keys(m, "down", "R") // reports, led by node-b
	runCmd(t, m, keys(m, "y"))
	if want := []evictCall{{"reports", "operator resign from pgleader top"}}; !slices.Equal(b.actions.resignCalls(), want) {
		t.Fatalf("Resign calls %v, want %v", b.actions.resignCalls(), want)
	}
	if len(b.actions.calls) != 0 {
		t.Fatalf("a resign evicted: %v", b.actions.calls)
	}
	last := m.events.entries[len(m.events.entries)-1]
	if last.ev.Kind != eventAction || !strings.Contains(last.line, "asked node-b, leader of reports (epoch 7), to resign") {
		t.Fatalf("log entry %+v", last)
	}

	// An error reaches the log and the status line.
	b.actions.err = errors.New("collector: holder changed: reports is now held by node-c")
	keys(m, "R")
	runCmd(t, m, keys(m, "Y"))
	if s := screen(m); !strings.Contains(s, "holder changed") {
		t.Errorf("the resign error is not shown:\n%s", s)
	}
	if last := m.events.entries[len(m.events.entries)-1]; !strings.Contains(last.line, "resign node-b of reports: error:") || last.tone != toneBad {
		t.Errorf("log entry %+v", last)
	}
}

func TestResignGuards(t *testing.T) {
	t.Run("LeaderChangedWhileAsking", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "R")
		next := healthySnapshot()
		next.Seq = 101
		next.Scopes[0].Leader = "node-c"
		m.Update(snapshotMsg{next})
		if cmd := keys(m, "y"); cmd != nil || len(b.actions.resignCalls()) != 0 {
			t.Fatal("asked a leader the operator did not confirm to resign")
		}
		if !strings.Contains(screen(m), "not resigning: billing is now led by node-c, not node-a; press R again") {
			t.Fatalf("no explanation:\n%s", screen(m))
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Actions = nil })
		keys(m, "R")
		if m.confirm != nil || !strings.Contains(screen(m), "read-only: start with --allow-actions to resign a leader") {
			t.Fatal("R without Actions must explain read-only mode")
		}
		if strings.Contains(screen(m), "R resign") {
			t.Error("the footer offers R in read-only mode")
		}
	})
	t.Run("NoLeader", func(t *testing.T) {
		m, b := setup(t, troubleSnapshot())
		keys(m, "down", "R") // reports has no leader
		if m.confirm != nil || !strings.Contains(screen(m), "reports has no leader to resign") {
			t.Fatal("R on a leaderless scope must say so")
		}
		if len(b.actions.resignCalls()) != 0 {
			t.Fatal("Resign called")
		}
	})
	t.Run("FromDetail", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "down", "enter", "R")
		runCmd(t, m, keys(m, "y"))
		if calls := b.actions.resignCalls(); len(calls) != 1 || calls[0].scope != "reports" {
			t.Fatalf("calls %v", calls)
		}
	})
	t.Run("NotRefresh", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		if cmd := keys(m, "R"); cmd != nil {
			t.Fatal("R returned a command before the answer")
		}
		b.feed.mu.Lock()
		refreshes := b.feed.refreshes
		b.feed.mu.Unlock()
		if m.confirm == nil || refreshes != 0 {
			t.Fatalf("R: confirm=%v refreshes=%d", m.confirm, refreshes)
		}
	})
	t.Run("Help", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot())
		if s := screen(m); !strings.Contains(s, "R resign") || !strings.Contains(s, "x evict") {
			t.Errorf("footer lacks the actions:\n%s", s)
		}
		keys(m, "?")
		typed(m, "gracefully")
		if s := screen(m); !strings.Contains(s, "R resign the leader gracefully") {
			t.Fatalf("help search 'gracefully':\n%s", s)
		}
	})
}

func TestFaultKeys(t *testing.T) {
	m, b := setup(t, healthySnapshot(), func(o *Options) {
		o.Faults = &fakeFaults{keys: []FaultKey{{Key: "k", Help: "kill -9 leader"}, {Key: "s", Help: "SIGSTOP leader"}}}
	})
	b.faults = m.opts.Faults.(*fakeFaults)

	keys(m, "down")
	runCmd(t, m, keys(m, "k"))
	if want := []faultCall{{"k", "reports"}}; !slices.Equal(b.faults.calls, want) {
		t.Fatalf("Do calls %v, want %v", b.faults.calls, want)
	}
	var lines []string
	for _, e := range m.events.entries {
		lines = append(lines, e.line)
	}
	log := strings.Join(lines, "\n")
	if !strings.Contains(log, "» fault") || !strings.Contains(log, "sent SIGKILL to the leader of reports") {
		t.Fatalf("fault result not logged:\n%s", log)
	}
	// "s" is the sort key: the fault is refused and said so.
	if !strings.Contains(log, `fault key "s" (SIGSTOP leader) ignored`) {
		t.Errorf("colliding fault key not reported:\n%s", log)
	}
	if cmd := keys(m, "s"); cmd != nil || len(b.faults.calls) != 1 {
		t.Fatal("s ran a fault")
	}
	if !strings.Contains(screen(m), "k kill -9 leader") {
		t.Error("the fault key is not in the footer")
	}
}

func TestPollInterval(t *testing.T) {
	m, b := setup(t, healthySnapshot())
	keys(m, "+")
	if got := b.feed.set; !slices.Equal(got, []time.Duration{2 * time.Second}) {
		t.Fatalf("+ from 1s: SetPollInterval %v", got)
	}
	keys(m, "-", "-")
	if got := b.feed.set[1:]; !slices.Equal(got, []time.Duration{time.Second, 500 * time.Millisecond}) {
		t.Fatalf("- -: SetPollInterval %v", got)
	}
	for range 20 {
		keys(m, "-")
	}
	if got := b.feed.set[len(b.feed.set)-1]; got != minInterval {
		t.Fatalf("floor: %v", got)
	}
	n := len(b.feed.set)
	for range 30 {
		keys(m, "+")
	}
	if got := b.feed.set[len(b.feed.set)-1]; got != maxInterval {
		t.Fatalf("ceiling: %v", got)
	}
	for _, d := range b.feed.set {
		if d < minInterval || d > maxInterval {
			t.Fatalf("out of bounds: %v", d)
		}
	}
	if got := len(b.feed.set) - n; got != len(intervalSteps)-1 {
		t.Fatalf("%d calls from 100ms to 60s, want one per step (%d)", got, len(intervalSteps)-1)
	}
	if !strings.Contains(screen(m), "every 1m") {
		t.Error("the header does not show the interval")
	}
}

func TestRefreshNow(t *testing.T) {
	m, b := setup(t, healthySnapshot())
	runCmd(t, m, keys(m, "r"))
	if b.feed.refreshes != 1 {
		t.Fatalf("refreshes %d", b.feed.refreshes)
	}
}

func TestPanes(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	var got []pane
	for range 4 {
		keys(m, "tab")
		got = append(got, m.focus)
	}
	if want := []pane{paneNodes, paneTerms, paneEvents, paneScopes}; !slices.Equal(got, want) {
		t.Fatalf("tab order %v", got)
	}
	keys(m, "shift+tab")
	if m.focus != paneEvents {
		t.Fatalf("shift+tab: %v", m.focus)
	}
	// Compact layout: the terms pane replaces the nodes pane while focused.
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if s := screen(m); strings.Contains(s, "TERMS") || !strings.Contains(s, "NODES") {
		t.Fatal("compact layout should show nodes, not terms")
	}
	keys(m, "shift+tab")
	if s := screen(m); !strings.Contains(s, "TERMS") || strings.Contains(s, "NODES") {
		t.Fatal("compact layout should show terms while they have the focus")
	}
	// Enter on a term opens its scope.
	keys(m, "down", "down", "down", "enter")
	if m.detail != "reports" {
		t.Fatalf("enter on the 4th term opened %q", m.detail)
	}
}

func TestHelpSearch(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	keys(m, "?")
	if !m.helpOpen {
		t.Fatal("? does not open help")
	}
	s := screen(m)
	for _, want := range []string{"navigate", "page up", "evict: terminate leader's session", "resign the leader gracefully", "kill -9 leader", "SPLIT BRAIN"} {
		if !strings.Contains(s, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	typed(m, "interval")
	s = screen(m)
	if !strings.Contains(s, "longer poll interval") || strings.Contains(s, "page up") {
		t.Fatalf("help search 'interval':\n%s", s)
	}
	typed(m, "q") // typing goes to the search, it does not quit
	if !m.helpOpen || !strings.Contains(screen(m), "nothing matches") {
		t.Fatal("q in help must search, not quit")
	}
	keys(m, "esc")
	if !m.helpOpen || m.helpQuery != "" {
		t.Fatal("esc clears the search first")
	}
	keys(m, "esc")
	if m.helpOpen {
		t.Fatal("esc closes help")
	}
	// Two quick escapes can arrive as one alt+esc: search cleared and closed.
	keys(m, "?")
	typed(m, "page")
	m.Update(tea.KeyPressMsg{Code: tea.KeyEscape, Mod: tea.ModAlt})
	if m.helpOpen {
		t.Fatal("alt+esc must act as esc twice")
	}
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

func TestStopEndsWaitingCommands(t *testing.T) {
	m, _ := setup(t, nil)
	m.Init()
	done := make(chan tea.Msg, 3)
	for _, c := range []tea.Cmd{m.waitSnapshot(), m.waitEvents(), m.tick()} {
		go func() { done <- c() }()
	}
	m.stop()
	for range 3 {
		select {
		case msg := <-done:
			if msg != nil {
				t.Fatalf("stopped command returned %T", msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a command kept waiting after stop")
		}
	}
}

func TestFeedMessages(t *testing.T) {
	m, b := setup(t, nil)
	m.Init()
	if !strings.Contains(screen(m), "connecting to app@db…") {
		t.Fatalf("before the first snapshot:\n%s", screen(m))
	}
	// Latest wins: two pushes, one snapshot read.
	b.feed.push(healthySnapshot())
	s2 := healthySnapshot()
	s2.Seq = 101
	b.feed.push(s2)
	msg := m.waitSnapshot()()
	if sm, ok := msg.(snapshotMsg); !ok || sm.snap.Seq != 101 {
		t.Fatalf("waitSnapshot returned %#v", msg)
	}
	m.Update(msg)
	b.feed.events <- sampleEvents()[0]
	b.feed.events <- sampleEvents()[1]
	msg = m.waitEvents()()
	if em, ok := msg.(eventsMsg); !ok || len(em.events) != 2 {
		t.Fatalf("waitEvents returned %#v", msg)
	}
	m.Update(msg)
	if len(m.events.entries) != 2 {
		t.Fatalf("log has %d events", len(m.events.entries))
	}
	close(b.feed.updates)
	m.Update(m.waitSnapshot()())
	if !m.feedClosed || !strings.Contains(screen(m), "collector stopped") {
		t.Fatal("a closed feed must be reported, with the data kept")
	}
	if !strings.Contains(screen(m), "node-a") {
		t.Fatal("the data went away with the feed")
	}
}

func TestDisconnectedKeepsData(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	m.Update(snapshotMsg{disconnectedSnapshot()})
	s := screen(m)
	for _, want := range []string{"node-a", "billing", "✖ DISCONNECTED", "connection refused", "last good data", "STALE"} {
		if !strings.Contains(s, want) {
			t.Errorf("disconnected screen lacks %q:\n%s", want, s)
		}
	}
	// Dimmed: the data rows are faint.
	cm, _ := setup(t, disconnectedSnapshot(), func(o *Options) { o.NoColor = false })
	if !strings.Contains(cm.View().Content, "\x1b[2m") {
		t.Error("stale data is not dimmed")
	}
}

func TestTooSmall(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	m.Update(tea.WindowSizeMsg{Width: 59, Height: 30})
	if s := screen(m); !strings.Contains(s, "terminal too small: need ≥60×16, have 59×30") {
		t.Fatalf("got:\n%s", s)
	}
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 16})
	if s := screen(m); strings.Contains(s, "too small") || !strings.Contains(s, "billing") {
		t.Fatalf("60×16 must render:\n%s", s)
	}
}

// TestFrameFits checks every frame is exactly the terminal's size.
func TestFrameFits(t *testing.T) {
	snaps := map[string]*collector.Snapshot{
		"healthy": healthySnapshot(), "trouble": troubleSnapshot(), "disconnected": disconnectedSnapshot(),
		"big": bigSnapshot(100, 300), "empty": {Seq: 1, At: t0, Health: health()}, "none": nil,
	}
	for name, snap := range snaps {
		for _, sz := range [][2]int{{60, 16}, {80, 24}, {100, 34}, {120, 40}, {160, 48}, {250, 70}} {
			for i, ks := range [][]string{nil, {"?"}, {"enter"}, {"x"}, {"R"}, {"tab", "tab"}, {"space"}, {"/", "a"}, {"tab", "tab", "tab", "up"}} {
				m, _ := setup(t, snap, func(o *Options) { o.NoColor = i%2 == 0 })
				for _, e := range sampleEvents() {
					m.events.add(e)
				}
				m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				keys(m, ks...)
				lines := strings.Split(m.View().Content, "\n")
				if len(lines) != sz[1] {
					t.Errorf("%s %v %v: %d lines", name, sz, ks, len(lines))
				}
				for i, l := range lines {
					if w := textWidth(l); w > sz[0] {
						t.Errorf("%s %v %v: line %d is %d wide: %q", name, sz, ks, i, w, l)
					}
				}
			}
		}
	}
}

func TestNoColor(t *testing.T) {
	colour := regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|9[0-7]|38;)[0-9;]*m`)
	m, _ := setup(t, troubleSnapshot(), func(o *Options) { o.NoColor = false })
	if !colour.MatchString(m.View().Content) {
		t.Fatal("no colour without NoColor (the test's pattern is wrong?)")
	}
	m, _ = setup(t, troubleSnapshot())
	if c := m.View().Content; colour.MatchString(c) {
		t.Fatalf("colour codes with NoColor: %q", colour.FindString(c))
	}
	t.Setenv("NO_COLOR", "1")
	m, _ = setup(t, troubleSnapshot(), func(o *Options) { o.NoColor = false })
	if c := m.View().Content; colour.MatchString(c) {
		t.Fatal("colour codes with NO_COLOR set")
	}
	if s := screen(m); !strings.Contains(s, "‼ SPLIT BRAIN") || !strings.Contains(s, "✖ NO LEADER") {
		t.Fatal("verdict glyphs and words must remain")
	}
}

func TestHeartbeatTone(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		want tone
	}{
		{0, toneOK}, {time.Second, toneOK}, {1001 * time.Millisecond, toneWarn},
		{1500 * time.Millisecond, toneWarn}, {1501 * time.Millisecond, toneBad},
	} {
		if got := heartbeatTone(tc.age, timing); got != tc.want {
			t.Errorf("age %v: tone %d, want %d", tc.age, got, tc.want)
		}
	}
	if got := heartbeatTone(time.Hour, collector.Timing{}); got != toneNone {
		t.Errorf("unknown timing: tone %d", got)
	}
}

func TestTimeline(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	m.ensureRows()
	lines, legend := m.timelineLines(m.look, 2+7+1+60, 3, []string{"billing", "reports"})
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	// 60 columns over 5 minutes: 5 s each. billing: node-b until -4m31s,
	// node-c until -3m, a 1.8 s gap (inside one column: not drawn), node-a since.
	billing := strings.TrimPrefix(plain(lines[1]), "▸ billing ")
	if got, want := strings.TrimSpace(billing), strings.Repeat("▓", 6)+strings.Repeat("▒", 18)+strings.Repeat("█", 36); got != want {
		t.Fatalf("billing strip\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(plain(legend), "█ node-a  ▓ node-b  ▒ node-c  · none") {
		t.Fatalf("legend %q", plain(legend))
	}
	// More holders than glyphs: glyphs alternate per term.
	big, _ := setup(t, bigSnapshot(10, 10))
	_, legend = big.timelineLines(big.look, 80, 11, scopeKeys(big))
	if !strings.Contains(plain(legend), "alternate per term") {
		t.Fatalf("legend %q", plain(legend))
	}
}

func TestEventLines(t *testing.T) {
	crit := &collector.Alert{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Summary: "no leader for 42s"}
	for _, tc := range []struct {
		ev   collector.Event
		want string
		tone tone
	}{
		{collector.Event{At: t0, Kind: collector.EventElected, Scope: "billing", Node: "node-b", Epoch: 43, PrevHolder: "node-a"},
			"  03:12:00.000  ★ elected        node-b leads billing at epoch 43 (was node-a)", toneNone},
		{collector.Event{At: t0.Add(1500 * time.Microsecond), Kind: collector.EventAlertFiring, Scope: "reports", Alert: crit},
			"  03:12:00.001  ‼ alert          no_leader: no leader for 42s", toneBad},
		{collector.Event{At: t0, Kind: collector.EventFenceRejected, Scope: "billing", Node: "node-a", Epoch: 41},
			"  03:12:00.000  ‼ fence rejected database refused a write by node-a on billing at stale epoch 41", toneBad},
		{collector.Event{At: t0, Kind: collector.EventEvicted, Scope: "billing", Node: "node-a", Epoch: 42, Reason: "operator"},
			"  03:12:00.000  ⏏ evicted        node-a evicted from billing at epoch 42: operator", toneWarn},
		{collector.Event{At: t0, Kind: collector.EventResignRequested, Scope: "billing", Node: "node-a", Epoch: 42,
			Detail: "requested by collector: operator resign from pgleader top"},
			"  03:12:00.000  ↷ resign asked   node-a asked to resign billing at epoch 42: requested by collector: operator resign from pgleader top", toneWarn},
		{collector.Event{At: t0, Kind: collector.EventSourceChanged, Detail: "live → polling"},
			"  03:12:00.000  ◐ source         live → polling", toneWarn},
		{collector.Event{At: t0, Kind: collector.EventFailover, Epoch: 1 << 40, Detail: "the database failed over: WAL timeline 1 → 2"},
			"  03:12:00.000  ⇄ db failover    the database failed over: WAL timeline 1 → 2", toneBad},
		{collector.Event{At: t0, Kind: eventFault, Scope: "billing", Detail: "SIGSTOP node-a", Reason: "error: no such process"},
			"  03:12:00.000  » fault          billing: SIGSTOP node-a: error: no such process", toneBad},
	} {
		line, tn := eventLine(tc.ev)
		if line != tc.want || tn != tc.tone {
			t.Errorf("%s:\n got %q (tone %d)\nwant %q (tone %d)", tc.ev.Kind, line, tn, tc.want, tc.tone)
		}
	}
}

func TestEventLogBounded(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	var burst []collector.Event
	for i := range 3 * eventLogCap {
		scope := "billing"
		if i%2 == 1 {
			scope = "reports"
		}
		burst = append(burst, collector.Event{Seq: uint64(i), At: t0, Kind: collector.EventHeartbeatLate, Scope: scope, Node: "node-a"})
	}
	m.Update(eventsMsg{burst})
	if n := len(m.events.entries); n < eventLogCap || n > eventLogCap+eventLogCap/4 {
		t.Fatalf("log holds %d entries", n)
	}
	if last := m.events.entries[len(m.events.entries)-1].ev.Seq; last != uint64(3*eventLogCap-1) {
		t.Fatalf("newest entry is seq %d", last)
	}
	keys(m, "/")
	typed(m, "reports")
	keys(m, "enter")
	m.ensureRows()
	for _, i := range m.events.shown {
		if m.events.entries[i].ev.Scope != "reports" {
			t.Fatal("the filter let another scope through")
		}
	}
	if len(m.events.shown) != len(m.events.entries)/2 {
		t.Fatalf("%d of %d shown", len(m.events.shown), len(m.events.entries))
	}
}

func TestNotesReachTheLog(t *testing.T) {
	notes := make(chan string, 1)
	m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Notes = notes })
	notes <- "failover billing: node-a → node-b (epoch 43) 5.9ms after kill -9"
	msg := m.waitNote()()
	if _, ok := msg.(noteMsg); !ok {
		t.Fatalf("waitNote returned %#v", msg)
	}
	m.Update(msg)
	var lines []string
	for _, e := range m.events.entries {
		lines = append(lines, e.line)
	}
	if log := strings.Join(lines, "\n"); !strings.Contains(log, "» demo") || !strings.Contains(log, "5.9ms after kill -9") {
		t.Fatalf("note not logged:\n%s", log)
	}
	m.stop()
	if msg := m.waitNote()(); msg != nil {
		t.Fatalf("waitNote after stop returned %#v", msg)
	}
}
