package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// TestEventLogInTimeOrder: events of different sources that arrive out of
// order by milliseconds are shown in time order, the filter included.
func TestEventLogInTimeOrder(t *testing.T) {
	l := newEventLog()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l.add(collector.Event{At: at(978), Kind: collector.EventNodeJoined, Node: "n978"},
		collector.Event{At: at(986), Kind: collector.EventNodeJoined, Node: "n986"})
	l.add(collector.Event{At: at(925), Kind: collector.EventNodeJoined, Node: "n925"},
		collector.Event{At: at(920), Kind: collector.EventNodeJoined, Node: "n920"},
		collector.Event{At: at(990), Kind: collector.EventNodeJoined, Node: "n990"})
	var got []string
	for _, i := range l.shown {
		got = append(got, l.entries[i].ev.Node)
	}
	if want := "n920 n925 n978 n986 n990"; strings.Join(got, " ") != want {
		t.Fatalf("shown %v, want %s", got, want)
	}
}

// TestTermClosedSaysItOnce: the line of a term closed by its successor names
// the reason and the successor once each.
func TestTermClosedSaysItOnce(t *testing.T) {
	line, _ := eventLine(collector.Event{At: t0, Kind: collector.EventTermClosed, Scope: "billing", Node: "node-2",
		Epoch: 1<<40 + 3, Reason: "database_failover", Detail: "closed by successor node-1"})
	want := "billing epoch t2·3 of node-2 ended (database_failover), closed by its successor node-1"
	if !strings.HasSuffix(line, want) {
		t.Fatalf("line %q, want it to end with %q", line, want)
	}
	if strings.Count(line, "successor") != 1 || strings.Count(line, "node-1") != 1 {
		t.Fatalf("line %q repeats itself", line)
	}
}

// TestEventLogFilterSearchesText: / matches the event's text (its reason and
// detail), not only its scope and node.
func TestEventLogFilterSearchesText(t *testing.T) {
	l := newEventLog()
	l.add(collector.Event{At: t0, Kind: collector.EventTermClosed, Scope: "billing", Node: "node-2", Epoch: 3, Reason: "crashed"},
		collector.Event{At: t0.Add(time.Millisecond), Kind: collector.EventReleased, Scope: "reports", Node: "node-1", Epoch: 4, Reason: "resigned"})
	l.setFilter("CRASHED", "")
	if len(l.shown) != 1 || l.entries[l.shown[0]].ev.Scope != "billing" {
		t.Fatalf("filter crashed shows %d entries (%v), want billing's closed term", len(l.shown), l.shown)
	}
	l.setFilter("node-1", "")
	if len(l.shown) != 1 || l.entries[l.shown[0]].ev.Scope != "reports" {
		t.Fatalf("filter node-1 shows %v", l.shown)
	}
}

// TestEventLogEllipsis: a line longer than the pane ends in an ellipsis, not
// mid-word.
func TestEventLogEllipsis(t *testing.T) {
	l := newEventLog()
	l.add(collector.Event{At: t0, Kind: collector.EventTermClosed, Scope: "billing", Node: "node-2", Epoch: 3,
		Reason: "crashed", Detail: "closed by successor node-1"})
	lines := l.render(newStyles(nil, false), 40, 3, false) // no colour
	if !strings.Contains(lines[len(lines)-1]+lines[0], "…") {
		t.Fatalf("rendered %q, want the cut line to end in an ellipsis", lines)
	}
}

// TestElectedSaysThePredecessorOnce: an election names its predecessor once.
func TestElectedSaysThePredecessorOnce(t *testing.T) {
	line, _ := eventLine(collector.Event{At: t0, Kind: collector.EventElected, Scope: "billing", Node: "node-3", Epoch: 2,
		PrevHolder: "node-1", Detail: "after node-1 (epoch 1)"})
	if !strings.HasSuffix(line, "node-3 leads billing at epoch 2 (after node-1 (epoch 1))") || strings.Count(line, "node-1") != 1 {
		t.Fatalf("line %q", line)
	}
}

// TestEventLogGroupsFloods: a node's failover over many scopes is one line
// naming the count and the scopes (/ still finds a scope in it); a few events
// stay lines of their own.
func TestEventLogGroupsFloods(t *testing.T) {
	l := newEventLog()
	var burst []collector.Event
	for i := range 252 {
		burst = append(burst, collector.Event{At: t0, Kind: collector.EventTermClosed, Scope: fmt.Sprintf("scope-%04d", i),
			Node: "node-2", Epoch: 3, Reason: "crashed", Detail: "closed by successor node-1"})
	}
	burst = append(burst, collector.Event{At: t0.Add(time.Millisecond), Kind: collector.EventNodeLeft, Node: "node-2", Reason: "down"})
	for i := range 3 {
		burst = append(burst, collector.Event{At: t0.Add(2 * time.Millisecond), Kind: collector.EventElected, Scope: fmt.Sprintf("scope-%04d", i), Node: "node-1", Epoch: 4})
	}
	l.add(burst...)
	if len(l.entries) != 1+1+3 {
		t.Fatalf("%d entries, want the group, the node that left and 3 elections", len(l.entries))
	}
	if line := l.entries[0].line; !strings.Contains(line, "252 terms of node-2 ended (crashed), closed by their successors: scope-0000, scope-0001") {
		t.Fatalf("group line %q", line)
	}
	l.setFilter("scope-0251", "")
	if len(l.shown) != 1 || l.shown[0] != 0 {
		t.Fatalf("filter scope-0251 shows %v, want the group", l.shown)
	}

	// One scope's history delivered at once (after a pause): no flood, each
	// its own line.
	l = newEventLog()
	var backlog []collector.Event
	for i := range 6 {
		backlog = append(backlog, collector.Event{At: t0.Add(time.Duration(i) * 10 * time.Second), Kind: collector.EventTermClosed,
			Scope: "billing", Node: "node-2", Epoch: int64(3 + i), Reason: "crashed"})
	}
	l.add(backlog...)
	if len(l.entries) != 6 || strings.Contains(l.entries[0].line, "terms of") {
		t.Fatalf("%d entries (first %q), want 6 lines of their own", len(l.entries), l.entries[0].line)
	}
}

// A failover of 260 scopes arrives in several deliveries: the collector's
// channel holds 256 events and a claim batch brings two per scope (closed term,
// election), interleaved, so the dashboard reads the flood in pieces, cut
// anywhere. Each flood is still one line, counting all of its scopes.
func TestEventLogFloodAcrossDeliveries(t *testing.T) {
	var burst []collector.Event
	at := t0
	add := func(node, heir string, from, n int) {
		for i := from; i < from+n; i++ {
			at = at.Add(100 * time.Microsecond)
			scope := fmt.Sprintf("scope-%04d", i)
			burst = append(burst,
				collector.Event{At: at, Kind: collector.EventTermClosed, Scope: scope, Node: node, Epoch: 1, Reason: "crashed", Detail: "closed by successor " + heir},
				collector.Event{At: at, Kind: collector.EventElected, Scope: scope, Node: heir, Epoch: 2})
		}
	}
	add("node-2", "node-3", 0, 10)
	add("node-2", "node-1", 10, 250)
	for _, cuts := range [][]int{{len(burst)}, {1, 257}, {3, 4, 256, 300}, {255, 256, 511}, {2, 4, 6, 8, 10}} {
		t.Run(fmt.Sprint(cuts), func(t *testing.T) {
			l := newEventLog()
			prev := 0
			for _, c := range append(cuts, len(burst)) {
				l.add(burst[prev:c]...)
				prev = c
			}
			var lines []string
			for _, e := range l.entries {
				lines = append(lines, e.summary)
			}
			want := []string{"260 terms of node-2 ended (crashed), closed by their successors", "node-3 leads 10 scopes", "node-1 leads 250 scopes"}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
			}
			for i, w := range want {
				if !strings.HasSuffix(lines[i], w) {
					t.Errorf("line %d %q, want it to say %q", i, lines[i], w)
				}
			}
			if n := len(l.entries[0].members); n != 260 {
				t.Errorf("the closed terms' line holds %d events, want 260", n)
			}
		})
	}
}

// A subscriber that lost events says so in the log, with the count.
func TestEventLogSaysEventsWereLost(t *testing.T) {
	line, tn := eventLine(collector.Event{At: t0, Kind: collector.EventDropped, Detail: "122 events after this point were not delivered to this subscriber"})
	if !strings.Contains(line, "‼ events lost") || !strings.Contains(line, "122 events") || tn != toneBad {
		t.Fatalf("line %q, tone %v", line, tn)
	}
}

// TestEventsFollowAgain: a line selected in the event log (k, or Enter and
// back) stops the log following the newest, as its title says; leaving the
// pane, or esc on it, makes it follow again: an unfocused log shows no
// cursor, and no key of another pane could bring it back to its tail.
func TestEventsFollowAgain(t *testing.T) {
	newEvent := func(i int) collector.Event {
		return collector.Event{At: t0.Add(time.Duration(i) * time.Second), Kind: collector.EventNodeJoined, Node: "node-" + itoa(10+i)}
	}
	for _, leave := range []string{"tab", "esc"} {
		for _, sz := range [][2]int{{80, 24}, {120, 40}} {
			m, _ := setup(t, healthySnapshot())
			m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			m.Update(eventsMsg{sampleEvents()})
			keys(m, "shift+tab", "k", "enter", "esc") // select a line, read it, come back
			m.Update(eventsMsg{[]collector.Event{newEvent(1)}})
			if s := screen(m); m.events.follow || !strings.Contains(s, "scrolled (end or esc follows)") {
				t.Fatalf("%s %dx%d: a selected line must hold the log, and say so:\n%s", leave, sz[0], sz[1], s)
			}
			keys(m, leave)
			m.Update(eventsMsg{[]collector.Event{newEvent(2)}})
			s := screen(m)
			if !m.events.follow || !strings.Contains(s, "node-12") || !strings.Contains(s, "· following") {
				t.Errorf("%s %dx%d: the log does not follow again:\n%s", leave, sz[0], sz[1], s)
			}
			if e, _ := m.events.selected(); e.ev.Node != "node-12" {
				t.Errorf("%s %dx%d: the cursor is on %q, want the newest", leave, sz[0], sz[1], e.ev.Node)
			}
		}
	}
}
