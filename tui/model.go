package tui

import (
	"context"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// pane is one of the body's panes, in tab order.
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

// Model is the dashboard, a tea.Model. Build it with [New]; [Run] runs it.
type Model struct {
	feed   Feed
	opts   Options
	keys   keyMap
	look   *styles // normal
	dimmed *styles // the data may be stale

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

	mode     mode // the view and the overlay that has the keyboard (mode.go)
	focus    pane
	filter   string
	problems bool

	scopeSort, nodeSort  sortState
	scopes, nodes, terms *table
	events               eventLog
	hb                   map[string]*ring

	// Per snapshot.
	termsByScope map[string][]collector.Term // oldest first
	marks        holderMarks                 // each holder's glyph in the timeline
	nodeAlerts   map[string]int
	// unknownCandidates: per scope key, the candidates other than the leader
	// whose state a replay cannot tell (collector.NodeUnknown).
	unknownCandidates map[string][]string
	lastSeq           uint64
	rowsValid         bool
	verdicts          []int               // the header's scope order (verdictOrder)
	verdictsOf        *collector.Snapshot // the snapshot verdicts was sorted for

	status  string
	statusT tone

	fleet  fleetView    // several databases (fleet.go)
	replay *replayState // replay mode (replay.go); nil: live
}

// New builds the dashboard over feed. It reads feed.Snapshot() once, so a
// collector that has already polled is shown at once; Init subscribes.
func New(feed Feed, opts Options) *Model {
	opts = opts.withDefaults()
	m := &Model{
		feed:     feed,
		opts:     opts,
		keys:     newKeyMap(opts.Actions != nil),
		width:    80,
		height:   24,
		interval: feed.PollInterval(),
		hb:       map[string]*ring{},
		scopes:   newTable(scopeColumns, "no scopes"),
		nodes:    newTable(nodeColumns, "no nodes"),
		terms:    newFollowingTable(termColumns, "no terms"),
		events:   newEventLog(),
	}
	m.keys.Copy.SetEnabled(opts.DSN != "")
	m.setPalette(paletteFor(opts.Theme, opts.NoColor))
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.scopeSort = sortState{col: 0}
	m.nodeSort = sortState{col: 0}
	if opts.Faults != nil {
		for _, fk := range opts.Faults.Keys() {
			if fk.Key == "" {
				continue
			}
			if m.keys.bound(fk.Key) {
				m.events.add(m.localEvent(eventFault, "", fmt.Sprintf("fault key %q (%s) ignored: the dashboard uses it", fk.Key, fk.Help), nil))
				continue
			}
			m.keys.Faults = append(m.keys.Faults, bind(fk.Help, fk.Key))
		}
	}
	if s := feed.Snapshot(); s != nil {
		m.apply(s)
	}
	if opts.ReplayFrom != nil {
		m.enterReplay(opts.ReplayFrom, opts.ReplayAt)
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
	cmds := []tea.Cmd{m.waitSnapshot(), m.waitEvents(), m.waitNote(), m.tick()}
	if m.opts.Theme == ThemeAuto && !m.opts.NoColor {
		cmds = append(cmds, tea.RequestBackgroundColor) // answered by a BackgroundColorMsg
	}
	return tea.Batch(cmds...)
}

// setPalette builds the normal and the dimmed look in palette p.
func (m *Model) setPalette(p *palette) {
	m.look = newStyles(p, false)
	m.dimmed = newStyles(p, true)
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

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case tea.BackgroundColorMsg:
		if m.opts.Theme == ThemeAuto && !m.opts.NoColor {
			theme := ThemeLight
			if msg.IsDark() {
				theme = ThemeDark
			}
			m.setPalette(paletteFor(theme, false))
		}
		return m, nil
	case snapshotMsg:
		if msg.snap != nil {
			if m.paused || m.replay != nil {
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
	case replayMsg:
		m.receiveReplay(msg)
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
		m.paste(msg.Content)
		return m, nil
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	}
	return m, nil
}

// setFocus gives pane p the focus. The event log, left, follows its tail
// again: unfocused it shows no cursor, and no key of another pane could
// bring it back to the newest line.
func (m *Model) setFocus(p pane) {
	if m.focus == paneEvents && p != paneEvents {
		m.events.followTail()
	}
	m.focus = p
}

// copyDSN puts Options.DSN on the terminal's clipboard with OSC 52; a
// terminal without OSC 52 ignores it, so the status says which was sent.
func (m *Model) copyDSN() tea.Cmd {
	if m.opts.DSN == "" {
		return nil
	}
	m.setStatus("sent the DSN to the clipboard (OSC 52; a terminal without it ignores it)", toneNone)
	return tea.SetClipboard(m.opts.DSN)
}

func (m *Model) quit() tea.Cmd {
	m.stop()
	return tea.Quit
}

const (
	// Local event kinds: operator actions and demo faults, shown in the log
	// beside the collector's events.
	eventAction collector.EventKind = "action"
	eventFault  collector.EventKind = "fault"
	eventNote   collector.EventKind = "note" // Options.Notes (the demo's failover times)
)

// localEventMsg carries the outcome of an action or a fault.
type localEventMsg struct {
	kind   collector.EventKind
	scope  string
	detail string
	err    error
}

// localEvent is an event of the dashboard's own for the log.
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

func (m *Model) tooSmall() bool { return m.width < minWidth || m.height < minHeight }
