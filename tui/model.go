package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// Poll interval bounds and steps for + and -.
const (
	minInterval = 100 * time.Millisecond
	maxInterval = 60 * time.Second
)

var intervalSteps = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
	15 * time.Second, 30 * time.Second, 60 * time.Second,
}

const (
	eventBuffer    = 256  // Feed.Subscribe buffer
	pausedEventCap = 5000 // events kept while paused; older ones are counted, not kept
	hbSamples      = 120  // heartbeat-age samples kept per scope for the sparkline
	actionTimeout  = 15 * time.Second
	// Local event kinds: operator actions and demo faults, shown in the log
	// beside the collector's events.
	eventAction collector.EventKind = "action"
	eventFault  collector.EventKind = "fault"
	eventNote   collector.EventKind = "note" // Options.Notes (the demo's failover times)
)

type pane int

const (
	paneScopes pane = iota
	paneNodes
	paneTerms
	paneEvents
	paneCount
)

func (p pane) String() string {
	return [...]string{"scopes", "nodes", "terms", "events"}[p]
}

// Messages.
type (
	snapshotMsg   struct{ snap *collector.Snapshot }
	eventsMsg     struct{ events []collector.Event }
	feedClosedMsg struct{}
	eventsEndMsg  struct{}
	tickMsg       struct{}
	noteMsg       struct{ text string }
	// localEventMsg carries the outcome of an action or a fault.
	localEventMsg struct {
		kind   collector.EventKind
		scope  string
		detail string
		err    error
	}
)

// actionKind is the operator action a confirmation asks about.
type actionKind int

const (
	actionEvict  actionKind = iota // x: terminate the leader's session (Actions.Evict)
	actionResign                   // R: a graceful resign through the database (Actions.Resign)
)

// verb names the action in messages ("evict", "resign").
func (k actionKind) verb() string {
	if k == actionResign {
		return "resign"
	}
	return "evict"
}

// gerund is the verb's -ing form ("evicting", "resigning").
func (k actionKind) gerund() string {
	if k == actionResign {
		return "resigning"
	}
	return "evicting"
}

// key is the key that asks for the action.
func (k actionKind) key() string {
	if k == actionResign {
		return "R"
	}
	return "x"
}

// confirmation is an open y/N question about an action on a scope's leader.
type confirmation struct {
	kind          actionKind
	scope, leader string
	pid           int
	epoch         int64
}

// Model is the dashboard, a tea.Model. Build it with [New]; [Run] runs it.
type Model struct {
	feed   Feed
	opts   Options
	keys   keyMap
	faults map[string]string // fault key → help
	look   *styles           // normal
	dimmed *styles           // the data may be stale

	ctx    context.Context // ends the feed readers and ticks when the dashboard stops
	cancel context.CancelFunc
	snapCh <-chan *collector.Snapshot
	evCh   <-chan collector.Event
	unsub  []func()

	width, height int

	snap          *collector.Snapshot // on screen
	pending       *collector.Snapshot // latest received while paused
	paused        bool
	pausedEvents  []collector.Event
	pausedDropped int
	feedClosed    bool
	interval      time.Duration

	focus     pane
	filter    string
	filtering bool // the filter line has the keyboard
	problems  bool

	scopeSort, nodeSort  sortState
	scopes, nodes, terms *table
	events               eventLog
	hb                   map[string]*ring

	// Per snapshot.
	termsByScope map[string][]collector.Term // oldest first
	nodeAlerts   map[string]int
	lastSeq      uint64
	rowsValid    bool
	verdicts     []int               // the header's scope order (verdictOrder)
	verdictsOf   *collector.Snapshot // the snapshot verdicts was sorted for

	helpOpen   bool
	helpQuery  string
	helpScroll int

	detail       string // scope shown in the detail view ("" = none)
	detailScroll int

	confirm *confirmation
	status  string
	statusT tone
}

// New builds the dashboard over feed. It reads feed.Snapshot() once, so a
// collector that has already polled is shown at once; Init subscribes.
func New(feed Feed, opts Options) *Model {
	opts = opts.withDefaults()
	m := &Model{
		feed:     feed,
		opts:     opts,
		keys:     newKeyMap(opts.Actions != nil),
		faults:   map[string]string{},
		look:     newStyles(opts.NoColor, false),
		dimmed:   newStyles(opts.NoColor, true),
		width:    80,
		height:   24,
		interval: feed.PollInterval(),
		hb:       map[string]*ring{},
		scopes:   newTable(scopeColumns, "no scopes"),
		nodes:    newTable(nodeColumns, "no nodes"),
		terms:    newTable(termColumns, "no terms"),
		events:   newEventLog(),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.scopeSort = sortState{col: 0}
	m.nodeSort = sortState{col: 0}
	if opts.Faults != nil {
		for _, fk := range opts.Faults.Keys() {
			if fk.Key == "" {
				continue
			}
			if m.keys.reserved(fk.Key) || m.faults[fk.Key] != "" {
				m.events.add(m.localEvent(eventFault, "", fmt.Sprintf("fault key %q (%s) ignored: the dashboard uses it", fk.Key, fk.Help), nil))
				continue
			}
			m.faults[fk.Key] = fk.Help
			m.keys.Faults = append(m.keys.Faults, key.NewBinding(key.WithKeys(fk.Key), key.WithHelp(fk.Key, fk.Help)))
		}
	}
	if s := feed.Snapshot(); s != nil {
		m.apply(s)
	}
	return m
}

// Init subscribes to the feed and starts the clock that ages "updated Ns ago".
func (m *Model) Init() tea.Cmd {
	if m.snapCh != nil || m.ctx.Err() != nil {
		return nil
	}
	snaps, stopSnaps := m.feed.Updates()
	evs, stopEvents := m.feed.Subscribe(eventBuffer)
	m.snapCh, m.evCh = snaps, evs
	m.unsub = append(m.unsub, stopSnaps, stopEvents)
	return tea.Batch(m.waitSnapshot(), m.waitEvents(), m.waitNote(), m.tick())
}

// waitNote delivers the next line of Options.Notes.
func (m *Model) waitNote() tea.Cmd {
	ctx, ch := m.ctx, m.opts.Notes
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case text, ok := <-ch:
			if !ok {
				return nil
			}
			return noteMsg{text}
		}
	}
}

// stop ends the subscriptions and every command still waiting on them. It is
// idempotent.
func (m *Model) stop() {
	m.cancel()
	for _, f := range m.unsub {
		if f != nil {
			f()
		}
	}
	m.unsub = nil
}

func (m *Model) waitSnapshot() tea.Cmd {
	ctx, ch := m.ctx, m.snapCh
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-ch:
			if !ok {
				return feedClosedMsg{}
			}
			for { // latest wins
				select {
				case s2, ok := <-ch:
					if !ok {
						return snapshotMsg{s} // the close is seen on the next wait
					}
					s = s2
				default:
					return snapshotMsg{s}
				}
			}
		}
	}
}

func (m *Model) waitEvents() tea.Cmd {
	ctx, ch := m.ctx, m.evCh
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return eventsEndMsg{}
			}
			batch := []collector.Event{e}
			for len(batch) < 512 {
				select {
				case e, ok := <-ch:
					if !ok {
						return eventsMsg{batch}
					}
					batch = append(batch, e)
				default:
					return eventsMsg{batch}
				}
			}
			return eventsMsg{batch}
		}
	}
}

// tick wakes the model every second so that ages keep counting; unlike
// tea.Tick it returns as soon as the dashboard stops.
func (m *Model) tick() tea.Cmd {
	ctx := m.ctx
	return func() tea.Msg {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return tickMsg{}
		}
	}
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case snapshotMsg:
		if msg.snap != nil {
			if m.paused {
				m.pending = msg.snap
			} else {
				m.apply(msg.snap)
			}
		}
		return m, m.waitSnapshot()
	case feedClosedMsg:
		m.feedClosed = true
		m.setStatus("collector stopped: showing the last data it read", toneWarn)
		return m, nil
	case eventsMsg:
		m.receiveEvents(msg.events)
		return m, m.waitEvents()
	case eventsEndMsg:
		return m, nil
	case tickMsg:
		return m, m.tick()
	case noteMsg:
		m.events.add(m.localEvent(eventNote, "", msg.text, nil))
		return m, m.waitNote()
	case localEventMsg:
		m.events.add(m.localEvent(msg.kind, msg.scope, msg.detail, msg.err))
		if msg.err != nil {
			m.setStatus(fmt.Sprintf("%s failed: %v", msg.kind, msg.err), toneBad)
		} else {
			m.setStatus(msg.detail, toneNone)
		}
		return m, nil
	case tea.PasteMsg:
		switch {
		case m.filtering:
			m.filter += msg.Content
			m.invalidate()
		case m.helpOpen:
			m.helpQuery += msg.Content
			m.helpScroll = 0
		}
		return m, nil
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	}
	return m, nil
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	k := msg.String()
	if k == "ctrl+c" {
		return m.quit()
	}
	if k == "alt+esc" {
		// Two quick escapes (or a multiplexer's) arrive as one key: honour both.
		esc := tea.KeyPressMsg{Code: tea.KeyEscape}
		return tea.Batch(m.handleKey(esc), m.handleKey(esc))
	}
	switch {
	case m.confirm != nil:
		return m.answerConfirm(msg)
	case m.filtering:
		m.editFilter(msg)
		return nil
	case m.helpOpen:
		m.helpKey(msg)
		return nil
	}
	if m.tooSmall() {
		if key.Matches(msg, m.keys.Quit) {
			return m.quit()
		}
		return nil
	}
	if _, ok := m.faults[k]; ok {
		return m.runFault(k)
	}

	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.quit()
	case key.Matches(msg, m.keys.Help):
		m.helpOpen, m.helpQuery, m.helpScroll = true, "", 0
	case key.Matches(msg, m.keys.Pause):
		m.togglePause()
	case key.Matches(msg, m.keys.Slower):
		m.stepInterval(+1)
	case key.Matches(msg, m.keys.Faster):
		m.stepInterval(-1)
	case key.Matches(msg, m.keys.Refresh):
		m.setStatus("refresh requested", toneNone)
		feed := m.feed
		return func() tea.Msg { feed.Refresh(); return nil }
	case k == actionEvict.key():
		return m.ask(actionEvict)
	case k == actionResign.key():
		return m.ask(actionResign)
	case m.detail != "":
		m.detailKey(msg)
	case key.Matches(msg, m.keys.Filter):
		m.filtering = true
	case key.Matches(msg, m.keys.Back):
		if m.filter != "" {
			m.filter = ""
			m.invalidate()
		}
	case key.Matches(msg, m.keys.Problems):
		m.problems = !m.problems
		m.invalidate()
	case key.Matches(msg, m.keys.NextPane):
		m.focus = (m.focus + 1) % paneCount
	case key.Matches(msg, m.keys.PrevPane):
		m.focus = (m.focus + paneCount - 1) % paneCount
	case key.Matches(msg, m.keys.Sort):
		m.cycleSort(false)
	case key.Matches(msg, m.keys.Reverse):
		m.cycleSort(true)
	case key.Matches(msg, m.keys.Enter):
		m.openDetail()
	default:
		m.navigate(msg)
	}
	return nil
}

func (m *Model) quit() tea.Cmd {
	m.stop()
	return tea.Quit
}

// navigate moves the focused pane's cursor, or scrolls the event log.
func (m *Model) navigate(msg tea.KeyPressMsg) {
	m.ensureRows()
	if m.focus == paneEvents {
		m.events.scroll(msg, m.keys)
		return
	}
	t := m.focusedTable()
	switch {
	case key.Matches(msg, m.keys.Up):
		t.move(-1)
	case key.Matches(msg, m.keys.Down):
		t.move(1)
	case key.Matches(msg, m.keys.PageUp):
		t.scrollPages(-1, m.pageSize())
	case key.Matches(msg, m.keys.PageDown):
		t.scrollPages(1, m.pageSize())
	case key.Matches(msg, m.keys.Top):
		t.setCursor(0)
	case key.Matches(msg, m.keys.Bottom):
		t.setCursor(len(t.rows) - 1)
	}
}

func (m *Model) focusedTable() *table {
	switch m.focus {
	case paneNodes:
		return m.nodes
	case paneTerms:
		return m.terms
	default:
		return m.scopes
	}
}

func (m *Model) pageSize() int { return max(1, m.height/3) }

func (m *Model) editFilter(msg tea.KeyPressMsg) {
	switch msg.String() {
	case "enter":
		m.filtering = false
	case "esc":
		m.filtering = false
		m.filter = ""
	case "backspace":
		if r := []rune(m.filter); len(r) > 0 {
			m.filter = string(r[:len(r)-1])
		}
	case "ctrl+u":
		m.filter = ""
	default:
		if msg.Text == "" {
			return
		}
		m.filter += msg.Text
	}
	m.invalidate()
}

func (m *Model) helpKey(msg tea.KeyPressMsg) {
	switch msg.String() {
	case "esc":
		if m.helpQuery != "" {
			m.helpQuery = ""
		} else {
			m.helpOpen = false
		}
	case "?":
		if m.helpQuery == "" {
			m.helpOpen = false
		} else {
			m.helpQuery += "?"
		}
	case "enter":
		m.helpOpen = false
	case "backspace":
		if r := []rune(m.helpQuery); len(r) > 0 {
			m.helpQuery = string(r[:len(r)-1])
		}
	case "up":
		m.helpScroll = max(0, m.helpScroll-1)
	case "down":
		m.helpScroll++
	case "pgup":
		m.helpScroll = max(0, m.helpScroll-m.pageSize())
	case "pgdown":
		m.helpScroll += m.pageSize()
	default:
		if msg.Text != "" {
			m.helpQuery += msg.Text
			m.helpScroll = 0
		}
	}
}

func (m *Model) detailKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Back), msg.String() == "backspace", key.Matches(msg, m.keys.Enter):
		m.detail, m.detailScroll = "", 0
	case key.Matches(msg, m.keys.Up):
		m.detailScroll = max(0, m.detailScroll-1)
	case key.Matches(msg, m.keys.Down):
		m.detailScroll++
	case key.Matches(msg, m.keys.PageUp):
		m.detailScroll = max(0, m.detailScroll-m.pageSize())
	case key.Matches(msg, m.keys.PageDown):
		m.detailScroll += m.pageSize()
	case key.Matches(msg, m.keys.Top):
		m.detailScroll = 0
	}
}

func (m *Model) openDetail() {
	m.ensureRows()
	var scope string
	switch m.focus {
	case paneScopes:
		scope = m.scopes.selected()
	case paneTerms:
		if i := m.terms.cursor; i < len(m.terms.rows) {
			scope = m.terms.rows[i].cells[1].text
		}
	case paneNodes:
		scope = m.scopes.selected()
	}
	if scope != "" {
		m.detail, m.detailScroll = scope, 0
	}
}

// selectedScope is the scope the actions and faults act on: the detail view's
// scope, else the scope under the scopes cursor.
func (m *Model) selectedScope() string {
	if m.detail != "" {
		return m.detail
	}
	m.ensureRows()
	return m.scopes.selected()
}

func (m *Model) togglePause() {
	m.paused = !m.paused
	if m.paused {
		m.setStatus("paused: snapshots are not applied, events are kept", toneWarn)
		return
	}
	if m.pending != nil {
		m.apply(m.pending)
		m.pending = nil
	}
	n := len(m.pausedEvents)
	m.events.add(m.pausedEvents...)
	m.pausedEvents = nil
	msg := fmt.Sprintf("resumed: %s appended", plural(n, "buffered event"))
	if m.pausedDropped > 0 {
		msg += fmt.Sprintf(", %d older ones dropped", m.pausedDropped)
	}
	m.pausedDropped = 0
	m.setStatus(msg, toneNone)
}

func (m *Model) receiveEvents(evs []collector.Event) {
	if !m.paused {
		m.events.add(evs...)
		return
	}
	m.pausedEvents = append(m.pausedEvents, evs...)
	if over := len(m.pausedEvents) - pausedEventCap; over > 0 {
		m.pausedDropped += over
		m.pausedEvents = append(m.pausedEvents[:0:0], m.pausedEvents[over:]...)
	}
}

// stepInterval moves the poll interval one step along intervalSteps.
func (m *Model) stepInterval(dir int) {
	cur := m.interval
	next := cur
	if dir > 0 {
		next = maxInterval
		for _, s := range intervalSteps {
			if s > cur {
				next = s
				break
			}
		}
	} else {
		next = minInterval
		for i := len(intervalSteps) - 1; i >= 0; i-- {
			if intervalSteps[i] < cur {
				next = intervalSteps[i]
				break
			}
		}
	}
	next = max(minInterval, min(maxInterval, next))
	if next == cur {
		m.setStatus(fmt.Sprintf("poll interval stays %s (bounds %s..%s)", fmtInterval(cur), fmtInterval(minInterval), fmtInterval(maxInterval)), toneWarn)
		return
	}
	m.interval = next
	m.feed.SetPollInterval(next)
	m.setStatus("poll interval "+fmtInterval(next), toneNone)
}

// ask opens the y/N question for an action on the selected scope's leader.
func (m *Model) ask(kind actionKind) tea.Cmd {
	if m.opts.Actions == nil {
		m.setStatus(fmt.Sprintf("read-only: start with --allow-actions to %s a leader", kind.verb()), toneWarn)
		return nil
	}
	scope := m.selectedScope()
	if scope == "" || m.snap == nil {
		m.setStatus("no scope selected", toneWarn)
		return nil
	}
	sc, ok := m.snap.Scope(scope)
	if !ok || sc.Leader == "" {
		m.setStatus(fmt.Sprintf("scope %s has no leader to %s", scope, kind.verb()), toneWarn)
		return nil
	}
	m.confirm = &confirmation{kind: kind, scope: scope, leader: sc.Leader, pid: sc.HolderPID, epoch: sc.Epoch}
	return nil
}

// answerConfirm runs the confirmed action on y (or Y); any other key cancels.
func (m *Model) answerConfirm(msg tea.KeyPressMsg) tea.Cmd {
	c := m.confirm
	m.confirm = nil
	if s := msg.String(); s != "y" && s != "Y" {
		m.setStatus(fmt.Sprintf("%s %s cancelled", c.kind.verb(), c.scope), toneNone)
		return nil
	}
	// Both actions act on whoever leads the scope when they run: refuse if that
	// is no longer the leader the operator agreed to act on.
	latest := m.snap
	if m.pending != nil {
		latest = m.pending
	}
	if sc, ok := latest.Scope(c.scope); !ok || sc.Leader != c.leader {
		now := "nobody"
		if ok && sc.Leader != "" {
			now = sc.Leader
		}
		m.setStatus(fmt.Sprintf("not %s: %s is now led by %s, not %s; press %s again",
			c.kind.gerund(), c.scope, now, c.leader, c.kind.key()), toneWarn)
		return nil
	}
	actions, ctx := m.opts.Actions, m.ctx
	if c.kind == actionResign {
		m.setStatus(fmt.Sprintf("asking %s to resign %s…", c.leader, c.scope), toneWarn)
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, actionTimeout)
			defer cancel()
			err := actions.Resign(ctx, c.scope, "operator resign from pgleader top")
			detail := fmt.Sprintf("asked %s, leader of %s (epoch %d), to resign: it hands over at its next heartbeat", c.leader, c.scope, c.epoch)
			if err != nil {
				detail = fmt.Sprintf("resign %s of %s", c.leader, c.scope)
			}
			return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
		}
	}
	m.setStatus(fmt.Sprintf("evicting %s of %s…", c.leader, c.scope), toneWarn)
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, actionTimeout)
		defer cancel()
		err := actions.Evict(ctx, c.scope, "operator eviction from pgleader top")
		detail := fmt.Sprintf("evicted %s, leader of %s (backend pid %d)", c.leader, c.scope, c.pid)
		if err != nil {
			detail = fmt.Sprintf("evict %s of %s", c.leader, c.scope)
		}
		return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
	}
}

func (m *Model) runFault(k string) tea.Cmd {
	scope := m.selectedScope()
	if scope == "" {
		m.setStatus("no scope selected for the fault", toneWarn)
		return nil
	}
	m.setStatus(fmt.Sprintf("%s on %s…", m.faults[k], scope), toneWarn)
	faults, ctx, help := m.opts.Faults, m.ctx, m.faults[k]
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, actionTimeout)
		defer cancel()
		out, err := faults.Do(ctx, k, scope)
		if out == "" {
			out = help
		}
		return localEventMsg{kind: eventFault, scope: scope, detail: out, err: err}
	}
}

func (m *Model) localEvent(kind collector.EventKind, scope, detail string, err error) collector.Event {
	e := collector.Event{At: m.opts.Now(), Kind: kind, Scope: scope, Detail: detail}
	if err != nil {
		e.Reason = "error: " + err.Error()
	}
	return e
}

// setStatus shows s in the status line. s often names a scope or a leader:
// it is made safe to print here, for every caller.
func (m *Model) setStatus(s string, t tone) { m.status, m.statusT = termsafe.String(s), t }

// apply puts a snapshot on screen.
func (m *Model) apply(s *collector.Snapshot) {
	m.snap = s
	if s.Seq != m.lastSeq || m.termsByScope == nil {
		m.lastSeq = s.Seq
		m.indexSnapshot(s)
	}
	m.invalidate()
}

// indexSnapshot derives what every render needs from a new snapshot.
func (m *Model) indexSnapshot(s *collector.Snapshot) {
	m.termsByScope = map[string][]collector.Term{}
	seen := map[string]map[int64]bool{}
	add := func(t collector.Term) {
		if seen[t.Scope] == nil {
			seen[t.Scope] = map[int64]bool{}
		}
		if seen[t.Scope][t.Epoch] {
			return
		}
		seen[t.Scope][t.Epoch] = true
		m.termsByScope[t.Scope] = append(m.termsByScope[t.Scope], t)
	}
	for i := len(s.Terms) - 1; i >= 0; i-- { // newest first → oldest first
		add(s.Terms[i])
	}
	for _, sc := range s.Scopes {
		if sc.OpenTerm != nil {
			add(*sc.OpenTerm)
		}
	}
	for _, ts := range m.termsByScope {
		sortTermsByStart(ts)
	}

	m.nodeAlerts = map[string]int{}
	for _, a := range s.Alerts {
		if a.Node != "" {
			m.nodeAlerts[a.Node]++
		}
	}

	live := map[string]bool{}
	for _, sc := range s.Scopes {
		live[sc.Name] = true
		r := m.hb[sc.Name]
		if r == nil {
			r = newRing(hbSamples)
			m.hb[sc.Name] = r
		}
		if sc.Leader != "" {
			r.push(sc.HeartbeatAge)
		} else {
			r.push(-1) // no holder: a gap in the sparkline
		}
	}
	for name := range m.hb {
		if !live[name] {
			delete(m.hb, name)
		}
	}
}

// invalidate marks the rows as needing a rebuild (filter, sort or data changed).
func (m *Model) invalidate() { m.rowsValid = false }

// stale reports whether the collector says the data may be out of date.
func (m *Model) stale() bool {
	return m.snap != nil && (m.snap.Health.Source == collector.SourceDisconnected || m.snap.Health.LastError != "")
}

func (m *Model) tooSmall() bool { return m.width < minWidth || m.height < minHeight }

func (m *Model) matchesFilter(fields ...string) bool {
	if m.filter == "" {
		return true
	}
	f := strings.ToLower(m.filter)
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}
