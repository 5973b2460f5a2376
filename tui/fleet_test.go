package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/pgleader/pgleader/collector"
)

// tagged is s as a fleet's member db: a copy with db in every Database
// field (what collector.Fleet's merge does).
func tagged(s *collector.Snapshot, db string) *collector.Snapshot {
	out := *s
	out.Scopes = slices.Clone(s.Scopes)
	for i := range out.Scopes {
		sc := &out.Scopes[i]
		sc.Database = db
		if sc.OpenTerm != nil {
			t := *sc.OpenTerm
			t.Database = db
			sc.OpenTerm = &t
		}
		sc.Alerts = slices.Clone(sc.Alerts)
		for j := range sc.Alerts {
			sc.Alerts[j].Database = db
		}
	}
	out.Nodes = slices.Clone(s.Nodes)
	for i := range out.Nodes {
		out.Nodes[i].Database = db
	}
	out.Terms = slices.Clone(s.Terms)
	for i := range out.Terms {
		out.Terms[i].Database = db
	}
	out.Alerts = slices.Clone(s.Alerts)
	for i := range out.Alerts {
		out.Alerts[i].Database = db
	}
	return &out
}

// fleetSnapshot is three databases whose scope names and node ids repeat:
// billing (healthy), ledger (split brain and no leader) and orders, which
// has not been read for 14s (its last-known state: split brain and no
// leader too, which must not count).
func fleetSnapshot() *collector.Snapshot {
	members := []struct {
		name string
		s    *collector.Snapshot
		up   bool
	}{{"billing", healthySnapshot(), true}, {"ledger", troubleSnapshot(), true}, {"orders", troubleSnapshot(), false}}
	out := &collector.Snapshot{Seq: 500, At: t0, DBTime: t0, Health: health(), FenceRejected: map[string]uint64{}}
	out.Health.Database = "3 databases"
	lastRead := t0.Add(-12 * time.Second)
	for _, mb := range members {
		s := tagged(mb.s, mb.name)
		st := collector.DatabaseState{Name: mb.name, Status: collector.DatabaseUp, Database: "app @ " + mb.name + "-db:5432",
			LastRead: t0, Source: collector.SourceLive, Scopes: len(s.Scopes)}
		out.Scopes = append(out.Scopes, s.Scopes...)
		out.Nodes = append(out.Nodes, s.Nodes...)
		out.Terms = append(out.Terms, s.Terms...)
		if mb.up {
			out.Alerts = append(out.Alerts, s.Alerts...)
		} else {
			st.Status, st.LastRead, st.Age = collector.DatabaseUnreachable, lastRead, 12*time.Second
			st.Reason = "dial tcp 10.0.0.7:5432: connect: connection refused"
			out.Alerts = append(out.Alerts, collector.Alert{Kind: collector.AlertCollectorDown, Severity: collector.SeverityCritical,
				Database: mb.name, Summary: "database orders unreachable (last read at 03:11:48): " + st.Reason,
				Hint:    "check the database and the network from this host; its last-known scopes stay on screen, greyed",
				Runbook: "docs/runbooks.md#collector_down", Since: lastRead})
		}
		out.Databases = append(out.Databases, st)
	}
	slices.SortStableFunc(out.Terms, func(a, b collector.Term) int { return b.AcquiredAt.Compare(a.AcquiredAt) })
	slices.SortStableFunc(out.Alerts, func(a, b collector.Alert) int { // as the fleet sorts them
		return cmpInts(strings.Compare(string(a.Severity), string(b.Severity)), strings.Compare(string(a.Kind), string(b.Kind)),
			strings.Compare(a.Database, b.Database), strings.Compare(a.Scope, b.Scope))
	})
	return out
}

// fleetEvents are sampleEvents of billing, and ledger's loss of its leader.
func fleetEvents() []collector.Event {
	evs := sampleEvents()
	for i := range evs {
		evs[i].Database = "billing"
	}
	return append(evs, collector.Event{Seq: 5, At: t0.Add(-42 * time.Second), Kind: collector.EventTermClosed,
		Scope: "reports", Node: "node-b", Epoch: 7, Reason: "heartbeat_timeout", Database: "ledger"})
}

// TestGoldenFleet pins a fleet's frames: three databases, one unreachable.
// Update with: go test ./tui -run TestGoldenFleet -update
func TestGoldenFleet(t *testing.T) {
	cases := []struct {
		name string
		keys []string
	}{
		{name: "fleet"},
		{name: "picker", keys: []string{"d", "down", "down"}},
		{name: "narrowed", keys: []string{"d", "down", "down", "enter"}},
		{name: "unreachable_detail", keys: []string{"/", "o", "r", "d", "e", "r", "s", "enter", "enter"}},
		{name: "problems", keys: []string{"p"}},
		{name: "help", keys: []string{"?"}},
		{name: "event_detail", keys: []string{"shift+tab", "enter"}},
	}
	for _, tc := range cases {
		for _, sz := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(tc.name+"/"+itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
				m, _ := setup(t, nil)
				m.Update(snapshotMsg{fleetSnapshot()})
				m.Update(eventsMsg{fleetEvents()})
				m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				keys(m, tc.keys...)
				golden.RequireEqual(t, plain(m.View().Content))
			})
		}
	}
}

// TestFleetUnreachableNotNoLeader: the scopes of a database that cannot be
// read are not counted as NO LEADER (nor anything else) in the header, and
// say in their row that their verdict is last-known.
func TestFleetUnreachableNotNoLeader(t *testing.T) {
	m, _ := setup(t, fleetSnapshot())
	for _, w := range []int{80, 120, 200} {
		line := strings.TrimRight(plain(m.verdictLine(w)), "\n ")
		if !strings.HasPrefix(line, "orders ✖ UNREACHABLE 14s") {
			t.Errorf("%d columns: header %q does not start with the unreachable database", w, line)
		}
		if strings.Count(line, "✖") != 2 { // orders' mark, and ledger's one scope without a leader
			t.Errorf("%d columns: header %q counts orders' last-known verdicts", w, line)
		}
		if textWidth(line) > w {
			t.Errorf("%d columns: header %d wide", w, textWidth(line))
		}
	}
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.ensureRows()
	rows := map[string][]cell{}
	for _, r := range m.scopes.rows {
		rows[keyLabel(r.key)] = r.cells
	}
	if c := rows["orders/reports"]; c[scVerdict].text != "? was NO LEADER" || c[scDatabase].text != "✖ orders" || c[scName].tone != toneMuted {
		t.Errorf("orders/reports row %+v", c)
	}
	if c := rows["ledger/reports"]; c[scVerdict].text != "✖ NO LEADER" || c[scDatabase].text != "ledger" {
		t.Errorf("ledger/reports row %+v", c)
	}
	if len(rows) != 6 {
		t.Errorf("%d scope rows, want 6 (two per database)", len(rows))
	}
}

// TestFleetHeaderTenDatabases: ten databases of a thousand scopes fit the
// header at 80 columns, the ones in trouble named first.
func TestFleetHeaderTenDatabases(t *testing.T) {
	out := &collector.Snapshot{Seq: 1, At: t0, DBTime: t0, Health: health()}
	for i := range 10 {
		db := fmt.Sprintf("db-%02d", i)
		s := tagged(bigCluster{scopes: 1000, nodes: 5, candidates: 5, troubled: i == 3}.snapshot(), db)
		out.Scopes = append(out.Scopes, s.Scopes...)
		out.Nodes = append(out.Nodes, s.Nodes...)
		st := collector.DatabaseState{Name: db, Status: collector.DatabaseUp, LastRead: t0}
		if i == 7 {
			st.Status, st.LastRead = collector.DatabaseUnreachable, t0.Add(-30*time.Second)
		}
		out.Databases = append(out.Databases, st)
	}
	m, _ := setup(t, out)
	for w, want := range map[int]string{
		80:  "db-07 ✖ UNREACHABLE 32s │ db-03 59 ✖ 59 ▲ │ 8 OK",
		200: "db-07 ✖ UNREACHABLE 32s │ db-03 882 ✔ · 59 ✖ · 59 ▲ │ db-00 1000 ✔ │ db-01 1000 ✔ │ db-02 1000 ✔ │ db-04 1000 ✔ │ db-05 1000 ✔ │ db-06 1000 ✔ │ db-08 1000 ✔",
	} {
		if got := strings.TrimRight(plain(m.verdictLine(w)), "\n "); !strings.HasPrefix(got, want) || textWidth(got) > w {
			t.Errorf("%d columns: header\n got %q\nwant %q…", w, got, want)
		}
	}
	if got := strings.TrimRight(plain(m.verdictLine(40)), "\n "); textWidth(got) > 40 || !strings.HasPrefix(got, "db-07 ✖ UNREACHABLE 32s") {
		t.Errorf("40 columns: header %q", got)
	}
}

// TestFleetNarrow: d's picker narrows every pane to one database, and back
// to all; / and p work across all databases.
func TestFleetNarrow(t *testing.T) {
	m, _ := setup(t, fleetSnapshot())
	m.Update(eventsMsg{fleetEvents()})
	dbsOf := func(tb *table, col int) []string {
		var out []string
		for _, r := range tb.rows {
			if d := strings.TrimPrefix(r.cells[col].text, "✖ "); !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		return out
	}
	for i, want := range []string{"billing", "ledger", "orders", ""} {
		keys(m, "d", "home")
		if !picking(m) {
			t.Fatal("d opened no picker")
		}
		for range (i + 1) % 4 {
			keys(m, "down")
		}
		keys(m, "enter")
		if picking(m) {
			t.Fatal("enter left the picker open")
		}
		m.ensureRows()
		got := dbsOf(m.scopes, scDatabase)
		if want == "" {
			if len(got) != 3 {
				t.Fatalf("back to all: scopes of %v", got)
			}
			continue
		}
		if !slices.Equal(got, []string{want}) || !slices.Equal(dbsOf(m.nodes, ndDatabase), []string{want}) ||
			!slices.Equal(dbsOf(m.terms, tmDatabase), []string{want}) {
			t.Fatalf("narrowed to %s: scopes of %v, nodes of %v, terms of %v", want,
				got, dbsOf(m.nodes, ndDatabase), dbsOf(m.terms, tmDatabase))
		}
		for _, i := range m.events.shown {
			if d := m.events.entries[i].ev.Database; d != want {
				t.Fatalf("narrowed to %s: an event of %s shows", want, d)
			}
		}
	}
	// The filter matches across databases, and matches database names.
	keys(m, "/")
	typed(m, "reports")
	keys(m, "enter")
	m.ensureRows()
	if got := dbsOf(m.scopes, scDatabase); len(got) != 3 || len(m.scopes.rows) != 3 {
		t.Fatalf("filter reports: %d rows of %v", len(m.scopes.rows), got)
	}
	keys(m, "esc", "p")
	m.ensureRows()
	var names []string
	for _, r := range m.scopes.rows {
		names = append(names, keyLabel(r.key))
	}
	slices.Sort(names)
	if want := []string{"ledger/billing", "ledger/reports", "orders/billing", "orders/reports"}; !slices.Equal(names, want) {
		t.Fatalf("problems: %v, want %v", names, want)
	}
}

// TestFleetNodeKeys: node-b of ledger and node-b of billing are two nodes:
// each row, detail and alert count is its own.
func TestFleetNodeKeys(t *testing.T) {
	m, _ := setup(t, fleetSnapshot())
	m.ensureRows()
	var keysSeen []string
	for _, r := range m.nodes.rows {
		keysSeen = append(keysSeen, r.key)
	}
	if len(keysSeen) != 9 || len(slices.Compact(slices.Sorted(slices.Values(keysSeen)))) != 9 {
		t.Fatalf("node rows %q", keysSeen)
	}
	if m.nodeAlerts[keyOf("ledger", "node-b")] != 1 || m.nodeAlerts[keyOf("billing", "node-b")] != 0 || m.nodeAlerts["node-b"] != 0 {
		t.Fatalf("node alerts %v", m.nodeAlerts)
	}
	m.openView(viewNode, keyOf("billing", "node-b"))
	frame := screen(m)
	if !strings.Contains(frame, "NODE billing/node-b") || !strings.Contains(frame, "● live") || !strings.Contains(frame, "database") {
		t.Fatalf("billing's node-b detail:\n%s", frame)
	}
	m.openView(viewNode, keyOf("ledger", "node-b"))
	if frame := screen(m); !strings.Contains(frame, "✖ down") {
		t.Fatalf("ledger's node-b detail:\n%s", frame)
	}
}

// TestFleetActionsRouted: an action on a scope goes to the actions of its
// database, with the scope's own name.
func TestFleetActionsRouted(t *testing.T) {
	per := map[string]*fakeActions{"billing": {}, "ledger": {}, "orders": {}}
	m, _ := setup(t, fleetSnapshot(), func(o *Options) {
		o.Actions = ActionsByDatabase(func(db string) Actions {
			if a, ok := per[db]; ok {
				return a
			}
			return nil
		})
	})
	m.ensureRows()
	i := slices.IndexFunc(m.scopes.rows, func(r row) bool { return r.key == keyOf("ledger", "billing") })
	m.scopes.setCursor(i)
	keys(m, "x")
	if m.mode.overlay != overlayConfirm || !strings.Contains(plain(m.confirmBox(120)), "ledger/billing") {
		t.Fatalf("no confirmation naming ledger/billing: %+v", m.mode.confirm)
	}
	runCmd(t, m, keys(m, "y"))
	if got := per["ledger"].calls; len(got) != 1 || got[0].scope != "billing" {
		t.Fatalf("ledger's actions got %+v", got)
	}
	if len(per["billing"].calls)+len(per["orders"].calls) != 0 {
		t.Fatal("an action went to another database")
	}
	// ActionsByDatabase alone refuses a scope without a database.
	if err := ActionsByDatabase(nil).Evict(context.Background(), "billing", ""); err == nil {
		t.Fatal("ActionsByDatabase.Evict without a database did not refuse")
	}
}

// TestFleetEventLog: event lines name their database, and a flood is one
// line per database.
func TestFleetEventLog(t *testing.T) {
	var evs []collector.Event
	for _, db := range []string{"billing", "orders"} {
		for i := range 6 {
			evs = append(evs, collector.Event{At: t0, Kind: collector.EventElected, Scope: fmt.Sprintf("s%d", i), Node: "node-1", Epoch: 2, Database: db})
		}
	}
	l := newEventLog()
	l.add(evs...)
	if len(l.entries) != 2 || !strings.Contains(l.entries[0].line, "billing │ node-1 leads 6 scopes") ||
		!strings.Contains(l.entries[1].line, "orders │ node-1 leads 6 scopes") {
		for _, e := range l.entries {
			t.Log(e.line)
		}
		t.Fatal("a flood per database")
	}
}

// tenThousandScopes is ten databases of a thousand scopes over five nodes
// each, one of them unreachable.
func tenThousandScopes() *collector.Snapshot {
	out := &collector.Snapshot{Seq: 1, At: t0, DBTime: t0, Health: health()}
	for i := range 10 {
		db := fmt.Sprintf("db-%02d", i)
		s := tagged(bigCluster{scopes: 1000, nodes: 5, candidates: 5, troubled: true}.snapshot(), db)
		out.Scopes = append(out.Scopes, s.Scopes...)
		out.Nodes = append(out.Nodes, s.Nodes...)
		out.Terms = append(out.Terms, s.Terms...)
		st := collector.DatabaseState{Name: db, Status: collector.DatabaseUp, LastRead: t0}
		if i == 7 {
			st.Status = collector.DatabaseUnreachable
		}
		out.Databases = append(out.Databases, st)
	}
	return out
}

// BenchmarkFleetSnapshotAndView: a fleet's new snapshot (10 × 1,000 scopes)
// arrives and is drawn at 120×40.
func BenchmarkFleetSnapshotAndView(b *testing.B) {
	snaps := []*collector.Snapshot{tenThousandScopes(), tenThousandScopes()}
	snaps[1].Seq = 2
	m := New(newFakeFeed(snaps[0]), Options{Now: fixedNow})
	b.Cleanup(m.stop)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.View()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Update(snapshotMsg{snaps[i%2]})
		m.View()
		i++
	}
}

// TestFleetPicker: the picker opens on what the panes show, esc and d close
// it unchanged, and ctrl+c quits from it.
func TestFleetPicker(t *testing.T) {
	m, _ := setup(t, fleetSnapshot())
	keys(m, "d", "down", "down", "enter")
	if m.fleet.only != "ledger" {
		t.Fatalf("narrowed to %q", m.fleet.only)
	}
	keys(m, "d")
	if m.fleet.pick != 2 {
		t.Fatalf("the picker opened on %d, not ledger's 2", m.fleet.pick)
	}
	keys(m, "down", "esc")
	if picking(m) || m.fleet.only != "ledger" {
		t.Fatalf("esc: picking %v, only %q", picking(m), m.fleet.only)
	}
	keys(m, "d", "d")
	if picking(m) {
		t.Fatal("d did not close the picker")
	}
	keys(m, "d")
	if _, ok := keys(m, "ctrl+c")().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c did not quit from the picker")
	}
}

// TestUnreachableSortsAsUnknown: the rows of a database that cannot be read
// are last-known ("? was OK"): the verdict sort puts them after what is known
// to be wrong and before what is known to be fine, never among the healthy
// ones; the state sort puts its nodes between late and live; p keeps them.
func TestUnreachableSortsAsUnknown(t *testing.T) {
	s := fleetSnapshot()
	for i := range s.Scopes {
		if sc := &s.Scopes[i]; sc.Database == "orders" {
			sc.Verdict, sc.Alerts = collector.VerdictOK, nil // last seen healthy
		}
	}
	m, _ := setup(t, s)
	m.ensureRows()
	var order []string
	for _, r := range m.scopes.rows {
		db, _ := splitKey(r.key)
		order = append(order, db)
	}
	if got := strings.Join(order, " "); got != "ledger ledger orders orders billing billing" {
		t.Errorf("scopes by verdict, databases: %s; want ledger's troubles, then orders' unknown, then billing's OK", got)
	}
	keys(m, "p")
	m.ensureRows()
	if n := len(m.scopes.rows); n != 4 {
		t.Errorf("p keeps %d scopes, want 4: ledger's two and orders' two", n)
	}
	keys(m, "p", "tab", "s") // nodes by state
	m.ensureRows()
	order = order[:0]
	for _, r := range m.nodes.rows {
		db, id := splitKey(r.key)
		order = append(order, db+"/"+id)
	}
	if got := strings.Join(order, " "); !strings.HasPrefix(got, "ledger/node-b orders/node-a orders/node-b orders/node-c ") {
		t.Errorf("nodes by state: %s; want ledger's down node, then orders' (unknown), then the live ones", got)
	}
}
