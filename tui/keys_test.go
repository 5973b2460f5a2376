package tui

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// namedKeys are the keys press knows by name, as tea spells them.
var namedKeys = map[string]rune{
	"enter": tea.KeyEnter, "esc": tea.KeyEscape, "tab": tea.KeyTab, "space": tea.KeySpace,
	"up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight,
	"pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown, "home": tea.KeyHome, "end": tea.KeyEnd,
	"backspace": tea.KeyBackspace, "delete": tea.KeyDelete, "insert": tea.KeyInsert,
	"f1": tea.KeyF1, "f2": tea.KeyF2, "f3": tea.KeyF3, "f4": tea.KeyF4, "f5": tea.KeyF5, "f6": tea.KeyF6,
	"f7": tea.KeyF7, "f8": tea.KeyF8, "f9": tea.KeyF9, "f10": tea.KeyF10, "f11": tea.KeyF11, "f12": tea.KeyF12,
}

// press builds the key message the terminal would send for s ("x", "R",
// "pgdown", "shift+tab", "ctrl+u"): its String() is s.
func press(s string) tea.KeyPressMsg {
	var mod tea.KeyMod
	name := s
mods:
	for {
		m, rest, ok := strings.Cut(name, "+")
		if !ok || rest == "" { // "+" itself
			break
		}
		switch m {
		case "ctrl":
			mod |= tea.ModCtrl
		case "alt":
			mod |= tea.ModAlt
		case "shift":
			mod |= tea.ModShift
		default:
			break mods
		}
		name = rest
	}
	if code, ok := namedKeys[name]; ok {
		k := tea.KeyPressMsg{Code: code, Mod: mod}
		if code == tea.KeySpace && mod == 0 {
			k.Text = " "
		}
		return k
	}
	r := []rune(name)[0]
	switch {
	case mod != 0: // a combo types nothing
		return tea.KeyPressMsg{Code: r, Mod: mod}
	case r >= 'A' && r <= 'Z':
		// As the terminal decoder reports a shifted letter: the unshifted code,
		// the shifted one, shift, and the text typed.
		return tea.KeyPressMsg{Code: unicode.ToLower(r), ShiftedCode: r, Mod: tea.ModShift, Text: s}
	}
	return tea.KeyPressMsg{Code: r, Text: s}
}

// hit presses b's first key.
func hit(m *Model, b key.Binding) tea.Cmd { return keys(m, b.Keys()[0]) }

// spare is a key no binding uses; the tests rebind keys to it.
const spare = "f5"

// TestKeysDefinedOnce rebinds each key in the key map and checks that
// dispatch, the help screen, the footer, the in-place hints and the fault-key
// reservation all follow: the key map is the one place a key is spelled.
func TestKeysDefinedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	type check = func(m *Model, b *bundle, cmd tea.Cmd) bool
	cursorAt := func(i int) check {
		return func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.scopes.cursor == i }
	}
	filtering := func(m *Model) { hit(m, m.keys.Filter); typed(m, "ab") }
	cases := []struct {
		name   string
		b      func(*keyMap) *key.Binding
		before func(m *Model) // puts the model where the key acts
		did    check          // nil: the key acts like any other (Decline)
		footer string         // its footer entry once rebound ("" = not in the footer)
		hint   func(m *Model) // shows the key in place, where the screen says want
		want   string
	}{
		{name: "Up", b: func(k *keyMap) *key.Binding { return &k.Up }, before: func(m *Model) { hit(m, m.keys.Down) }, did: cursorAt(0),
			hint: func(m *Model) { m.Update(tea.WindowSizeMsg{Width: 80, Height: 24}); hit(m, m.keys.Help) }, want: "f5↓ scroll"},
		{name: "Down", b: func(k *keyMap) *key.Binding { return &k.Down }, did: cursorAt(1)},
		{name: "PageUp", b: func(k *keyMap) *key.Binding { return &k.PageUp }, before: func(m *Model) { hit(m, m.keys.Bottom) }, did: cursorAt(0)},
		{name: "PageDown", b: func(k *keyMap) *key.Binding { return &k.PageDown }, did: cursorAt(1)},
		{name: "Top", b: func(k *keyMap) *key.Binding { return &k.Top }, before: func(m *Model) { hit(m, m.keys.Bottom) }, did: cursorAt(0)},
		{name: "Bottom", b: func(k *keyMap) *key.Binding { return &k.Bottom }, did: cursorAt(1),
			hint: func(m *Model) {
				for range 50 {
					m.events.add(sampleEvents()...)
				}
				hit(m, m.keys.PrevPane)
				screen(m) // the log scrolls by what it showed
				hit(m, m.keys.PageUp)
			}, want: "(f5 or esc follows)"},
		{name: "NextPane", b: func(k *keyMap) *key.Binding { return &k.NextPane }, footer: "f5 pane",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.focus == paneNodes }},
		{name: "PrevPane", b: func(k *keyMap) *key.Binding { return &k.PrevPane },
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.focus == paneEvents }},
		{name: "Enter", b: func(k *keyMap) *key.Binding { return &k.Enter }, footer: "f5 detail",
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return scopeDetail(m) == "billing" },
			hint: filtering, want: "f5 keeps"},
		{name: "Back", b: func(k *keyMap) *key.Binding { return &k.Back }, before: func(m *Model) { m.filter = "bill"; m.invalidate() },
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.filter == "" },
			hint: func(m *Model) { hit(m, m.keys.Enter) }, want: "f5 back"},
		{name: "Filter", b: func(k *keyMap) *key.Binding { return &k.Filter }, footer: "f5 filter",
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return filterOpen(m) },
			hint: filtering, want: "f5 filter: ab"},
		{name: "Problems", b: func(k *keyMap) *key.Binding { return &k.Problems }, footer: "f5 problems",
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.problems },
			hint: func(m *Model) { hit(m, m.keys.Problems) }, want: "problems only (f5)"},
		{name: "Database", b: func(k *keyMap) *key.Binding { return &k.Database }, footer: "f5 database",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool {
				return strings.Contains(m.status, "one database: nothing to narrow to")
			}},
		{name: "Sort", b: func(k *keyMap) *key.Binding { return &k.Sort }, footer: "f5/S sort",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.scopeSort.col == 1 }},
		{name: "Reverse", b: func(k *keyMap) *key.Binding { return &k.Reverse }, footer: "s/f5 sort",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.scopeSort.desc }},
		{name: "Help", b: func(k *keyMap) *key.Binding { return &k.Help }, footer: "f5 help",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return helpOpen(m) }},
		{name: "Copy", b: func(k *keyMap) *key.Binding { return &k.Copy }, footer: "f5 copy DSN",
			before: func(m *Model) { m.opts.DSN = "postgres://app@db/app" },
			did: func(m *Model, _ *bundle, cmd tea.Cmd) bool {
				return cmd != nil && strings.Contains(m.status, "sent the DSN to the clipboard")
			},
			hint: func(m *Model) { m.opts.DSN = "postgres://app@db/app" }, want: "f5 copies"},
		{name: "Erase", b: func(k *keyMap) *key.Binding { return &k.Erase }, before: filtering,
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.filter == "a" },
			hint: func(m *Model) { hit(m, m.keys.Help); hit(m, m.keys.Filter); typed(m, "zzz") }, want: "(f5 edits, esc clears)"},
		{name: "EraseAll", b: func(k *keyMap) *key.Binding { return &k.EraseAll }, before: filtering,
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.filter == "" && filterOpen(m) }},
		{name: "Pause", b: func(k *keyMap) *key.Binding { return &k.Pause }, footer: "f5 pause",
			did:  func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.paused },
			hint: func(m *Model) { hit(m, m.keys.Pause) }, want: "f5 resumes"},
		{name: "Slower", b: func(k *keyMap) *key.Binding { return &k.Slower }, footer: "f5/- interval",
			did: func(_ *Model, b *bundle, _ tea.Cmd) bool {
				return slices.Equal(b.feed.set, []time.Duration{2 * time.Second})
			}},
		{name: "Faster", b: func(k *keyMap) *key.Binding { return &k.Faster }, footer: "+/f5 interval",
			did: func(_ *Model, b *bundle, _ tea.Cmd) bool {
				return slices.Equal(b.feed.set, []time.Duration{500 * time.Millisecond})
			}},
		{name: "Refresh", b: func(k *keyMap) *key.Binding { return &k.Refresh }, footer: "f5 refresh",
			did: func(_ *Model, b *bundle, cmd tea.Cmd) bool {
				if cmd != nil {
					cmd()
				}
				b.feed.mu.Lock()
				defer b.feed.mu.Unlock()
				return b.feed.refreshes == 1
			}},
		{name: "Evict", b: func(k *keyMap) *key.Binding { return &k.Evict }, footer: "f5 evict",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool {
				return m.mode.overlay == overlayConfirm && m.mode.confirm.kind == actionEvict
			},
			hint: func(m *Model) {
				hit(m, m.keys.Evict)
				next := healthySnapshot()
				next.Seq = 101
				next.Scopes[0].Leader = "node-c"
				m.Update(snapshotMsg{next})
				hit(m, m.keys.Confirm)
			}, want: "press f5 again"},
		{name: "Resign", b: func(k *keyMap) *key.Binding { return &k.Resign }, footer: "f5 resign",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool {
				return m.mode.overlay == overlayConfirm && m.mode.confirm.kind == actionResign
			}},
		{name: "Handover", b: func(k *keyMap) *key.Binding { return &k.Handover }, footer: "f5 handover",
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool {
				return m.mode.overlay == overlayConfirm && m.mode.confirm.kind == actionHandover
			},
			hint: func(m *Model) {
				hit(m, m.keys.Handover)
				next := healthySnapshot()
				next.Seq = 101
				next.Scopes[0].Leader = "node-c"
				m.Update(snapshotMsg{next})
				hit(m, m.keys.Confirm)
			}, want: "not handing over: billing is now led by node-c, not node-a; press f5 again"},
		{name: "Confirm", b: func(k *keyMap) *key.Binding { return &k.Confirm }, before: func(m *Model) { hit(m, m.keys.Evict) },
			did: func(m *Model, b *bundle, cmd tea.Cmd) bool {
				if cmd != nil {
					m.Update(cmd())
				}
				return len(b.actions.calls) == 1
			},
			hint: func(m *Model) { hit(m, m.keys.Resign) }, want: "f5 resign    any other key cancel   [f5/N]"},
		{name: "Decline", b: func(k *keyMap) *key.Binding { return &k.Decline },
			hint: func(m *Model) { hit(m, m.keys.Resign) }, want: "[y/f5]"},
		{name: "ReplayPrev", b: func(k *keyMap) *key.Binding { return &k.ReplayPrev },
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool {
				return strings.Contains(m.status, "replay is not available")
			}},
		{name: "ReplayNext", b: func(k *keyMap) *key.Binding { return &k.ReplayNext },
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return strings.Contains(m.status, "nothing after now") }},
		{name: "Live", b: func(k *keyMap) *key.Binding { return &k.Live },
			did: func(m *Model, _ *bundle, _ tea.Cmd) bool { return m.status == "already live" }},
		{name: "Quit", b: func(k *keyMap) *key.Binding { return &k.Quit }, footer: "f5 quit",
			did: func(_ *Model, _ *bundle, cmd tea.Cmd) bool {
				if cmd == nil {
					return false
				}
				_, ok := cmd().(tea.QuitMsg)
				return ok
			},
			hint: func(m *Model) { m.Update(tea.WindowSizeMsg{Width: 59, Height: 30}) }, want: "or f5 to quit"},
	}

	// Every binding has its case.
	km := newKeyMap(true)
	var covered, all []string
	for _, c := range cases {
		covered = append(covered, c.b(&km).Help().Desc)
	}
	for _, b := range km.all() {
		all = append(all, b.Help().Desc)
	}
	slices.Sort(covered)
	slices.Sort(all)
	if !slices.Equal(covered, all) {
		t.Fatalf("cases cover %q, the key map has %q", covered, all)
	}

	// pressed is the keyState after pressing k in a mode with the default
	// keys. A mode is entered through the key map, so a rebound key map
	// reaches the same mode: the state is computed once.
	memo := map[[2]string]string{}
	pressed := func(t *testing.T, mode int, k string) string {
		id := [2]string{keyModes[mode].name, k}
		if _, ok := memo[id]; !ok {
			m := inMode(t, mode, nil)
			memo[id] = keyState(m, keys(m, k))
		}
		return memo[id]
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// rebound is a dashboard with c's binding on spare only.
			rebound := func() (*Model, *bundle, key.Binding) {
				m, b := setup(t, healthySnapshot())
				m.Update(tea.WindowSizeMsg{Width: 240, Height: 60})
				old := *c.b(&m.keys)
				*c.b(&m.keys) = bind(old.Help().Desc, spare)
				m.keys.fleet = c.name == "Database" // listed over a fleet only
				return m, b, old
			}
			m, _, old := rebound()
			for _, k := range old.Keys() {
				if m.keys.bound(k) {
					t.Errorf("%q still counts as bound", k)
				}
			}
			if !m.keys.bound(spare) {
				t.Errorf("%s does not count as bound: a fault key could take it", spare)
			}

			if c.did != nil {
				for _, k := range old.Keys() {
					m, b, _ := rebound()
					if c.before != nil {
						c.before(m)
					}
					if c.did(m, b, keys(m, k)) {
						t.Errorf("%q still acts as %s", k, c.name)
					}
				}
				m, b, _ := rebound()
				if c.before != nil {
					c.before(m)
				}
				if !c.did(m, b, keys(m, spare)) {
					t.Errorf("%s does not act as %s", spare, c.name)
				}
			}

			// In every mode, a new key does what the old one did, and the old
			// one what an unbound key does. Text keys are swapped for text keys
			// (they type in the filter line and the help search, and q quits
			// only where it does not type), the others for function keys.
			rebindTo := func(to string) func(*keyMap) {
				return func(km *keyMap) { b := c.b(km); *b = bind(b.Help().Desc, to) }
			}
			for i, mode := range keyModes {
				for _, k := range old.Keys() {
					text := press(k).Text
					to, idle := spare, "f6"
					if text != "" {
						to, idle = "§", "µ"
					}
					// as if k had typed, where to or idle typed
					norm := strings.NewReplacer("§", text, "µ", text).Replace

					m := inMode(t, i, rebindTo(to))
					if got, want := norm(keyState(m, keys(m, to))), pressed(t, i, k); got != want {
						t.Errorf("%s: %q does not do what %q did:\n got %s\nwant %s", mode.name, to, k, got, want)
					}
					m = inMode(t, i, rebindTo(to))
					if got, want := keyState(m, keys(m, k)), norm(pressed(t, i, idle)); got != want {
						t.Errorf("%s: %q still acts once rebound:\n got %s\nwant %s", mode.name, k, got, want)
					}
				}
			}

			// The help screen lists it under its new key, not its old one.
			m, _, _ = rebound()
			hit(m, m.keys.Help)
			desc := regexp.QuoteMeta(old.Help().Desc)
			help := screen(m)
			if !regexp.MustCompile(`\s` + spare + `\s+` + desc).MatchString(help) {
				t.Errorf("help lacks %q:\n%s", spare+" "+old.Help().Desc, help)
			}
			if regexp.MustCompile(`\s` + regexp.QuoteMeta(old.Help().Key) + `\s+` + desc).MatchString(help) {
				t.Errorf("help still lists %q", old.Help().Key+" "+old.Help().Desc)
			}

			// So does the footer.
			m, _, _ = rebound()
			lines := strings.Split(strings.TrimRight(screen(m), "\n"), "\n")
			footer := lines[len(lines)-1]
			for _, b := range m.keys.ShortHelp() {
				if slices.Contains(b.Keys(), spare) && c.footer == "" {
					t.Errorf("footer shows %s, the case expects it not to", spare)
				}
			}
			if c.footer != "" {
				entry := func(e string) *regexp.Regexp { return regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(e) + `(\s|$)`) }
				if !entry(c.footer).MatchString(footer) {
					t.Errorf("footer lacks %q: %s", c.footer, footer)
				}
				if was := strings.Replace(c.footer, spare, old.Help().Key, 1); entry(was).MatchString(footer) {
					t.Errorf("footer still shows %q: %s", was, footer)
				}
			}

			// And the hints that name the key where it applies.
			if c.hint != nil {
				m, _, _ = rebound()
				c.hint(m)
				if s := screen(m); !strings.Contains(s, c.want) {
					t.Errorf("the in-place hint lacks %q:\n%s", c.want, s)
				}
			}
		})
	}
}

// keyModes are the places a key can land, each entered through the key map
// (so through a rebound key when the test rebinds it).
var keyModes = []struct {
	name   string
	enter  func(m *Model)
	typing bool // text keys type here
}{
	{"Main", func(*Model) {}, false},
	{"MainSecondRow", func(m *Model) { hit(m, m.keys.Down) }, false},
	{"Events", func(m *Model) { hit(m, m.keys.PrevPane); m.render(); hit(m, m.keys.PageUp) }, false}, // scrolled up
	{"Detail", func(m *Model) { hit(m, m.keys.Enter); hit(m, m.keys.Down) }, false},                  // scrolled down
	{"EventDetail", func(m *Model) { hit(m, m.keys.PrevPane); hit(m, m.keys.Up); hit(m, m.keys.Enter) }, false},
	// scrolled down, not by a key: a Down rebound to a text key types here
	{"Help", func(m *Model) { hit(m, m.keys.Help); m.mode.helpScroll = 1 }, false},
	{"HelpSearch", func(m *Model) { hit(m, m.keys.Help); hit(m, m.keys.Filter); typed(m, "ab") }, true},
	{"Filter", func(m *Model) { hit(m, m.keys.Filter); typed(m, "ab") }, true},
	{"FilterKept", func(m *Model) { hit(m, m.keys.Filter); typed(m, "bill"); hit(m, m.keys.Enter) }, false},
	{"Confirm", func(m *Model) { hit(m, m.keys.Evict) }, false},
	{"TooSmall", func(m *Model) { m.Update(tea.WindowSizeMsg{Width: 59, Height: 30}) }, false},
}

// inMode is a dashboard at 80×24 (where the help and the detail view
// scroll) with a scrolling event log, put in mode; keyMap edits the key map
// first.
func inMode(t *testing.T, mode int, keyMap func(*keyMap)) *Model {
	t.Helper()
	m, _ := setup(t, healthySnapshot())
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for range 4 {
		m.events.add(sampleEvents()...)
	}
	if keyMap != nil {
		keyMap(&m.keys)
	}
	keyModes[mode].enter(m)
	return m
}

// keyState is what a key can change, the screen aside (it names the keys).
func keyState(m *Model, cmd tea.Cmd) string {
	m.render() // a render clamps the scroll positions
	return fmt.Sprint(m.focus, m.filter, m.problems, m.scopeSort, m.nodeSort,
		m.mode.overlay, m.mode.query, m.mode.helpScroll, m.mode.view, m.mode.subject, m.mode.scroll, m.paused, m.interval,
		m.scopes.cursor, m.nodes.cursor, m.terms.cursor,
		m.events.offset, m.events.cursor, m.events.follow, m.status, cmd != nil)
}

// TestNoHiddenKeys presses every key a terminal commonly sends in each mode
// and checks that any key that does something is in the key map (or a fault
// key), unless it types text into the filter line or the help search.
func TestNoHiddenKeys(t *testing.T) {
	var candidates []string
	for r := '!'; r <= '~'; r++ {
		candidates = append(candidates, string(r))
	}
	for name := range namedKeys {
		candidates = append(candidates, name, "shift+"+name, "ctrl+"+name)
	}
	for r := 'a'; r <= 'z'; r++ {
		candidates = append(candidates, "ctrl+"+string(r), "alt+"+string(r))
	}
	// alt+esc is left out: it is how a terminal reports two quick escapes,
	// which the dashboard honours as esc twice (TestHelpSearch).
	slices.Sort(candidates)
	for _, k := range candidates {
		if got := press(k).String(); got != k {
			t.Fatalf("press(%q) sends %q", k, got)
		}
	}

	for i, mode := range keyModes {
		if mode.name == "Confirm" {
			continue // every key answers: y runs the action, any other cancels
		}
		t.Run(mode.name, func(t *testing.T) {
			m := inMode(t, i, nil)
			before := keyState(m, nil)
			for _, k := range candidates {
				if mode.typing && press(k).Text != "" {
					continue // it types
				}
				if keyState(m, keys(m, k)) == before {
					continue // nothing happened: the same model serves the next key
				}
				if !m.keys.bound(k) {
					t.Errorf("%q does something, but no binding in the key map has it", k)
				}
				m = inMode(t, i, nil)
			}
		})
	}
}

// TestKeysListed checks that the help screen lists every binding and the
// footer only bindings, with actions on and off.
func TestKeysListed(t *testing.T) {
	for _, actions := range []bool{true, false} {
		k := newKeyMap(actions)
		k.Faults = []key.Binding{bind("kill -9 leader", "K")}
		var listed []key.Binding
		for _, g := range k.groups() {
			listed = append(listed, g.bindings...)
		}
		same := func(a, b key.Binding) bool { return slices.Equal(a.Keys(), b.Keys()) && a.Help() == b.Help() }
		for _, b := range append(k.all(), k.Faults...) {
			isAction := slices.ContainsFunc([]key.Binding{k.Evict, k.Resign, k.Handover, k.Confirm, k.Decline}, func(a key.Binding) bool { return same(a, b) })
			shown := slices.ContainsFunc(listed, func(l key.Binding) bool { return same(l, b) })
			if same(b, k.Database) {
				isAction = true // listed over a fleet only (TestFleetKeys)
				if shown {
					t.Errorf("one database: %q listed in help", b.Help().Key)
				}
				continue
			}
			if shown != (actions || !isAction) {
				t.Errorf("actions=%v: %q listed in help: %v", actions, b.Help().Key, shown)
			}
		}
		for _, b := range listed {
			if !slices.ContainsFunc(append(k.all(), k.Faults...), func(a key.Binding) bool { return same(a, b) }) {
				t.Errorf("help lists %q, which is not in the key map", b.Help().Key)
			}
		}
		for _, b := range k.ShortHelp() {
			for _, ks := range b.Keys() {
				if !k.bound(ks) {
					t.Errorf("footer entry %q has key %q, which is not in the key map", b.Help().Key, ks)
				}
			}
			if !actions && (slices.Contains(b.Keys(), "x") || slices.Contains(b.Keys(), "R") || slices.Contains(b.Keys(), "O")) {
				t.Errorf("read-only footer shows %q", b.Help().Key)
			}
		}
	}
}
