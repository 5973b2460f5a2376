package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
)

// keyMap holds every binding; the help screen and the footer are built from
// it, so a key that is not here does not exist.
type keyMap struct {
	// navigation
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	NextPane, PrevPane                      key.Binding
	Enter, Back                             key.Binding
	// view
	Filter, Problems, Sort, Reverse, Help key.Binding
	// feed
	Pause, Slower, Faster, Refresh key.Binding
	// actions
	Evict, Resign key.Binding
	Quit          key.Binding

	// Faults are the demo's fault keys (empty outside the demo).
	Faults []key.Binding
}

func newKeyMap(actions bool) keyMap {
	k := keyMap{
		Up:       key.NewBinding(key.WithKeys("up"), key.WithHelp("↑", "move up / scroll")),
		Down:     key.NewBinding(key.WithKeys("down"), key.WithHelp("↓", "move down / scroll")),
		PageUp:   key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "first row")),
		Bottom:   key.NewBinding(key.WithKeys("end"), key.WithHelp("end", "last row / follow events")),
		NextPane: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next pane")),
		PrevPane: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous pane")),
		Enter:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "scope detail")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back / clear filter")),

		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter: scope/node substring")),
		Problems: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "problems only (toggle)")),
		Sort:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort by next column")),
		Reverse:  key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "reverse sort order")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help (type to search)")),

		Pause:   key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "pause / resume snapshots")),
		Slower:  key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "longer poll interval")),
		Faster:  key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "shorter poll interval")),
		Refresh: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh now")),

		Evict:  key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "evict: terminate leader's session")),
		Resign: key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "resign the leader gracefully")),
		Quit:   key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
	k.Evict.SetEnabled(actions)
	k.Resign.SetEnabled(actions)
	return k
}

// helpGroup is one titled group of the help screen.
type helpGroup struct {
	title    string
	bindings []key.Binding
}

func (k keyMap) groups() []helpGroup {
	g := []helpGroup{
		{"navigate", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPane, k.PrevPane, k.Enter, k.Back}},
		{"view", []key.Binding{k.Filter, k.Problems, k.Sort, k.Reverse, k.Help, k.Quit}},
		{"updates", []key.Binding{k.Pause, k.Slower, k.Faster, k.Refresh}},
	}
	if k.Evict.Enabled() {
		g = append(g, helpGroup{"actions (asks y/N)", []key.Binding{k.Resign, k.Evict}})
	}
	if len(k.Faults) > 0 {
		g = append(g, helpGroup{"demo faults (selected scope)", k.Faults})
	}
	return g
}

// ShortHelp is the footer line (help.KeyMap).
func (k keyMap) ShortHelp() []key.Binding {
	short := []key.Binding{
		key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "pane")),
		key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "problems")),
		key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "pause")),
	}
	if k.Evict.Enabled() {
		short = append(short,
			key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "resign")),
			key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "evict")))
	}
	short = append(short, k.Faults...)
	short = append(short,
		key.NewBinding(key.WithKeys("s"), key.WithHelp("s/S", "sort")),
		key.NewBinding(key.WithKeys("+"), key.WithHelp("+/-", "interval")),
		key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
	)
	return short
}

// FullHelp is every group as a column (help.KeyMap).
func (k keyMap) FullHelp() [][]key.Binding {
	var out [][]key.Binding
	for _, g := range k.groups() {
		out = append(out, g.bindings)
	}
	return out
}

// reserved reports whether a key string is bound by the dashboard itself.
func (k keyMap) reserved(s string) bool {
	all := []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPane, k.PrevPane,
		k.Enter, k.Back, k.Filter, k.Problems, k.Sort, k.Reverse, k.Help, k.Pause, k.Slower, k.Faster,
		k.Refresh, k.Quit,
		key.NewBinding(key.WithKeys("x", "R", "y", "n", "Y", "N"))} // x and R even when read-only; y/n answer prompts
	for _, b := range all {
		for _, ks := range b.Keys() {
			if ks == s {
				return true
			}
		}
	}
	return false
}

// matchHelp reports whether a binding matches a help search query.
func matchHelp(b key.Binding, group, query string) bool {
	if query == "" {
		return true
	}
	q := strings.ToLower(query)
	h := b.Help()
	return strings.Contains(strings.ToLower(h.Key), q) ||
		strings.Contains(strings.ToLower(h.Desc), q) ||
		strings.Contains(strings.ToLower(group), q)
}
