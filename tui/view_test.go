package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/tui/show"
)

func TestDetailView(t *testing.T) {
	m, _ := setup(t, troubleSnapshot())
	keys(m, "enter")
	if scopeDetail(m) != "billing" {
		t.Fatalf("enter opened %q", scopeDetail(m))
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
	if scopeDetail(m) != "" || !strings.Contains(screen(m), "SCOPES 2") {
		t.Fatal("esc does not return to the main view")
	}
	// A bound scope names its roles (pgleader scope bind).
	b := troubleSnapshot()
	b.Seq = 400
	b.Scopes[0].BoundTo = []string{"billing_svc", "billing_batch"}
	m.Update(snapshotMsg{b})
	keys(m, "enter")
	if s := screen(m); !strings.Contains(s, "bound to") || !strings.Contains(s, "billing_svc, billing_batch") {
		t.Errorf("the detail view does not show the binding:\n%s", s)
	}
}

func TestHelpSearch(t *testing.T) {
	m, _ := setup(t, healthySnapshot())
	keys(m, "?")
	if !helpOpen(m) {
		t.Fatal("? does not open help")
	}
	s := screen(m)
	for _, want := range []string{"navigate", "page up", "evict: terminate leader's session", "resign the leader gracefully", "kill -9 leader", "SPLIT BRAIN"} {
		if !strings.Contains(s, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	keys(m, "/")
	typed(m, "interval")
	s = screen(m)
	if !strings.Contains(s, "longer poll interval") || strings.Contains(s, "page up") {
		t.Fatalf("help search 'interval':\n%s", s)
	}
	typed(m, "q") // typing goes to the search, it does not quit
	if !helpOpen(m) || !strings.Contains(screen(m), "nothing matches") {
		t.Fatal("q in help must search, not quit")
	}
	keys(m, "backspace", "enter") // the search kept, the keyboard back to reading
	if !helpOpen(m) || searching(m) || m.mode.query != "interval" || !strings.Contains(screen(m), "“interval” (/ edits)") {
		t.Fatalf("enter keeps the search: open %v, typing %v, query %q", helpOpen(m), searching(m), m.mode.query)
	}
	keys(m, "esc")
	if !helpOpen(m) || m.mode.query != "" {
		t.Fatal("esc clears the search first")
	}
	keys(m, "esc")
	if helpOpen(m) {
		t.Fatal("esc closes help")
	}
	// Two quick escapes can arrive as one alt+esc: search cleared and closed.
	keys(m, "?", "/")
	typed(m, "page")
	m.Update(tea.KeyPressMsg{Code: tea.KeyEscape, Mod: tea.ModAlt})
	if helpOpen(m) {
		t.Fatal("alt+esc must act as esc twice")
	}
}

// TestHelpScrollsWithJK: the help screen opens to be read: j and k scroll it
// (as the footer says), they do not type "j" into a search that then matches
// nothing; / starts the search, where they type.
func TestHelpScrollsWithJK(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Faults = &fakeFaults{keys: demoFaults} })
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		keys(m, "?", "j", "j")
		scroll := m.mode.helpScroll // a render clamps it to the last page
		s := screen(m)
		if m.mode.query != "" || strings.Contains(s, "nothing matches") || scroll != 2 {
			t.Fatalf("%dx%d: j j in help: query %q, scroll %d:\n%s", sz[0], sz[1], m.mode.query, scroll, s)
		}
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if footer := lines[len(lines)-1]; !strings.Contains(footer, "↑↓/kj scroll") || !strings.Contains(footer, "/ search") {
			t.Errorf("%dx%d: help footer %q", sz[0], sz[1], footer)
		}
		m.mode.helpScroll = 2
		keys(m, "k")
		if m.mode.helpScroll != 1 {
			t.Errorf("%dx%d: k scrolls to %d, want 1", sz[0], sz[1], m.mode.helpScroll)
		}
		keys(m, "/", "j", "k")
		if m.mode.query != "jk" || !searching(m) {
			t.Errorf("%dx%d: after /, j k typed %q", sz[0], sz[1], m.mode.query)
		}
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
	// node-c until -3m, a 1.8 s gap (inside one column: not drawn), node-a
	// since. Marks go by first appearance in the window: node-b (both scopes
	// at the window's start, before node-c), node-c, node-a.
	billing := strings.TrimPrefix(plain(lines[1]), "▸ billing ")
	if got, want := strings.TrimSpace(billing), strings.Repeat("█", 6)+strings.Repeat("▒", 18)+strings.Repeat("░", 36); got != want {
		t.Fatalf("billing strip\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(plain(legend), "█ node-b  ▒ node-c  ░ node-a  · none") {
		t.Fatalf("legend %q", plain(legend))
	}
	// The last column is now: a takeover 1s ago shows the new leader there,
	// although the old term covers most of that column.
	s := healthySnapshot()
	for i, tm := range s.Terms {
		if tm.Scope == "billing" && tm.Open() {
			s.Terms[i].AcquiredAt = t0.Add(-time.Second)
			s.Terms[i].HeldFor = time.Second
		}
	}
	now, _ := setup(t, s)
	now.ensureRows()
	lines, _ = now.timelineLines(now.look, 2+7+1+60, 3, []string{"billing", "reports"})
	strip := []rune(strings.TrimSpace(strings.TrimPrefix(plain(lines[1]), "▸ billing ")))
	if last := string(strip[len(strip)-1]); last != "░" {
		t.Fatalf("billing strip %s: the last column shows %q, want node-a's ░ (it leads now)", string(strip), last)
	}
	// More holders than glyphs: the legend says how many it cannot tell apart.
	big, _ := setup(t, bigSnapshot(10, 10))
	_, legend = big.timelineLines(big.look, 80, 11, scopeKeys(big))
	if !strings.Contains(plain(legend), "? 2 more nodes (over 8: see the table)") {
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
		{collector.Event{At: t0, Kind: collector.EventHandoverRequested, Scope: "billing", Node: "node-a", Epoch: 42,
			Detail: "to node-c, requested by oncall via pgleader handover"},
			"  03:12:00.000  ⇢ handover asked node-a asked to hand over billing: to node-c, requested by oncall via pgleader handover", toneWarn},
		{collector.Event{At: t0, Kind: collector.EventHandoverCancelled, Scope: "billing", Detail: "to node-c, withdrawn by oncall"},
			"  03:12:00.000  ⇠ handover off   billing: to node-c, withdrawn by oncall", toneWarn},
		{collector.Event{At: t0, Kind: collector.EventScopeRetired, Scope: "old", Detail: "by oncall"},
			"  03:12:00.000  ⌫ scope retired  old: by oncall", toneMuted},
		{collector.Event{At: t0, Kind: collector.EventScopeRevived, Scope: "old", Node: "node-d"},
			"  03:12:00.000  ↺ scope revived  old by node-d", toneMuted},
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
		// One node per event: a flood of one node's events is one grouped line.
		burst = append(burst, collector.Event{Seq: uint64(i), At: t0, Kind: collector.EventHeartbeatLate, Scope: scope, Node: fmt.Sprintf("node-%d", i)})
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

// TestNodeDetailSupervised: a pgleader run node's detail says what it
// supervises, and its row in the nodes table names the command.
func TestNodeDetailSupervised(t *testing.T) {
	snap := troubleSnapshot()
	exit := 3
	for i := range snap.Nodes {
		if snap.Nodes[i].ID == "node-b" {
			snap.Nodes[i].Supervisor = &collector.Supervised{Command: "billing-worker", State: "running", PID: 4242, Epoch: 7, Restarts: 2, LastExit: &exit}
		}
	}
	m, _ := setup(t, snap)
	if s := screen(m); !strings.Contains(s, "0.4.0 ▸billing-") {
		t.Errorf("the nodes table does not name node-b's command:\n%s", s)
	}
	keys(m, "tab", "j", "enter")
	s := screen(m)
	want := "supervises  billing-worker · running · pid 4242 · epoch 7 · 2 restarts · last exit 3 (pgleader run)"
	if !strings.Contains(s, want) {
		t.Errorf("node detail lacks %q:\n%s", want, s)
	}
	// node-b is down: the collector says its child's state is unknown.
	for i := range snap.Nodes {
		if snap.Nodes[i].ID == "node-b" {
			snap.Nodes[i].Supervisor = &collector.Supervised{Command: "billing-worker", State: "unknown", Epoch: 7, Restarts: 2}
		}
	}
	m, _ = setup(t, snap)
	keys(m, "tab", "j", "enter")
	if s := screen(m); !strings.Contains(s, "supervises  billing-worker · ? unknown now (its node is not live; its last report follows) · epoch 7") {
		t.Errorf("a down node's child reads as known:\n%s", s)
	}
}

// TestNodeDetailDoorbell: a node whose doorbell cannot ring says so, and why,
// in its detail; one whose doorbell rings has no such line.
func TestNodeDetailDoorbell(t *testing.T) {
	snap := troubleSnapshot()
	for i := range snap.Nodes {
		if snap.Nodes[i].ID == "node-b" {
			snap.Nodes[i].DoorbellUnringable = "a superuser login"
		}
	}
	m, _ := setup(t, snap)
	keys(m, "tab", "j", "enter")
	want := "doorbell    cannot ring, its wake-ups wait for its heartbeats (within one interval): a superuser login"
	if s := screen(m); !strings.Contains(s, want) {
		t.Errorf("node detail lacks %q:\n%s", want, s)
	}
	m, _ = setup(t, troubleSnapshot())
	keys(m, "tab", "j", "enter")
	if s := screen(m); strings.Contains(s, "doorbell") {
		t.Errorf("a node whose doorbell rings has a doorbell line:\n%s", s)
	}
}

// TestNodeDetail: Enter on the nodes pane opens the node's detail, with its
// scopes and role in each, its state and timing; Esc closes it.
func TestNodeDetail(t *testing.T) {
	m, _ := setup(t, troubleSnapshot())
	keys(m, "tab", "j", "enter")
	if nodeDetail(m) != "node-b" || scopeDetail(m) != "" {
		t.Fatalf("enter on node-b: node detail %q, scope detail %q", nodeDetail(m), scopeDetail(m))
	}
	s := screen(m)
	for _, want := range []string{"NODE node-b", "✖ down", "billing  not following", "reports  not following",
		"heartbeat every 0.5s · trust window 1.5s · session lease 2.0s", "os pid 31002 on host-b", "0.4.0",
		"1: not live", "stale_node", "login role  svc_node_b (the database role it registered under)"} {
		if !strings.Contains(s, want) {
			t.Errorf("node detail lacks %q:\n%s", want, s)
		}
	}
	keys(m, "esc")
	if nodeDetail(m) != "" || m.focus != paneNodes {
		t.Fatalf("esc: node detail %q, focus %s", nodeDetail(m), m.focus)
	}

	// A node that leaves the snapshot is said so, not shown stale.
	keys(m, "k", "enter")
	if !strings.Contains(screen(m), "billing  leads") {
		t.Errorf("node-a's detail lacks its lead:\n%s", screen(m))
	}
	next := troubleSnapshot()
	next.Seq++
	next.Nodes = next.Nodes[1:]
	m.Update(snapshotMsg{next})
	if s := screen(m); !strings.Contains(s, "node-a is not in the latest snapshot") {
		t.Errorf("a vanished node:\n%s", s)
	}
}

// realisticSnapshot is a cluster after an hour of a demo: the 50 recent
// terms the collector sends (billing failed over 60 times), and the log of
// those failovers, a term closed and an election each (send them one
// failover at a time, as the collector does: realisticEvents).
func realisticSnapshot() (*collector.Snapshot, []collector.Event) {
	s := failovers(60)
	s.Terms = s.Terms[:50]
	var evs []collector.Event
	for i := len(s.Terms) - 1; i >= 0; i-- {
		t := s.Terms[i]
		if t.Open() {
			continue
		}
		evs = append(evs,
			collector.Event{At: t.ReleasedAt, Kind: collector.EventTermClosed, Scope: t.Scope, Node: t.Holder, Epoch: t.Epoch,
				Reason: string(t.EndedBy), Detail: "closed by successor node-x"},
			collector.Event{At: t.ReleasedAt.Add(20 * time.Millisecond), Kind: collector.EventElected, Scope: t.Scope, Node: "node-x",
				Epoch: t.Epoch + 1, Detail: fmt.Sprintf("after %s (epoch %d)", t.Holder, t.Epoch)})
	}
	return s, evs
}

// realisticEvents sends evs two by two, a failover at a time.
func realisticEvents(m *Model, evs []collector.Event) {
	for i := 0; i < len(evs); i += 2 {
		m.Update(eventsMsg{evs[i:min(i+2, len(evs))]})
	}
}

// TestLayoutSpareRows: on a big terminal the rows the scopes, nodes and the
// terms' timeline do not need go to the event log, not to blank space: with
// a realistic history, at most two rows show nothing on their left half
// (a blank row, or the timeline's side of the terms pane beside a taller
// table).
func TestLayoutSpareRows(t *testing.T) {
	s, evs := realisticSnapshot()
	for _, sz := range [][2]int{{120, 40}, {200, 50}} {
		t.Run(itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
			m, _ := setup(t, s)
			realisticEvents(m, evs)
			m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			f := newFrame(m)
			blank := 0
			for _, l := range f.lines {
				if strings.TrimSpace(ansi.Cut(l, 0, sz[0]/2)) == "" {
					blank++
				}
			}
			if blank > 2 {
				t.Errorf("%d rows show nothing on their left half:\n%s", blank, f.text)
			}
			// And the log got them: it shows more lines than the terms table.
			events := len(f.panes["EVENTS"]) - 1
			if events < 10 {
				t.Errorf("the event log shows %d lines:\n%s", events, f.text)
			}
		})
	}
}

// TestCompactPanesReachable: at 80×24 every pane can be brought on screen
// with tab, with its title marked and its rows, and scrolled to its last row.
func TestCompactPanesReachable(t *testing.T) {
	s, evs := realisticSnapshot()
	m, _ := setup(t, s)
	realisticEvents(m, evs)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	names := map[pane]string{paneScopes: "SCOPES", paneNodes: "NODES", paneTerms: "TERMS", paneEvents: "EVENTS"}
	for p := paneScopes; p < paneCount; p++ {
		if m.focus != p {
			t.Fatalf("tab reached %s, want %s", m.focus, p)
		}
		keys(m, "end")
		f := newFrame(m)
		lines, ok := f.panes[names[p]]
		if !ok || !strings.HasPrefix(lines[0], "▸ "+names[p]) {
			t.Fatalf("%s is not on screen with the focus:\n%s", names[p], f.text)
		}
		var last string
		switch p {
		case paneScopes:
			last = "reports"
		case paneNodes:
			last = "node-c"
		case paneTerms:
			last = show.Epoch(s.Terms[len(s.Terms)-1].Epoch) + "  " + s.Terms[len(s.Terms)-1].Scope
		case paneEvents:
			last = "node-x leads billing at epoch 102"
		}
		found := false
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "▸ ") && strings.Contains(l, last) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: end does not bring its last row (%q) on screen under the cursor:\n%s", names[p], last, f.text)
		}
		keys(m, "tab")
	}
}

// TestColumnsStayPut: from one snapshot to the next, values that change
// width (a heartbeat age from 0.2s to 12s, "none for 9.9s" to "none for
// 10s", a node's SEEN from 0.3s to 1m02s) do not move the columns: the
// headers are where they were, at 80×24 and 120×40.
func TestColumnsStayPut(t *testing.T) {
	frame := func(hb, none, seen time.Duration) *collector.Snapshot {
		s := troubleSnapshot()
		s.Scopes[0].HeartbeatAge = hb
		s.Scopes[1].LeaderlessFor = none
		s.Nodes[2].LastSeenAge = seen
		return s
	}
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		m, _ := setup(t, frame(200*time.Millisecond, 9900*time.Millisecond, 300*time.Millisecond))
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		headers := func() []string {
			var hs []string
			for _, l := range strings.Split(screen(m), "\n") {
				if strings.Contains(l, "SCOPE ") && strings.Contains(l, "VERDICT") || strings.Contains(l, "NODE") && strings.Contains(l, "STATE") {
					hs = append(hs, l)
				}
			}
			return hs
		}
		before := headers()
		next := frame(12*time.Second, 10*time.Second, time.Minute+2*time.Second)
		next.Seq++
		m.Update(snapshotMsg{next})
		if after := headers(); len(before) == 0 || strings.Join(after, "\n") != strings.Join(before, "\n") {
			t.Errorf("%dx%d: the columns moved:\n%s\n→\n%s", sz[0], sz[1], strings.Join(before, "\n"), strings.Join(after, "\n"))
		}
	}
}

// TestNodeDetailLifecycle: the node detail gives the start of the process
// that registered last, how long it has run, and how many times a new
// process registered the node id (a crash loop under a fixed id shows); a
// replay says what it cannot know.
func TestNodeDetailLifecycle(t *testing.T) {
	snap := healthySnapshot()
	snap.Nodes[0].Restarts, snap.Nodes[0].StartedAt = 3, t0.Add(-95*time.Second)
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		m, _ := setup(t, snap)
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		keys(m, "tab", "enter")
		s := screen(m)
		if !strings.Contains(s, "restarts    3 · registered again by a new process 3 times") ||
			!strings.Contains(s, "process     os pid 31001 on host-a · started 03:10:25 (up 1m35s)") {
			t.Errorf("%dx%d: node-a's detail lacks its restarts and its process start:\n%s", sz[0], sz[1], s)
		}
	}
	m, _ := replayAt(t, t0.Add(-20*time.Minute))
	keys(m, "tab", "enter")
	if s := screen(m); !strings.Contains(s, "first registered") || !strings.Contains(s, "restarts    n/a in replay") {
		t.Errorf("replayed node detail:\n%s", s)
	}
}
