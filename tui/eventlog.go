package tui

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

const eventLogCap = 1000

// logEntry is one event and its rendered line (rendered once, on arrival).
type logEntry struct {
	id    uint64 // the log's own count: the cursor follows an entry by it
	ev    collector.Event
	line  string
	lower string // line in lower case, for the filter
	tone  tone
	// members are the events of a flood shown as this one line (grouped),
	// in arrival order, and summary says what they are without naming every
	// scope; nil and "" for a single event.
	members []collector.Event
	summary string
}

// eventLog is the scrollable event log: newest at the bottom. Its cursor
// (shown while the pane has the focus) selects the line Enter opens; it
// follows the tail — the newest line — unless the operator moved it up.
type eventLog struct {
	entries []logEntry
	shown   []int // indexes of entries passing the filter
	filter  string
	db      string // a fleet's database the log is narrowed to ("" = all)
	nextID  uint64
	// cursor indexes shown; cursorID is its entry's id, so that a reorder, a
	// trim or a filter change keeps it on its event. offset is the first
	// line on screen, height the lines the last render showed (a page).
	cursor, offset, height int
	cursorID               uint64
	follow                 bool
	empty                  string // what the log says when no line shows ("" : no events yet)
}

// maxReorder bounds how far back an event that arrives late is put in its
// place: further back than that, it is appended.
const maxReorder = 512

func newEventLog() eventLog {
	return eventLog{follow: true}
}

// add puts events in the log in time order (events of different sources —
// the audit table, the snapshot's checks, the demo's faults — arrive out of
// order by milliseconds). Only the new entries are matched against the filter;
// the log is trimmed back to eventLogCap once it is a quarter over, so a burst
// costs O(burst), not O(burst × log); an entry that lands before others costs
// a re-index.
func (l *eventLog) add(evs ...collector.Event) {
	reorder := false
	for _, entry := range grouped(evs) {
		if l.joinFlood(entry) {
			reorder = true // a line changed: match the filter again
			continue
		}
		l.nextID++
		entry.id = l.nextID
		e := entry.ev
		i := len(l.entries)
		for i > 0 && len(l.entries)-i < maxReorder && l.entries[i-1].ev.At.After(e.At) {
			i--
		}
		if i < len(l.entries) {
			l.entries = slices.Insert(l.entries, i, entry)
			reorder = true
			continue
		}
		l.entries = append(l.entries, entry)
		if !reorder && l.matches(len(l.entries)-1) {
			l.shown = append(l.shown, len(l.entries)-1)
		}
	}
	if reorder {
		l.reindex()
	}
	if len(l.entries) > eventLogCap+eventLogCap/4 {
		drop := len(l.entries) - eventLogCap
		l.entries = append(l.entries[:0], l.entries[drop:]...)
		l.reindex()
	}
	l.settle()
}

// floodGap is how far apart the events of one flood may arrive. A flood comes
// in several deliveries: a claim batch (up to 250 scopes, two events each) is
// more than the collector's channel holds at once, and a failover of more
// scopes is several batches, milliseconds apart.
const floodGap = time.Second

// joinFlood puts a groupable entry (one event, or a flood of one delivery) on
// the line of the flood it continues: the recent line of the same kind and
// node, within floodGap, none of whose scopes it repeats. Lines of single
// events that, with it, make groupMin become one line at the first one's
// place. It reports whether entry was taken in; the line then counts every
// event of the flood.
func (l *eventLog) joinFlood(entry logEntry) bool {
	if !groupable[entry.ev.Kind] {
		return false
	}
	add := entry.members
	if add == nil {
		add = []collector.Event{entry.ev}
	}
	scopes := make(map[string]bool, len(add))
	for _, e := range add {
		scopes[e.Scope] = true
	}
	near := func(at time.Time) bool {
		d := add[0].At.Sub(at)
		return d < floodGap && d > -floodGap
	}
	// Scan back for the flood's line, or its single lines.
	group, singles := -1, []int(nil)
	for i := len(l.entries) - 1; i >= 0 && len(l.entries)-i <= maxReorder; i-- {
		t := l.entries[i]
		if t.ev.Kind != entry.ev.Kind || t.ev.Node != entry.ev.Node || t.ev.Database != entry.ev.Database {
			continue
		}
		ms := t.members
		if ms == nil {
			ms = []collector.Event{t.ev}
		}
		if !near(ms[len(ms)-1].At) || slices.ContainsFunc(ms, func(e collector.Event) bool { return scopes[e.Scope] }) {
			break // another flood, or the same scope again: not this one
		}
		for _, e := range ms {
			scopes[e.Scope] = true
		}
		if t.members != nil {
			group = i
			break
		}
		singles = append(singles, i) // newest first
	}
	if group < 0 && (len(singles) == 0 || len(singles)+len(add) < groupMin) {
		return false
	}
	at := group
	if at < 0 {
		at = singles[len(singles)-1]
	}
	var members []collector.Event
	if group >= 0 {
		members = append(members, l.entries[group].members...)
	}
	for _, i := range slices.Backward(singles) {
		members = append(members, l.entries[i].ev)
	}
	members = append(members, add...)
	line, summary, t := groupLine(members)
	l.entries[at] = logEntry{id: l.entries[at].id, ev: members[0], line: line, lower: strings.ToLower(line), tone: t,
		members: members, summary: summary}
	for _, i := range singles { // newest first: the indexes below stay valid
		if i != at {
			l.entries = slices.Delete(l.entries, i, i+1)
		}
	}
	return true
}

// setFilter shows the lines that contain f, of database db ("": all; a
// line of no database, the dashboard's own, shows either way).
func (l *eventLog) setFilter(f, db string) {
	if f == l.filter && db == l.db {
		return
	}
	l.filter, l.db = f, db
	l.reindex()
	l.settle()
}

func (l *eventLog) matches(i int) bool {
	if d := l.entries[i].ev.Database; l.db != "" && d != "" && d != l.db {
		return false
	}
	if l.filter == "" {
		return true
	}
	// The whole line: its scope, nodes, kind, reason and detail ("crashed",
	// "fence", "node-2").
	return strings.Contains(l.entries[i].lower, strings.ToLower(l.filter))
}

func (l *eventLog) reindex() {
	l.shown = l.shown[:0]
	for i := range l.entries {
		if l.matches(i) {
			l.shown = append(l.shown, i)
		}
	}
}

// settle puts the cursor back on its entry after the lines changed: on the
// newest while following, else on the entry it was on (or, when that one
// was trimmed or filtered out, at the same place).
func (l *eventLog) settle() {
	n := len(l.shown)
	switch {
	case n == 0:
		l.cursor = 0
	case l.follow:
		l.cursor = n - 1
	case l.cursor < n && l.entries[l.shown[l.cursor]].id == l.cursorID:
	default:
		for i, idx := range l.shown {
			if l.entries[idx].id == l.cursorID {
				l.cursor = i
				break
			}
		}
		l.cursor = max(0, min(l.cursor, n-1))
	}
	if n > 0 {
		l.cursorID = l.entries[l.shown[l.cursor]].id
	}
}

// selected returns the entry under the cursor.
func (l *eventLog) selected() (logEntry, bool) {
	l.settle()
	if len(l.shown) == 0 {
		return logEntry{}, false
	}
	return l.entries[l.shown[l.cursor]], true
}

// scroll moves the cursor; it follows the tail again on the newest line.
func (l *eventLog) scroll(msg tea.KeyPressMsg, k keyMap) {
	l.settle()
	page := max(1, l.height)
	switch {
	case key.Matches(msg, k.Up):
		l.cursor--
	case key.Matches(msg, k.Down):
		l.cursor++
	case key.Matches(msg, k.PageUp):
		l.cursor -= page
		l.offset -= page
	case key.Matches(msg, k.PageDown):
		l.cursor += page
		l.offset += page
	case key.Matches(msg, k.Top):
		l.cursor = 0
	case key.Matches(msg, k.Bottom):
		l.cursor = len(l.shown) - 1
	}
	l.cursor = max(0, min(l.cursor, len(l.shown)-1))
	l.follow = l.cursor >= len(l.shown)-1
	if len(l.shown) > 0 {
		l.cursorID = l.entries[l.shown[l.cursor]].id
	}
}

// followTail puts the cursor back on the newest line, following it.
func (l *eventLog) followTail() {
	l.follow = true
	l.settle()
}

// render returns height lines of the log, width wide: the window that holds
// the cursor, the cursor's line marked while focused.
func (l *eventLog) render(st *styles, width, height int, focused bool) []string {
	if height <= 0 {
		return nil
	}
	l.settle()
	l.height = height
	if len(l.shown) == 0 {
		empty := l.empty
		if empty == "" {
			empty = "no events yet"
		}
		out := []string{st.render(toneMuted, fitLine("  "+termsafe.String(empty), width))}
		for len(out) < height {
			out = append(out, strings.Repeat(" ", width))
		}
		return out
	}
	if l.follow {
		l.offset = len(l.shown) - height
	}
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+height {
		l.offset = l.cursor - height + 1
	}
	l.offset = max(0, min(l.offset, len(l.shown)-height))
	out := make([]string, 0, height)
	for i := l.offset; i < len(l.shown) && len(out) < height; i++ {
		e := l.entries[l.shown[i]]
		line := e.line
		if i == l.cursor && focused {
			// Every line starts with two blanks (linePrefix): the marker
			// takes them, as a table's cursor row.
			line = "▸ " + strings.TrimPrefix(line, "  ")
			out = append(out, st.cursorTones[e.tone].Render(fitLine(line, width))) // the bar in the line's tone
			continue
		}
		out = append(out, st.render(e.tone, fitLine(line, width))) // a cut line ends in an ellipsis
	}
	for len(out) < height {
		out = append(out, "")
	}
	return out
}

// hint is the events pane's title hint: how many, and whether it follows.
func (l *eventLog) hint(k keyMap) string {
	if len(l.shown) == 0 {
		return ""
	}
	s := strconv.Itoa(len(l.shown))
	if l.follow {
		return s + " · following"
	}
	return s + " · scrolled (" + k.Bottom.Help().Key + " or " + k.Back.Help().Key + " follows)"
}

// eventLine renders one event as a log line and says what it means.
func eventLine(e collector.Event) (string, tone) {
	kind, what, whole, t := eventParts(e)
	var b strings.Builder
	b.WriteString(linePrefix(e.At, kind))
	b.WriteString(databasePrefix(e.Database))
	if what == "" {
		parts := make([]string, 0, 3)
		for _, s := range []string{e.Scope, e.Node} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		what = strings.Join(parts, " ")
	}
	b.WriteString(what)
	for _, s := range []string{e.Detail, e.Reason} {
		if s != "" && !whole {
			if what != "" {
				b.WriteString(": ")
			}
			b.WriteString(s)
			what = s
		}
	}
	if strings.HasPrefix(e.Reason, "error:") {
		t = toneBad
	}
	// Names, details and reasons come from the database and the nodes.
	return termsafe.String(b.String()), t
}

// linePrefix is the start of every log line: the time and the kind's label.
func linePrefix(at time.Time, kind string) string {
	return "  " + fmtStamp(at) + "  " + padRight(kind, 16) + " "
}

// databasePrefix names a fleet's database at the start of what a log line
// says ("billing │ "); "" for one database.
func databasePrefix(db string) string {
	if db == "" {
		return ""
	}
	return db + " │ "
}

// eventParts says an event in words: its kind's label, what happened (empty:
// its scope and node), whether that already says the detail and the reason,
// and its tone.
func eventParts(e collector.Event) (kind, what string, whole bool, t tone) {
	kind = string(e.Kind)
	t = toneNone
	switch e.Kind {
	case collector.EventElected:
		kind = "★ elected"
		what = e.Node + " leads " + e.Scope + " at epoch " + show.Epoch(e.Epoch)
		// The predecessor once: the audit row's detail ("after node-1 (epoch 1)")
		// names it with its epoch; without it, the holder the state remembers.
		switch {
		case strings.HasPrefix(e.Detail, "after "):
			what += " (" + e.Detail + ")"
			whole = true
		case e.PrevHolder != "":
			what += " (was " + e.PrevHolder + ")"
		}
	case collector.EventReleased:
		kind = "○ released"
		what = e.Node + " released " + e.Scope + " epoch " + show.Epoch(e.Epoch)
	case collector.EventTermClosed:
		kind = "✖ term closed"
		// One sentence: the term, how it ended, who closed it (the audit row's
		// detail says "closed by successor X", which the sentence already says).
		what = e.Scope + " epoch " + show.Epoch(e.Epoch) + " of " + e.Node + " ended"
		if e.Reason != "" {
			what += " (" + e.Reason + ")"
		}
		if succ, ok := strings.CutPrefix(e.Detail, "closed by successor "); ok {
			what += ", closed by its successor " + succ
		} else {
			what += ", closed by its successor"
			if e.Detail != "" {
				what += ": " + e.Detail
			}
		}
		whole = true
		t = toneWarn
	case collector.EventFenceRejected:
		kind = "‼ fence rejected"
		what = "database refused a write by " + e.Node + " on " + e.Scope + " at stale epoch " + show.Epoch(e.Epoch)
		t = toneBad
	case collector.EventAlertFiring:
		kind = "▲ alert"
		t = toneWarn
		if e.Alert != nil {
			if e.Alert.Severity == collector.SeverityCritical {
				kind, t = "‼ alert", toneBad
			}
			what = string(e.Alert.Kind) + ": " + e.Alert.Summary
		}
	case collector.EventAlertResolved:
		kind = "✔ resolved"
		t = toneOK
		if e.Alert != nil {
			what = string(e.Alert.Kind) + ": " + e.Alert.Summary
		}
	case collector.EventNodeJoined:
		kind = "+ node joined"
		what = e.Node
		t = toneMuted
	case collector.EventNodeLeft:
		kind = "- node left"
		what = e.Node
		t = toneWarn
	case collector.EventSourceChanged:
		kind = "◐ source"
		t = toneWarn
	case collector.EventFailover:
		kind = "⇄ db failover"
		t = toneBad
	case collector.EventHeartbeatLate:
		kind = "▲ heartbeat late"
		what = e.Scope + " leader " + e.Node
		t = toneWarn
	case collector.EventEvicted:
		kind = "⏏ evicted"
		what = e.Node + " evicted from " + e.Scope
		if e.Epoch != 0 {
			what += " at epoch " + show.Epoch(e.Epoch)
		}
		t = toneWarn
	case collector.EventResignRequested:
		kind = "↷ resign asked"
		what = e.Node + " asked to resign " + e.Scope
		if e.Epoch != 0 {
			what += " at epoch " + show.Epoch(e.Epoch)
		}
		t = toneWarn
	case collector.EventHandoverRequested:
		kind = "⇢ handover asked"
		what = e.Scope
		if e.Node != "" {
			what = e.Node + " asked to hand over " + e.Scope
		}
		t = toneWarn
	case collector.EventHandoverCancelled:
		kind = "⇠ handover off"
		what = e.Scope
		t = toneWarn
	case collector.EventScopeRetired:
		kind = "⌫ scope retired"
		what = e.Scope
		t = toneMuted
	case collector.EventScopeRevived:
		kind = "↺ scope revived"
		what = e.Scope + " by " + e.Node
		t = toneMuted
	case collector.EventChildExited:
		kind = "■ cmd exited"
		what = e.Scope + " command of " + e.Node + ": " + e.Detail
		t = toneMuted
		if e.Reason == "crashed" {
			kind, t = "✖ cmd crashed", toneBad
		}
	case collector.EventEvictFailed:
		kind = "✖ evict failed"
		what = e.Node + " on " + e.Scope
		t = toneBad
	case collector.EventDropped:
		kind = "‼ events lost"
		t = toneBad
	case eventAction:
		kind = "» action"
		t = toneWarn
	case eventFault:
		kind = "» fault"
		t = toneCrit
	case eventNote:
		kind = "» demo"
		t = toneWarn
	}
	return kind, what, whole, t
}

// groupMin is how many per-scope events of one kind and one node, arriving
// together, each for another scope, make a flood that the log shows as one
// line.
const groupMin = 5

// groupable are the per-scope events a node's failover brings by the hundred.
var groupable = map[collector.EventKind]bool{collector.EventElected: true, collector.EventTermClosed: true,
	collector.EventReleased: true, collector.EventHeartbeatLate: true}

// grouped turns evs into log entries: one per event, but a flood — groupMin
// or more groupable events of one kind and one node arriving together, each
// for another scope, as a node's failover brings one per scope — is one line
// at its first event's place, naming how many scopes and which. Events of
// one kind and node that repeat a scope (a backlog of one scope's history,
// delivered at once after a pause) are no flood: a line counting scopes would
// miscount them. The line's text holds every scope's name, so / finds a scope
// inside a group.
func grouped(evs []collector.Event) []logEntry {
	type key struct {
		kind     collector.EventKind
		node, db string
	}
	count := map[key]int{}
	scopes := map[key]map[string]bool{}
	for _, e := range evs {
		if groupable[e.Kind] {
			k := key{e.Kind, e.Node, e.Database}
			count[k]++
			if scopes[k] == nil {
				scopes[k] = map[string]bool{}
			}
			scopes[k][e.Scope] = true
		}
	}
	members := map[key][]collector.Event{}
	for _, e := range evs {
		if k := (key{e.Kind, e.Node, e.Database}); groupable[e.Kind] && count[k] >= groupMin && len(scopes[k]) == count[k] {
			members[k] = append(members[k], e)
		}
	}
	out := make([]logEntry, 0, len(evs))
	done := map[key]bool{}
	for _, e := range evs {
		k := key{e.Kind, e.Node, e.Database}
		if g := members[k]; len(g) > 0 {
			if !done[k] {
				done[k] = true
				line, summary, t := groupLine(g)
				out = append(out, logEntry{ev: g[0], line: line, lower: strings.ToLower(line), tone: t, members: g, summary: summary})
			}
			continue
		}
		line, t := eventLine(e)
		out = append(out, logEntry{ev: e, line: line, lower: strings.ToLower(line), tone: t})
	}
	return out
}

// groupLine is the one line of a flood: its first event's kind, the node, how
// many scopes and their names (a reason they all share is said once); and
// the same without the names.
func groupLine(g []collector.Event) (line, summary string, t tone) {
	first := g[0]
	kind, _, _, t := eventParts(first)
	head := linePrefix(first.At, kind) + databasePrefix(first.Database)
	names := make([]string, 0, len(g))
	seen := make(map[string]bool, len(g))
	reason := first.Reason
	for _, e := range g {
		if !seen[e.Scope] {
			seen[e.Scope] = true
			names = append(names, e.Scope)
		}
		if e.Reason != reason {
			reason = ""
		}
	}
	n := strconv.Itoa(len(names))
	var what string
	switch first.Kind {
	case collector.EventElected:
		what = first.Node + " leads " + n + " scopes"
	case collector.EventTermClosed:
		what = n + " terms of " + first.Node + " ended"
		if reason != "" {
			what += " (" + string(reason) + ")"
		}
		what += ", closed by their successors"
	case collector.EventReleased:
		what = first.Node + " released " + n + " scopes"
		if reason != "" {
			what += " (" + string(reason) + ")"
		}
	case collector.EventHeartbeatLate:
		what = "heartbeat late on " + n + " scopes led by " + first.Node
	default:
		what = first.Node + " on " + n + " scopes"
	}
	return termsafe.String(head + what + ": " + strings.Join(names, ", ")), termsafe.String(head + what), t
}

// ring keeps the last n samples of a duration; a negative sample is a gap.
type ring struct {
	buf  []time.Duration
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]time.Duration, n)} }

func (r *ring) push(v time.Duration) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// values returns the samples oldest first.
func (r *ring) values() []time.Duration {
	if !r.full {
		return append([]time.Duration(nil), r.buf[:r.next]...)
	}
	return append(append([]time.Duration(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
