package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// squeeze drops every blank: wrapping moves words (and breaks a word at a
// hyphen) without changing the text's characters.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// bodyOf is the frame's lines between the header and the footer.
func bodyOf(m *Model) []string {
	f := newFrame(m)
	return f.lines[len(m.headerLines(m.width))+len(m.alertLines(m.width)) : len(f.lines)-len(f.footer)]
}

// TestEventDetail: on the event log, the cursor selects a line (marked
// while the pane has the focus, following the newest line until moved);
// Enter opens the line whole, wrapped, and the event's fields; Esc goes back
// to the log with the cursor where it was.
func TestEventDetail(t *testing.T) {
	fm := kill9After()
	m, _ := setup(t, fm.snaps[0])
	m.Update(eventsMsg{fm.events})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	keys(m, "shift+tab")
	if m.focus != paneEvents {
		t.Fatalf("focus %s, want events", m.focus)
	}
	marked := func() string {
		for _, l := range newFrame(m).panes["EVENTS"][1:] {
			if strings.HasPrefix(l, "▸ ") {
				return l
			}
		}
		return ""
	}
	if l := marked(); !strings.Contains(l, "no_follower") {
		t.Fatalf("the cursor is not on the newest line: %q\n%s", l, screen(m))
	}
	// Up to the closed term of reports: its line is cut at 80 columns.
	keys(m, "k", "k")
	var want string
	for _, e := range m.events.entries {
		if e.ev.Kind == collector.EventTermClosed && e.ev.Scope == "reports" {
			want = e.line
		}
	}
	if l := marked(); !strings.Contains(l, "reports epoch 7 of node-1 ended") || !strings.HasSuffix(l, ellipsis) {
		t.Fatalf("k k: the cursor is on %q, want the cut line of reports' closed term\n%s", l, screen(m))
	}
	if m.events.follow {
		t.Fatal("the log still follows with the cursor moved up")
	}

	keys(m, "enter")
	if m.mode.view != viewEvent {
		t.Fatal("enter on the event log opened nothing")
	}
	s := screen(m)
	body := strings.Join(bodyOf(m), "\n")
	if !strings.Contains(squeeze(body), squeeze(want)) {
		t.Errorf("the detail does not hold the whole line %q:\n%s", want, s)
	}
	if strings.Contains(body, ellipsis) {
		t.Errorf("the detail cuts a line:\n%s", s)
	}
	for _, f := range []string{"term_closed", "reports", "node-1", "crashed", "closed by successor node-2", "2025-03-14 03:11:59.997"} {
		if !strings.Contains(body, f) {
			t.Errorf("the detail lacks the field %q:\n%s", f, s)
		}
	}
	if footer := newFrame(m).footer; !strings.Contains(footer[len(footer)-1], "esc back") {
		t.Errorf("footer %q does not say how to go back", footer)
	}

	keys(m, "esc")
	if m.mode.view == viewEvent || m.focus != paneEvents {
		t.Fatalf("esc: event detail %v, focus %s; want the log back", m.mode.view == viewEvent, m.focus)
	}
	if l := marked(); !strings.Contains(l, "reports epoch 7 of node-1 ended") {
		t.Fatalf("back on the log, the cursor moved to %q", l)
	}
	// The newest line again: the log follows.
	keys(m, "end")
	if !m.events.follow || !strings.Contains(marked(), "no_follower") {
		t.Fatalf("end: follow %v, cursor on %q", m.events.follow, marked())
	}
}

// TestEventDetailKeepsItsLine: events that arrive while the cursor is up
// the log, before it in time or after, do not move it off its event.
func TestEventDetailKeepsItsLine(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	m.Update(eventsMsg{sampleEvents()})
	keys(m, "shift+tab", "k")
	sel, _ := m.events.selected()
	m.Update(eventsMsg{[]collector.Event{
		{At: t0.Add(-10 * time.Minute), Kind: collector.EventNodeJoined, Node: "node-z"}, // lands first
		{At: t0, Kind: collector.EventNodeJoined, Node: "node-y"},
	}})
	if now, _ := m.events.selected(); now.id != sel.id {
		t.Fatalf("the cursor moved from %q to %q", sel.line, now.line)
	}
}

// TestEventDetailFlood: Enter on a flood's one line lists its member
// events, scrollable to the last; Esc goes back.
func TestEventDetailFlood(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	var burst []collector.Event
	for i := range 252 {
		burst = append(burst, collector.Event{At: t0.Add(time.Duration(i) * time.Microsecond), Kind: collector.EventHeartbeatLate,
			Scope: fmt.Sprintf("scope-%04d", i), Node: "node-2", Epoch: int64(i + 1), Detail: "last heartbeat 1.2s ago, interval 500ms"})
	}
	m.Update(eventsMsg{burst})
	m.Update(eventsMsg{[]collector.Event{{At: t0.Add(time.Second), Kind: collector.EventNodeLeft, Node: "node-2", Reason: "down"}}})
	keys(m, "shift+tab", "k", "enter")
	if m.mode.view != viewEvent || len(m.mode.event.members) != 252 {
		t.Fatalf("enter on the flood's line: %+v", m.mode.event)
	}
	s := screen(m)
	for _, want := range []string{"252 events in one line", "MEMBERS 252", "heartbeat late on 252 scopes led by node-2",
		"scope-0000 leader node-2: last heartbeat 1.2s ago, interval 500ms"} {
		if !strings.Contains(squeeze(s), squeeze(want)) {
			t.Errorf("the flood's detail lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(strings.Join(bodyOf(m), "\n"), ellipsis) {
		t.Errorf("the flood's detail cuts a line:\n%s", s)
	}
	keys(m, "end")
	if s := screen(m); !strings.Contains(squeeze(s), squeeze("scope-0251 leader node-2: last heartbeat 1.2s ago, interval 500ms")) {
		t.Errorf("end does not scroll to the last member:\n%s", s)
	}
	keys(m, "pgup", "j")
	keys(m, "esc")
	if m.mode.view == viewEvent || !strings.Contains(screen(m), "EVENTS") {
		t.Fatal("esc does not go back to the log")
	}
}
