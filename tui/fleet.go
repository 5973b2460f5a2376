package tui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// A fleet is a snapshot of several databases (collector.Fleet): its
// Databases list them, and every scope, node, term, alert and event names
// its database. Scope names and node ids repeat across databases, so the
// dashboard keys rows, cursors, detail views, heartbeat histories and the
// timeline's holders by (database, name): keyOf. With one database the key
// is the name itself, and nothing on screen changes.
//
// In a fleet the tables get a DATABASE column, the header counts verdicts
// per database, d narrows every pane to one database and back to all, and /
// and p work across all of them. A database that cannot be read keeps its
// last-known rows, marked "? was OK" and greyed, its DATABASE cell "✖
// orders": it is never counted as NO LEADER.

// keySep joins a database and a name in a key (a byte no name uses).
const keySep = "\x1f"

// keyOf is the key of name (a scope or a node) in database db: the name
// alone when db is "" (one database).
func keyOf(db, name string) string {
	if db == "" {
		return name
	}
	return db + keySep + name
}

// splitKey is keyOf's inverse.
func splitKey(key string) (db, name string) {
	if d, n, ok := strings.Cut(key, keySep); ok {
		return d, n
	}
	return "", key
}

// keyLabel is how a key reads on screen: "billing/scope-1", or the name.
func keyLabel(key string) string {
	db, name := splitKey(key)
	if db == "" {
		return name
	}
	return db + "/" + name
}

// findScope returns the scope of s with key.
func findScope(s *collector.Snapshot, key string) (collector.Scope, bool) {
	db, name := splitKey(key)
	for i := range s.Scopes {
		if sc := &s.Scopes[i]; sc.Name == name && sc.Database == db {
			return *sc, true
		}
	}
	return collector.Scope{}, false
}

// findNode returns the node of s with key.
func findNode(s *collector.Snapshot, key string) (collector.Node, bool) {
	db, id := splitKey(key)
	for i := range s.Nodes {
		if n := &s.Nodes[i]; n.ID == id && n.Database == db {
			return *n, true
		}
	}
	return collector.Node{}, false
}

// fleetView is the dashboard's state about a fleet.
type fleetView struct {
	only     string              // the database the panes are narrowed to ("" = all)
	pick     int                 // the picker's cursor (overlayPicker): 0 = all, i = Databases[i-1]
	countsOf *collector.Snapshot // the snapshot counts was made for
	counts   []dbCount           // per database, in the snapshot's order
}

// dbCount is one database's scopes per verdict, worst first.
type dbCount struct {
	state    collector.DatabaseState
	verdicts []verdictCount
	worst    int // the worst verdict's rank
}

type verdictCount struct {
	v collector.Verdict
	n int
}

// isFleet reports whether the snapshot on screen is a fleet's.
func (m *Model) isFleet() bool { return m.snap != nil && len(m.snap.Databases) > 0 }

// dbState is the state of database db in the snapshot on screen.
func (m *Model) dbState(db string) (collector.DatabaseState, bool) {
	if m.snap == nil || db == "" {
		return collector.DatabaseState{}, false
	}
	for _, d := range m.snap.Databases {
		if d.Name == db {
			return d, true
		}
	}
	return collector.DatabaseState{}, false
}

// dbDown reports whether database db is in the snapshot and does not read
// now: its rows are last-known.
func (m *Model) dbDown(db string) bool {
	st, ok := m.dbState(db)
	return ok && !st.Up()
}

// inView reports whether rows of database db are shown (d narrows).
func (m *Model) inView(db string) bool { return m.fleet.only == "" || db == m.fleet.only }

// openPicker opens the database picker (k9s's namespaces): every database
// of the fleet with its verdicts, and "all", the cursor on what the panes
// show now.
func (m *Model) openPicker() {
	if !m.isFleet() {
		m.setStatus("one database: nothing to narrow to", toneNone)
		return
	}
	m.openOverlay(overlayPicker)
	m.fleet.pick = 1 + slices.IndexFunc(m.snap.Databases, func(d collector.DatabaseState) bool { return d.Name == m.fleet.only })
}

// showPicked narrows the panes to the database under the picker's cursor,
// or shows all.
func (m *Model) showPicked() {
	n := len(m.snap.Databases) + 1
	m.fleet.only = ""
	if m.fleet.pick > 0 && m.fleet.pick < n {
		m.fleet.only = m.snap.Databases[m.fleet.pick-1].Name // the footer says so
		m.status = ""
	} else {
		m.setStatus("all "+itoa(n-1)+" databases", toneNone)
	}
	m.invalidate()
}

// pickerBox renders the picker: "all", then every database with its
// verdicts (or UNREACHABLE and its age), the cursor's line marked.
func (m *Model) pickerBox(w int) string {
	entries := map[string]fleetEntry{}
	counts := m.dbCounts()
	for _, e := range m.fleetEntries() {
		entries[e.name] = e
	}
	lines := []string{m.look.title.Render("Show which database?"), ""}
	row := func(i int, text string, t tone) {
		mark := "  "
		if i == m.fleet.pick {
			mark = "▸ "
			lines = append(lines, m.look.cursor.Render(mark+text))
			return
		}
		lines = append(lines, mark+m.look.render(t, text))
	}
	row(0, "all "+itoa(len(counts))+" databases", toneNone)
	for i, c := range counts {
		e := entries[c.state.Name]
		row(i+1, e.full, e.tone)
	}
	lines = append(lines, "", m.look.key.Render(m.keys.Enter.Help().Key)+" show   "+m.look.key.Render(m.keys.Back.Help().Key)+" close")
	return m.look.modal.MaxWidth(w).Render(strings.Join(lines, "\n"))
}

// dbCounts counts each database's scopes per verdict, once per snapshot.
func (m *Model) dbCounts() []dbCount {
	if m.fleet.countsOf == m.snap {
		return m.fleet.counts
	}
	idx := make(map[string]int, len(m.snap.Databases))
	out := make([]dbCount, len(m.snap.Databases))
	for i, d := range m.snap.Databases {
		idx[d.Name] = i
		out[i] = dbCount{state: d, worst: collector.VerdictIdle.Rank() + 1}
	}
	for _, sc := range m.snap.Scopes {
		i, ok := idx[sc.Database]
		if !ok {
			continue
		}
		c := &out[i]
		j := slices.IndexFunc(c.verdicts, func(vc verdictCount) bool { return vc.v == sc.Verdict })
		if j < 0 {
			c.verdicts = append(c.verdicts, verdictCount{v: sc.Verdict})
			j = len(c.verdicts) - 1
		}
		c.verdicts[j].n++
		c.worst = min(c.worst, sc.Verdict.Rank())
	}
	for i := range out {
		slices.SortFunc(out[i].verdicts, func(a, b verdictCount) int {
			return cmpInts(a.v.Rank()-b.v.Rank(), strings.Compare(string(a.v), string(b.v)))
		})
	}
	m.fleet.countsOf, m.fleet.counts = m.snap, out
	return out
}

func cmpInts(d ...int) int {
	for _, x := range d {
		if x != 0 {
			return x
		}
	}
	return 0
}

// dbAge is how long database d has not been read, for the header: "14s",
// or "never read".
func (m *Model) dbAge(d collector.DatabaseState) string {
	if d.LastRead.IsZero() {
		return "never read"
	}
	return human.Cell(max(0, m.opts.Now().Sub(d.LastRead)))
}

// fleetEntry is one database in the header: its text in full ("billing 998
// ✔ · 2 ✖") and compact ("billing 2 ✖"; "" when nothing is wrong), and its
// tone.
type fleetEntry struct {
	name          string
	full, compact string
	tone          tone
	trouble       bool
	rank          int // order: unreachable first, then the worst verdict
}

func (m *Model) fleetEntries() []fleetEntry {
	counts := m.dbCounts()
	out := make([]fleetEntry, 0, len(counts))
	for _, c := range counts {
		name := termsafe.String(c.state.Name)
		e := fleetEntry{name: c.state.Name, rank: c.worst + 1}
		switch c.state.Status {
		case collector.DatabaseUp:
			var fine, bad []string // as one database's header: what needs nothing first
			for _, vc := range c.verdicts {
				part := itoa(vc.n) + " " + show.Glyph(vc.v)
				if vc.v.Troubled() {
					bad = append(bad, part)
				} else {
					fine = append(fine, part)
				}
			}
			all := append(fine, bad...)
			if len(all) == 0 {
				all = []string{"no scopes"}
			}
			e.full = name + " " + strings.Join(all, " · ")
			e.tone = toneOK
			if len(bad) > 0 {
				e.compact, e.trouble = name+" "+strings.Join(bad, " "), true
				e.tone = verdictTone(c.verdicts[0].v)
			}
		case collector.DatabaseConnecting:
			e.full, e.compact, e.tone, e.trouble = name+" connecting…", name+" connecting…", toneWarn, true
		default:
			e.full = name + " ✖ UNREACHABLE " + m.dbAge(c.state)
			e.compact, e.tone, e.trouble, e.rank = e.full, toneBad, true, 0
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b fleetEntry) int {
		if a.trouble != b.trouble {
			if a.trouble {
				return -1
			}
			return 1
		}
		return a.rank - b.rank
	})
	return out
}

// fleetVerdictLine is the header's verdict line over a fleet: every
// database with its verdict counts when they fit ("billing 998 ✔ · 2 ✖ │
// orders ✖ UNREACHABLE 14s │ reports 12 ✔"), databases in trouble first;
// otherwise only the databases in trouble, compact ("orders ✖ UNREACHABLE
// 14s │ billing 2 ✖"), as many as fit, then how many more are in trouble and
// how many are OK ("+1 in trouble │ 8 OK").
func (m *Model) fleetVerdictLine(w int) string {
	st := m.look
	sep := st.render(toneMuted, " │ ")
	entries := m.fleetEntries()
	var parts []string
	used := 0
	for _, e := range entries {
		n := textWidth(e.full)
		if used > 0 {
			n += 3
		}
		used += n
		parts = append(parts, st.render(e.tone, e.full))
	}
	if used <= w {
		return fitLine(strings.Join(parts, sep), w)
	}
	ok, trouble := 0, 0
	for _, e := range entries {
		if e.trouble {
			trouble++
		} else {
			ok++
		}
	}
	okText := ""
	if ok > 0 {
		okText = itoa(ok) + " OK"
	}
	parts, used = parts[:0], 0
	shown := 0
	for _, e := range entries[:trouble] {
		n := textWidth(e.compact) + 3*min(1, used)
		tail := ""
		if rest := trouble - shown - 1; rest > 0 {
			tail = "+" + itoa(rest) + " in trouble"
		}
		reserve := 0
		for _, t := range []string{tail, okText} {
			if t != "" {
				reserve += 3 + textWidth(t)
			}
		}
		if used+n+reserve > w && shown > 0 {
			break
		}
		parts = append(parts, st.render(e.tone, e.compact))
		used += n
		shown++
	}
	if rest := trouble - shown; rest > 0 {
		parts = append(parts, st.render(toneBad, "+"+itoa(rest)+" in trouble"))
	}
	if okText != "" {
		parts = append(parts, st.render(toneOK, okText))
	}
	return fitLine(strings.Join(parts, sep), w)
}

// fleetDatabaseLabel is the header's database while the panes are narrowed:
// "billing (1 of 3 databases)".
func (m *Model) fleetDatabaseLabel() string {
	return termsafe.String(m.fleet.only) + " (1 of " + itoa(len(m.snap.Databases)) + " databases)"
}

// databaseCell is a row's DATABASE cell: the name, "✖" before it while the
// database cannot be read (first: a narrow column cuts the name, not the
// mark).
func (m *Model) databaseCell(db string) cell {
	if m.dbDown(db) {
		return cell{text: "✖ " + db, tone: toneBad}
	}
	return cell{text: db}
}

// lastKnown greys a row of a database that cannot be read: every cell
// muted, the verdict (if any) marked as last-known ("? was OK"), its
// DATABASE cell "✖ orders".
func (m *Model) lastKnown(cells []cell, dbCol, verdictCol int, v collector.Verdict) {
	for i := range cells {
		cells[i].tone = toneMuted
	}
	if verdictCol >= 0 {
		cells[verdictCol].text = "? was " + string(v)
	}
	cells[dbCol] = m.databaseCell(cells[dbCol].text)
}

// ActionsByDatabase gives a fleet's dashboard its actions: it returns the
// Actions of database db (its collector's), or nil when there is none. An
// action on a scope goes to the Actions of the scope's database; set
// Options.Actions to it. Its own Actions methods refuse: a fleet's scopes
// all name their database.
type ActionsByDatabase func(db string) Actions

var errNoDatabase = errors.New("this dashboard's actions need the scope's database")

// Evict refuses (see ActionsByDatabase).
func (ActionsByDatabase) Evict(context.Context, string, string) error { return errNoDatabase }

// Resign refuses (see ActionsByDatabase).
func (ActionsByDatabase) Resign(context.Context, string, string) error { return errNoDatabase }

// Handover refuses (see ActionsByDatabase).
func (ActionsByDatabase) Handover(context.Context, string, string, string) error {
	return errNoDatabase
}

// actionsFor returns the Actions an action on the scope with key goes to,
// and the scope's name there.
func (m *Model) actionsFor(key string) (Actions, string, error) {
	db, name := splitKey(key)
	by, ok := m.opts.Actions.(ActionsByDatabase)
	if db == "" || !ok {
		return m.opts.Actions, name, nil
	}
	a := by(db)
	if a == nil {
		return nil, name, errors.New("no actions for database " + db)
	}
	return a, name, nil
}

// databaseText is a detail view's database line: its name and whether it
// reads ("billing · up", "orders · ✖ unreachable for 14s: … — last-known
// state").
func (m *Model) databaseText(st *styles, db string) string {
	d, ok := m.dbState(db)
	name := termsafe.String(db)
	switch {
	case !ok:
		return name
	case d.Up() && d.Database == "":
		return name + st.render(toneMuted, " · up")
	case d.Up():
		return name + st.render(toneMuted, " · up · "+termsafe.String(d.Database))
	case d.Status == collector.DatabaseConnecting:
		return name + st.render(toneWarn, " · connecting…")
	}
	age := "for " + m.dbAge(d)
	if d.LastRead.IsZero() {
		age = "(never read)"
	}
	return name + st.render(toneBad, " · ✖ unreachable "+age+": "+termsafe.String(d.Reason)+" — last-known state")
}

// knownUntil is how far the timeline knows the scope with key: its
// database's last read while the database cannot be read, else zero (now).
func (m *Model) knownUntil(key string) time.Time {
	db, _ := splitKey(key)
	if d, ok := m.dbState(db); ok && !d.Up() {
		if d.LastRead.IsZero() {
			return time.Unix(0, 1) // never read: nothing known
		}
		return d.LastRead
	}
	return time.Time{}
}
