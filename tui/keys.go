package tui

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
)

// keyMap holds every key the dashboard reacts to, each spelled once. Update
// dispatches on these bindings (key.Matches), the footer (ShortHelp) and the
// help screen (groups) list them, the in-place hints ("esc back", "[y/N]")
// name them through Help().Key, and a demo fault key may not reuse one
// (bound): rebinding a key here changes all of them together.
type keyMap struct {
	// navigation
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	NextPane, PrevPane                      key.Binding
	Enter, Back                             key.Binding
	// view
	Filter, Problems, Sort, Reverse, Help key.Binding
	// Database opens the picker that narrows the panes to one database of
	// a fleet, or all; the help and the footer list it only over a fleet.
	Database key.Binding
	// Copy puts Options.DSN on the clipboard; disabled without one.
	Copy key.Binding
	// typing in the filter line or the help search (other keys type text)
	Erase, EraseAll key.Binding
	// feed
	Pause, Slower, Faster, Refresh key.Binding
	// actions, and the answer to their y/N question (any key but Confirm
	// cancels; Decline is the key an operator reaches for, so it is reserved)
	Evict, Resign, Handover key.Binding
	Confirm, Decline        key.Binding
	// Quit: a quit key that types no text (ctrl+c) quits from anywhere, even
	// the filter line or the help search, where q types
	Quit key.Binding
	// actions lists the action keys in the help and the footer. Read-only,
	// the action keys stay bound: they say how to enable actions.
	actions bool
	// fleet lists the database key: the snapshot is of several databases.
	fleet bool

	// Faults are the demo's fault keys (empty outside the demo).
	Faults []key.Binding

	// replay: step to the previous / next transition, back to live
	// (replay.go; without Options.Replay they say so).
	ReplayPrev, ReplayNext, Live key.Binding
}

// newKeyMap is the dashboard's keys; actions lists the action keys.
func newKeyMap(actions bool) keyMap {
	return keyMap{
		Up:       bindAs("↑/k", "move up / scroll", "up", "k"),
		Down:     bindAs("↓/j", "move down / scroll", "down", "j"),
		PageUp:   bind("page up", "pgup"),
		PageDown: bind("page down", "pgdown"),
		Top:      bind("first row", "home"),
		Bottom:   bind("last row / follow events", "end"),
		NextPane: bind("next pane", "tab"),
		PrevPane: bind("previous pane", "shift+tab"),
		Enter:    bind("detail (scope, node, event)", "enter"),
		Back:     bind("back / clear filter", "esc"),

		Filter:   bind("filter: scope/node substring", "/"),
		Problems: bind("problems only (toggle)", "p"),
		Database: bind("show one database / all (fleet)", "d"),
		Sort:     bind("sort by next column", "s"),
		Reverse:  bind("reverse sort order", "S"),
		Help:     bind("help (/ searches it)", "?"),
		Copy:     bind("copy the DSN to the clipboard", "c"),

		Erase:    bind("erase a character", "backspace"),
		EraseAll: bind("empty the filter line", "ctrl+u"),

		Pause:   bind("pause / resume snapshots", "space"),
		Slower:  bind("longer poll interval", "+", "="),
		Faster:  bind("shorter poll interval", "-", "_"),
		Refresh: bind("refresh now", "r"),

		Evict:    bind("evict: terminate leader's session", "x"),
		Resign:   bind("resign the leader gracefully", "R"),
		Handover: bind("hand over to the best follower", "O"),
		Confirm:  bind("confirm the action", "y", "Y"),
		Decline:  bind("cancel (so does any other key)", "N", "n"),
		Quit:     bind("quit", "q", "ctrl+c"),
		actions:  actions,

		ReplayPrev: bind("previous transition (live: replay)", "["),
		ReplayNext: bind("next transition", "]"),
		Live:       bind("back to live", "L"),
	}
}

// keyLabels spells a few keys the way the help shows them.
var keyLabels = map[string]string{"up": "↑", "down": "↓", "pgdown": "pgdn"}

// bind is a binding to keys whose help shows the first of them, so that a
// key is written once.
func bind(desc string, keys ...string) key.Binding {
	label := keys[0]
	if l, ok := keyLabels[label]; ok {
		label = l
	}
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(label, desc))
}

// bindAs is a binding whose help shows label: for a key with a second
// spelling worth knowing (vi's j/k beside the arrows).
func bindAs(label, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(label, desc))
}

// brief is the footer's entry for bindings: their keys, their labels joined
// ("s/S"), and a shorter description.
func brief(desc string, bs ...key.Binding) key.Binding {
	var keys, labels []string
	for _, b := range bs {
		keys = append(keys, b.Keys()...)
		labels = append(labels, b.Help().Key)
	}
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(strings.Join(labels, "/"), desc))
}

// scrollHint is "↑↓ scroll", for a view's title: each key's first spelling.
func (k keyMap) scrollHint() string { return firstLabel(k.Up) + firstLabel(k.Down) + " scroll" }

// firstLabel is how the help writes a binding's first key ("↑" for up).
func firstLabel(b key.Binding) string {
	ks := b.Keys()
	if len(ks) == 0 {
		return b.Help().Key
	}
	if l, ok := keyLabels[ks[0]]; ok {
		return l
	}
	return ks[0]
}

// action is the binding that asks for kind.
func (k keyMap) action(kind actionKind) key.Binding {
	switch kind {
	case actionResign:
		return k.Resign
	case actionHandover:
		return k.Handover
	}
	return k.Evict
}

// all is every binding but the fault keys.
func (k keyMap) all() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPane, k.PrevPane,
		k.Enter, k.Back, k.Filter, k.Problems, k.Database, k.Sort, k.Reverse, k.Help, k.Copy, k.Erase, k.EraseAll,
		k.Pause, k.Slower, k.Faster, k.Refresh, k.Evict, k.Resign, k.Handover, k.Confirm, k.Decline, k.Quit,
		k.ReplayPrev, k.ReplayNext, k.Live}
}

// helpGroup is one titled group of the help screen.
type helpGroup struct {
	title    string
	bindings []key.Binding
}

func (k keyMap) groups() []helpGroup {
	g := []helpGroup{
		{"navigate", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPane, k.PrevPane, k.Enter, k.Back}},
		{"view", k.viewKeys()},
		{"typing (filter, help search)", []key.Binding{k.Erase, k.EraseAll}},
		{"updates", []key.Binding{k.Pause, k.Slower, k.Faster, k.Refresh}},
	}
	g = append(g, helpGroup{"replay (the past, rebuilt; no actions)", []key.Binding{k.ReplayPrev, k.ReplayNext, k.Live}})
	if k.actions {
		g = append(g, helpGroup{"actions (asks y/N)", []key.Binding{k.Resign, k.Evict, k.Handover, k.Confirm, k.Decline}})
	}
	if len(k.Faults) > 0 {
		g = append(g, helpGroup{"demo faults (selected scope)", k.Faults})
	}
	return g
}

// viewKeys are the help's view group; the database key only over a fleet.
func (k keyMap) viewKeys() []key.Binding {
	if k.fleet {
		return []key.Binding{k.Filter, k.Problems, k.Database, k.Sort, k.Reverse, k.Help, k.Copy, k.Quit}
	}
	return []key.Binding{k.Filter, k.Problems, k.Sort, k.Reverse, k.Help, k.Copy, k.Quit}
}

// ShortHelp is the footer line over the panes (help.KeyMap), the keys that
// matter most first: the footer shows as many as fit, in this order, none cut
// (fitHelp), and ? lists the rest. In the demo the faults come before the
// actions: breaking the cluster is what it is for.
func (k keyMap) ShortHelp() []key.Binding {
	short := []key.Binding{brief("help", k.Help), brief("quit", k.Quit)}
	short = append(short, k.faultsBrief()...)
	short = append(short, k.actionsBrief()...)
	if k.Copy.Enabled() {
		short = append(short, brief("copy DSN", k.Copy))
	}
	short = append(short,
		brief("pane", k.NextPane),
		brief("detail", k.Enter),
		brief("filter", k.Filter),
		brief("problems", k.Problems))
	if k.fleet {
		short = append(short, brief("database", k.Database))
	}
	return append(short,
		brief("pause", k.Pause),
		brief("sort", k.Sort, k.Reverse),
		brief("interval", k.Slower, k.Faster),
		brief("refresh", k.Refresh),
	)
}

// detailHelp is the footer in a detail view: how to leave and scroll it, and
// what still acts on the scope.
func (k keyMap) detailHelp() []key.Binding {
	short := []key.Binding{brief("back", k.Back), k.scrollBrief(true)}
	short = append(short, k.actionsBrief()...)
	short = append(short, k.faultsBrief()...)
	return append(short, brief("help", k.Help), brief("quit", k.Quit))
}

// eventDetailHelp is the footer in the event detail view: how to leave and
// scroll it (the actions act on the selected scope, not on the event: not
// offered here).
func (k keyMap) eventDetailHelp() []key.Binding {
	return []key.Binding{brief("back", k.Back), k.scrollBrief(true), brief("help", k.Help), brief("quit", k.Quit)}
}

// helpScreenHelp is the footer on the help screen: how to close, scroll and
// search it.
func (k keyMap) helpScreenHelp() []key.Binding {
	return []key.Binding{brief("close", k.Back), k.scrollBrief(true), brief("search", k.Filter), brief("page", k.PageUp, k.PageDown)}
}

// searchHelp is the footer while the help's search line has the keyboard,
// where letters type.
func (k keyMap) searchHelp() []key.Binding {
	return []key.Binding{brief("keep", k.Enter), brief("clear", k.Back), k.scrollBrief(false), brief("erase", k.Erase)}
}

// filterHelp is the footer while the filter line has the keyboard.
func (k keyMap) filterHelp() []key.Binding {
	return []key.Binding{brief("keep", k.Enter), brief("clear", k.Back), brief("erase", k.Erase), brief("empty", k.EraseAll)}
}

// actionsBrief is the actions' footer entries (none read-only).
func (k keyMap) actionsBrief() []key.Binding {
	if !k.actions {
		return nil
	}
	return []key.Binding{brief("resign", k.Resign), brief("evict", k.Evict), brief("handover", k.Handover)}
}

// faultsBrief is one footer entry for every fault key, "K/Z/H faults": their
// descriptions are the help screen's.
func (k keyMap) faultsBrief() []key.Binding {
	if len(k.Faults) == 0 {
		return nil
	}
	return []key.Binding{brief("faults", k.Faults...)}
}

// scrollBrief is "↑↓ scroll" for the footer; with letters, j and k too
// ("↑↓/kj scroll"), where they scroll rather than type.
func (k keyMap) scrollBrief(letters bool) key.Binding {
	var keys []string
	label := firstLabel(k.Up) + firstLabel(k.Down)
	for _, b := range []key.Binding{k.Up, k.Down} {
		keys = append(keys, b.Keys()[0])
	}
	if letters {
		var extra string
		for _, b := range []key.Binding{k.Up, k.Down} {
			for _, s := range b.Keys()[1:] {
				keys, extra = append(keys, s), extra+s
			}
		}
		if extra != "" {
			label += "/" + extra
		}
	}
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(label, "scroll"))
}

// FullHelp is every group as a column (help.KeyMap).
func (k keyMap) FullHelp() [][]key.Binding {
	var out [][]key.Binding
	for _, g := range k.groups() {
		out = append(out, g.bindings)
	}
	return out
}

// bound reports whether a key string is already bound: by the dashboard
// itself (the action keys and the y/N answers even when read-only) or by a
// fault key.
func (k keyMap) bound(s string) bool {
	for _, b := range append(k.all(), k.Faults...) {
		if slices.Contains(b.Keys(), s) {
			return true
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

// pickerHelp is the footer while the database picker is open.
func (k keyMap) pickerHelp() []key.Binding {
	return []key.Binding{k.scrollBrief(true), brief("show", k.Enter), brief("close", k.Back), brief("quit", k.Quit)}
}
