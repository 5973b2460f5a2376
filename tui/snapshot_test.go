package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

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

// TestRecoveredIsNotStale: an error older than the last good read (a listener
// that dropped and came back, a read that failed once) is history, not an
// outage; through a pooler, polling is said to be by design.
func TestRecoveredIsNotStale(t *testing.T) {
	snap := healthySnapshot()
	snap.Health.Source = collector.SourcePolling
	snap.Health.Pooler = true
	snap.Health.LastError, snap.Health.LastErrorAt = "listener: connection reset", snap.Health.LastPoll.Add(-time.Minute)
	m, _ := setup(t, snap)
	s := screen(m)
	for _, bad := range []string{"STALE", "READ FAILING", "LISTEN down"} {
		if strings.Contains(s, bad) {
			t.Errorf("a recovered, pooled collector shows %q:\n%s", bad, s)
		}
	}
	if !strings.Contains(s, "polling (through a pooler)") {
		t.Errorf("the header does not say it polls through a pooler:\n%s", s)
	}
	failing := healthySnapshot()
	failing.Health.LastError, failing.Health.LastErrorAt = "read: timeout", failing.Health.LastPoll.Add(time.Second)
	m.Update(snapshotMsg{failing})
	if s := screen(m); !strings.Contains(s, "READ FAILING") || !strings.Contains(s, "STALE") {
		t.Errorf("an error after the last read is not shown as failing:\n%s", s)
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
