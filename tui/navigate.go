package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

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
	t.navigated()
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

// selectedScope is the scope the actions and faults act on: the detail view's
// scope, else the scope under the scopes cursor.
func (m *Model) selectedScope() string {
	if m.mode.view == viewScope {
		return m.mode.subject
	}
	m.ensureRows()
	return m.scopes.selected()
}

// invalidate marks the rows as needing a rebuild (filter, sort or data changed).
func (m *Model) invalidate() { m.rowsValid = false }

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
