package tui

import (
	"fmt"
	"math"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// view is what the body shows: the panes, or the detail of one row.
type view int

const (
	viewPanes view = iota // scopes, nodes, terms and the event log
	viewScope             // one scope's detail (Enter on a scope or a term)
	viewNode              // one node's detail (Enter on a node)
	viewEvent             // one event line whole (Enter on the event log)
)

// overlay is what has the keyboard over the view, if anything; there is at
// most one.
type overlay int

const (
	overlayNone    overlay = iota
	overlayFilter          // the filter line: keys type into the filter
	overlayHelp            // the help screen, replacing the body
	overlaySearch          // the help screen with its search line: keys type into the query
	overlayConfirm         // the y/N question of an action
	overlayPicker          // the database picker of a fleet
)

// mode is the dashboard's mode, a view and an overlay, with what each of
// them shows. openView, openEvent, closeView, openOverlay and closeOverlay
// switch it and reset what the mode left showed; the help and its search
// line share the query and the scroll, so going from one to the other
// (helpKey, searchKey) keeps both.
type mode struct {
	view    view
	subject string   // viewScope, viewNode: the key of the scope or node shown
	event   logEntry // viewEvent: the line shown
	scroll  int      // the detail view's first line (the render clamps it)

	overlay    overlay
	confirm    confirmation // overlayConfirm: the question asked
	query      string       // overlayHelp, overlaySearch: the help's search
	helpScroll int          // overlayHelp, overlaySearch: the help's first line
}

// openView shows the detail of subject (a scope's or a node's key) in v.
func (m *Model) openView(v view, subject string) {
	m.mode.view, m.mode.subject, m.mode.event, m.mode.scroll = v, subject, logEntry{}, 0
}

// openEvent shows the event line e whole.
func (m *Model) openEvent(e logEntry) {
	m.openView(viewEvent, "")
	m.mode.event = e
}

// closeView goes back to the panes.
func (m *Model) closeView() { m.openView(viewPanes, "") }

// openOverlay gives o the keyboard; the help opens unsearched, at its top.
func (m *Model) openOverlay(o overlay) {
	m.closeOverlay()
	m.mode.overlay = o
}

// closeOverlay gives the keyboard back to the view.
func (m *Model) closeOverlay() {
	m.mode.overlay, m.mode.confirm, m.mode.query, m.mode.helpScroll = overlayNone, confirmation{}, "", 0
}

// handleKey decides what a key means, for every mode: the overlay takes
// it first (the y/N question, the filter line, the help and its search,
// the picker), then the replay keys, the demo's fault keys and the keys
// that mean the same in every view, then the view's own (panesKey,
// detailKey). Every case goes through m.keys.
func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	// A quit key that types no text (ctrl+c) quits from anywhere, the filter
	// line and the help search included; q types there.
	if key.Matches(msg, m.keys.Quit) && msg.Text == "" {
		return m.quit()
	}
	if msg.Code == tea.KeyEscape && msg.Mod == tea.ModAlt {
		// Two quick escapes (or a multiplexer's) arrive as one key, alt+esc:
		// honour both. This is the terminal's escape byte, not a binding.
		esc := tea.KeyPressMsg{Code: tea.KeyEscape}
		return tea.Batch(m.handleKey(esc), m.handleKey(esc))
	}
	switch m.mode.overlay {
	case overlayConfirm:
		return m.confirmKey(msg)
	case overlayFilter:
		m.filterKey(msg)
		return nil
	case overlayHelp:
		m.helpKey(msg)
		return nil
	case overlaySearch:
		m.searchKey(msg)
		return nil
	case overlayPicker:
		return m.pickKey(msg)
	}
	if m.tooSmall() {
		if key.Matches(msg, m.keys.Quit) {
			return m.quit()
		}
		return nil
	}
	if cmd, done := m.replayKey(msg); done {
		return cmd
	}
	for _, f := range m.keys.Faults {
		if key.Matches(msg, f) {
			return m.runFault(f)
		}
	}
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.quit()
	case key.Matches(msg, m.keys.Help):
		m.openOverlay(overlayHelp)
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
	case key.Matches(msg, m.keys.Copy):
		return m.copyDSN()
	case key.Matches(msg, m.keys.Evict):
		return m.ask(actionEvict)
	case key.Matches(msg, m.keys.Resign):
		return m.ask(actionResign)
	case key.Matches(msg, m.keys.Handover):
		return m.ask(actionHandover)
	case m.mode.view == viewPanes:
		m.panesKey(msg)
	default:
		m.detailKey(msg)
	}
	return nil
}

// replayKey handles the replay keys, and while replaying refuses the keys
// that act on the live cluster or its feed: the faults, the actions, pause,
// refresh and the interval. done reports whether the key was handled.
func (m *Model) replayKey(msg tea.KeyPressMsg) (cmd tea.Cmd, done bool) {
	k := m.keys
	switch {
	case key.Matches(msg, k.ReplayPrev):
		return m.stepReplay(-1), true
	case key.Matches(msg, k.ReplayNext):
		return m.stepReplay(+1), true
	case key.Matches(msg, k.Live):
		if m.replay == nil {
			m.setStatus("already live", toneNone)
		} else {
			m.goLive()
		}
		return nil, true
	}
	if m.replay == nil {
		return nil, false
	}
	live := k.Live.Help().Key
	for _, f := range m.keys.Faults {
		if key.Matches(msg, f) {
			m.setStatus("replaying: fault keys act on the live cluster only ("+live+" goes live)", toneWarn)
			return nil, true
		}
	}
	switch {
	case key.Matches(msg, k.Evict), key.Matches(msg, k.Resign), key.Matches(msg, k.Handover):
		m.setStatus("replaying: no actions on a past moment ("+live+" goes live)", toneWarn)
		return nil, true
	case key.Matches(msg, k.Pause), key.Matches(msg, k.Refresh), key.Matches(msg, k.Slower), key.Matches(msg, k.Faster):
		m.setStatus("replaying: the collector's updates wait until live ("+live+")", toneWarn)
		return nil, true
	}
	return nil, false
}

// panesKey handles a key of the panes that no other mode took.
func (m *Model) panesKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Filter):
		m.openOverlay(overlayFilter)
	case key.Matches(msg, m.keys.Back):
		switch {
		case m.filter != "":
			m.filter = ""
			m.invalidate()
		case m.focus == paneEvents:
			m.events.followTail() // back to the newest line
		}
	case key.Matches(msg, m.keys.Problems):
		m.problems = !m.problems
		m.invalidate()
	case key.Matches(msg, m.keys.Database):
		m.openPicker()
	case key.Matches(msg, m.keys.NextPane):
		m.setFocus((m.focus + 1) % paneCount)
	case key.Matches(msg, m.keys.PrevPane):
		m.setFocus((m.focus + paneCount - 1) % paneCount)
	case key.Matches(msg, m.keys.Sort):
		m.cycleSort(false)
	case key.Matches(msg, m.keys.Reverse):
		m.cycleSort(true)
	case key.Matches(msg, m.keys.Enter):
		m.openDetail()
	default:
		m.navigate(msg)
	}
}

// detailKey handles a key of a detail view (scope, node or event) that no
// other mode took: Back, Erase or Enter again return to the panes; the
// movement keys scroll.
func (m *Model) detailKey(msg tea.KeyPressMsg) {
	if key.Matches(msg, m.keys.Back, m.keys.Erase, m.keys.Enter) {
		m.closeView()
		return
	}
	m.scroll(&m.mode.scroll, msg)
}

// confirmKey answers the y/N question: Confirm runs the action, any other
// key cancels it.
func (m *Model) confirmKey(msg tea.KeyPressMsg) tea.Cmd {
	c := m.mode.confirm
	m.closeOverlay()
	if !key.Matches(msg, m.keys.Confirm) {
		m.setStatus(fmt.Sprintf("%s %s cancelled", c.kind.verb(), keyLabel(c.scope)), toneNone)
		return nil
	}
	return m.runAction(c)
}

// filterKey handles a key while the filter line has the keyboard: Enter
// keeps the filter, Back clears it, other keys edit it.
func (m *Model) filterKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Enter):
		m.closeOverlay()
	case key.Matches(msg, m.keys.Back):
		m.closeOverlay()
		m.filter = ""
	case key.Matches(msg, m.keys.Erase):
		if r := []rune(m.filter); len(r) > 0 {
			m.filter = string(r[:len(r)-1])
		}
	case key.Matches(msg, m.keys.EraseAll):
		m.filter = ""
	default:
		if msg.Text == "" {
			return
		}
		m.filter += msg.Text
	}
	m.invalidate()
}

// helpKey handles a key on the help screen. It opens to be read: the
// movement keys (j and k too) scroll it, the filter key starts a search,
// Back clears the search, then closes the screen, as Help, Enter and Quit's
// letter do.
func (m *Model) helpKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Back):
		if m.mode.query != "" {
			m.mode.query = ""
		} else {
			m.closeOverlay()
		}
	case key.Matches(msg, m.keys.Help, m.keys.Enter, m.keys.Quit):
		m.closeOverlay()
	case key.Matches(msg, m.keys.Filter):
		m.mode.overlay = overlaySearch
	default:
		m.scroll(&m.mode.helpScroll, msg)
	}
}

// searchKey handles a key while the help's search line has the keyboard:
// text goes to it; Enter keeps it, Back clears it (either way the help
// stays open to be read).
func (m *Model) searchKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Back):
		m.mode.overlay, m.mode.query = overlayHelp, ""
	case key.Matches(msg, m.keys.Enter):
		m.mode.overlay = overlayHelp
	case key.Matches(msg, m.keys.Erase):
		if r := []rune(m.mode.query); len(r) > 0 {
			m.mode.query = string(r[:len(r)-1])
		}
	case key.Matches(msg, m.keys.EraseAll):
		m.mode.query = ""
	// The letters among the movement keys (j, k) type here; the arrows
	// scroll.
	case msg.Text == "" && key.Matches(msg, m.keys.Up, m.keys.Down, m.keys.PageUp, m.keys.PageDown):
		m.scroll(&m.mode.helpScroll, msg)
	default:
		if msg.Text != "" {
			m.mode.query += msg.Text
			m.mode.helpScroll = 0
		}
	}
}

// pickKey handles a key while the database picker is open: the movement
// keys move, Enter narrows the panes to the database under the cursor (or
// shows all), Back or the database key close it; ctrl+c quits, as anywhere.
func (m *Model) pickKey(msg tea.KeyPressMsg) tea.Cmd {
	n := len(m.snap.Databases) + 1
	switch {
	case key.Matches(msg, m.keys.Up):
		m.fleet.pick = max(0, m.fleet.pick-1)
	case key.Matches(msg, m.keys.Down):
		m.fleet.pick = min(n-1, m.fleet.pick+1)
	case key.Matches(msg, m.keys.Top, m.keys.PageUp):
		m.fleet.pick = 0
	case key.Matches(msg, m.keys.Bottom, m.keys.PageDown):
		m.fleet.pick = n - 1
	case key.Matches(msg, m.keys.Enter):
		m.closeOverlay()
		m.showPicked()
	case key.Matches(msg, m.keys.Back, m.keys.Database):
		m.closeOverlay()
	case key.Matches(msg, m.keys.Quit):
		return m.quit()
	}
	return nil
}

// scroll moves a scrolled screen's first line *off for a movement key; the
// render clamps it to the last page.
func (m *Model) scroll(off *int, msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Up):
		*off = max(0, *off-1)
	case key.Matches(msg, m.keys.Down):
		*off++
	case key.Matches(msg, m.keys.PageUp):
		*off = max(0, *off-m.pageSize())
	case key.Matches(msg, m.keys.PageDown):
		*off += m.pageSize()
	case key.Matches(msg, m.keys.Top):
		*off = 0
	case key.Matches(msg, m.keys.Bottom):
		*off = math.MaxInt32
	}
}

// paste types pasted text into the line that has the keyboard; on the help
// screen it starts a search. Elsewhere it means nothing.
func (m *Model) paste(s string) {
	switch m.mode.overlay {
	case overlayFilter:
		m.filter += s
		m.invalidate()
	case overlayHelp, overlaySearch:
		m.mode.overlay = overlaySearch
		m.mode.query += s
		m.mode.helpScroll = 0
	}
}

// footerKeys are the footer's keys: what the keys mean in the mode on
// screen now.
func (m *Model) footerKeys() []key.Binding {
	switch m.mode.overlay {
	case overlayFilter:
		return m.keys.filterHelp()
	case overlayPicker:
		return m.keys.pickerHelp()
	case overlaySearch:
		return m.keys.searchHelp()
	case overlayHelp:
		return m.keys.helpScreenHelp()
	}
	switch {
	case m.mode.view == viewEvent:
		return m.keys.eventDetailHelp()
	case m.replay != nil:
		return m.keys.replayKeysHelp(m.mode.view != viewPanes)
	case m.mode.view != viewPanes:
		return m.keys.detailHelp()
	}
	return m.keys.ShortHelp()
}
