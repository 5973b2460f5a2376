package tui

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// payload is what someone who can write the database (or run a node) may put
// in a name: a screen clear, a window title, CR, LF and TAB, a right-to-left
// override and an isolate, DEL and the C1 CSI. It holds no SGR sequence, so that
// the tests can take the dashboard's own styling out of a frame and demand that
// no ESC is left.
const payload = "\x1b[2J\x1b]0;pwned\x07\r\n\tX\u202eY\u2066\x7f\u009b"

// shown is how payload reads once made safe.
const shown = `\x1b[2J\x1b]0;pwned\x07\r\n\tX\u202eY\u2066\x7f\u009b`

// renamed returns a deep enough copy of s with every string the database
// controls passed through f, consistently (a scope's name and its terms, a
// node's id and the followers lists).
func renamed(s *collector.Snapshot, f func(string) string) *collector.Snapshot {
	c := *s
	c.Health.Database, c.Health.LastError = f(c.Health.Database), f("read failed")
	c.Health.Source = collector.SourceDisconnected
	each := func(xs []string) []string {
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = f(x)
		}
		return out
	}
	alerts := func(as []collector.Alert) []collector.Alert {
		out := make([]collector.Alert, len(as))
		for i, a := range as {
			if a.Scope != "" {
				a.Scope = f(a.Scope)
			}
			if a.Node != "" {
				a.Node = f(a.Node)
			}
			a.Summary, a.Hint, a.Runbook = f(a.Summary), f(a.Hint), f(a.Runbook)
			out[i] = a
		}
		return out
	}
	c.Scopes = append([]collector.Scope(nil), s.Scopes...)
	for i := range c.Scopes {
		sc := &c.Scopes[i]
		sc.Name = f(sc.Name)
		if sc.Leader != "" {
			sc.Leader, sc.LeaderHost = f(sc.Leader), f(sc.LeaderHost)
		}
		sc.Followers, sc.Alerts = each(sc.Followers), alerts(sc.Alerts)
		if sc.HandoverTo != "" {
			sc.HandoverTo = f(sc.HandoverTo)
		}
		if sc.OpenTerm != nil {
			t := *sc.OpenTerm
			t.Scope, t.Holder, t.Hostname = f(t.Scope), f(t.Holder), f(t.Hostname)
			sc.OpenTerm = &t
		}
	}
	c.Nodes = append([]collector.Node(nil), s.Nodes...)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		n.ID, n.Hostname, n.Version = f(n.ID), f(n.Hostname), f(n.Version)
		n.Scopes, n.Leads = each(n.Scopes), each(n.Leads)
	}
	c.Terms = append([]collector.Term(nil), s.Terms...)
	for i := range c.Terms {
		t := &c.Terms[i]
		t.Scope, t.Holder, t.Hostname = f(t.Scope), f(t.Holder), f(t.Hostname)
		if t.EndedBy != "" {
			t.EndedBy = collector.Reason(f(string(t.EndedBy)))
		}
		if t.HandedTo != "" {
			t.HandedTo = f(t.HandedTo)
		}
	}
	c.Alerts = alerts(s.Alerts)
	return &c
}

func renamedEvents(evs []collector.Event, f func(string) string) []collector.Event {
	out := append([]collector.Event(nil), evs...)
	for i := range out {
		e := &out[i]
		e.Scope, e.Node, e.PrevHolder = f(e.Scope), f(e.Node), f(e.PrevHolder)
		if e.Reason != "" {
			e.Reason = f(e.Reason)
		}
	}
	crit := &collector.Alert{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: f("reports"), Summary: f("no leader")}
	return append(out,
		collector.Event{At: t0, Kind: collector.EventEvicted, Scope: f("billing"), Node: f("node-a"), Epoch: 42, Detail: f("backend 1 terminated by op"), Reason: f("zombie")},
		collector.Event{At: t0, Kind: collector.EventResignRequested, Scope: f("billing"), Node: f("node-a"), Epoch: 42, Detail: f("requested by op")},
		collector.Event{At: t0, Kind: collector.EventAlertFiring, Scope: f("reports"), Alert: crit, Detail: crit.Summary},
		collector.Event{At: t0, Kind: collector.EventKind(f("novel_kind")), Scope: f("billing")},
	)
}

func hostileName(s string) string {
	if s == "" {
		return ""
	}
	return s + payload + "-" + s
}

// plainName has the shape of hostileName without anything to escape.
func plainName(s string) string {
	if s == "" {
		return ""
	}
	return s + "PAYLOAD-" + s
}

// ownStyle is the dashboard's own styling (SGR) and nothing else.
var ownStyle = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// assertSafeFrame fails unless frame, once the dashboard's own SGR codes are
// taken out, is UTF-8 without an ESC or any other control character but line
// breaks, and shows the payload escaped.
func assertSafeFrame(t *testing.T, what, frame string) {
	t.Helper()
	text := ownStyle.ReplaceAllString(frame, "")
	if !utf8.ValidString(text) {
		t.Errorf("%s: not UTF-8", what)
	}
	for i, r := range text {
		if r != '\n' && termsafe.Unsafe(r) {
			t.Errorf("%s: %U at byte %d reaches the terminal raw:\n%q", what, r, i, text)
			return
		}
	}
	if !strings.Contains(text, `\x1b[2J`) {
		t.Errorf("%s: the payload is not shown escaped:\n%s", what, text)
	}
}

// TestEscapeHostileDashboard: every pane of the live dashboard — header,
// alert banner, scopes, nodes, terms, event log, status line, detail view,
// confirmation — shows database-written strings escaped, in exactly its own
// number of lines.
func TestEscapeHostileDashboard(t *testing.T) {
	trouble := troubleSnapshot()
	trouble.Scopes[0].HandoverTo = "node-c" // shown in the row and the detail
	trouble.Terms[2].HandedTo = "node-c"
	snap := renamed(trouble, hostileName)
	m, _ := setup(t, snap)
	m.events.add(renamedEvents(sampleEvents(), hostileName)...)
	frame := func(what string) {
		t.Helper()
		c := m.View().Content
		assertSafeFrame(t, what, c)
		if n := strings.Count(c, "\n") + 1; n != 40 {
			t.Errorf("%s: %d lines, want 40 (a name forged a line?)", what, n)
		}
	}
	frame("main view")
	for _, pane := range []string{"tab", "tab", "tab"} { // nodes, terms, events focused
		keys(m, pane)
		frame("main view, " + m.focus.String() + " focused")
	}
	keys(m, "tab") // back to scopes
	m.Update(tea.WindowSizeMsg{Width: 90, Height: 40})
	frame("compact view")
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})

	keys(m, "enter")
	if scopeDetail(m) == "" {
		t.Fatal("enter opened no detail view")
	}
	frame("detail view")
	keys(m, "esc")

	keys(m, "R")
	if m.mode.overlay != overlayConfirm {
		t.Fatal("R asked nothing")
	}
	frame("resign confirmation")
	keys(m, "n") // cancelled: the status line names the scope
	frame("status line")
	if !strings.Contains(m.status, "cancelled") || !strings.Contains(m.status, `\x1b[2J`) {
		t.Errorf("status %q: want the cancelled resign, its scope escaped", m.status)
	}
	keys(m, "O")
	if m.mode.overlay != overlayConfirm {
		t.Fatal("O asked nothing")
	}
	frame("handover confirmation") // names the target node
	keys(m, "n")

	keys(m, "/")
	m.Update(tea.PasteMsg{Content: "x" + payload})
	frame("filter being typed")
	keys(m, "enter")
	frame("filter kept")
}

// TestEscapeHostileOnce: `top --once` text has the lines of the same picture
// with plain names and no control character; its JSON is exact yet inert.
func TestEscapeHostileOnce(t *testing.T) {
	hostile := renamed(troubleSnapshot(), hostileName)
	plain := renamed(troubleSnapshot(), plainName)
	for _, width := range []int{0, 100} {
		var got, want strings.Builder
		if err := RenderOnce(&got, hostile, renamedEvents(sampleEvents(), hostileName), "text", width); err != nil {
			t.Fatal(err)
		}
		if err := RenderOnce(&want, plain, renamedEvents(sampleEvents(), plainName), "text", width); err != nil {
			t.Fatal(err)
		}
		for i, r := range got.String() {
			if r != '\n' && termsafe.Unsafe(r) {
				t.Fatalf("width %d: %U at byte %d:\n%q", width, r, i, got.String())
			}
		}
		if !strings.Contains(got.String(), `\x1b[2J`) {
			t.Errorf("width %d: the payload is not shown escaped:\n%s", width, got.String())
		}
		if g, w := strings.Count(got.String(), "\n"), strings.Count(want.String(), "\n"); g != w {
			t.Errorf("width %d: %d lines, %d with plain names:\n%s", width, g, w, got.String())
		}
	}
	if width0 := func() string {
		var b strings.Builder
		_ = RenderOnce(&b, hostile, nil, "text", 0)
		return b.String()
	}(); !strings.Contains(width0, "billing"+shown+"-billing") {
		t.Errorf("a scope's whole name is not shown escaped:\n%s", width0)
	}

	var b strings.Builder
	if err := RenderOnce(&b, hostile, renamedEvents(sampleEvents(), hostileName), "json", 0); err != nil {
		t.Fatal(err)
	}
	for i, r := range b.String() {
		if r != '\n' && termsafe.Unsafe(r) {
			t.Fatalf("json: %U at byte %d", r, i)
		}
	}
	var doc onceJSON
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Snapshot.Scopes[0].Name != hostile.Scopes[0].Name || doc.Events[0].Node != hostileName("node-b") {
		t.Fatalf("json must stay exact: %q, %q", doc.Snapshot.Scopes[0].Name, doc.Events[0].Node)
	}
}

// TestEscapeEventLines: an event line carries no control character whatever
// the event's strings hold.
func TestEscapeEventLines(t *testing.T) {
	for _, e := range renamedEvents(sampleEvents(), hostileName) {
		line, _ := eventLine(e)
		for _, r := range line {
			if termsafe.Unsafe(r) {
				t.Errorf("%s: %U in %q", e.Kind, r, line)
				break
			}
		}
	}
}
