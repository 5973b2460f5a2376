package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// demoFaults are the demo's fault keys as package demo spells them (it imports
// tui, so the test cannot import it): the longest help texts a dashboard shows.
var demoFaults = []FaultKey{
	{Key: "K", Help: "kill -9 the leader"},
	{Key: "Z", Help: "freeze the leader (SIGSTOP) / thaw"},
	{Key: "H", Help: "hang the leader's database link / heal"},
	{Key: "G", Help: "leader resigns (SIGUSR1)"},
	{Key: "B", Help: "restart PostgreSQL"},
	{Key: "A", Help: "add a node"},
	{Key: "D", Help: "remove a node (SIGTERM)"},
}

// TestHelpNeverCut: at 80×24 and 120×40, with the actions, the demo's fault
// keys and its DSN, no help line is cut — neither the help screen's nor the
// footer's in any mode — and the help screen shows every description whole.
func TestHelpNeverCut(t *testing.T) {
	modes := []struct {
		name  string
		enter func(m *Model)
		want  string // a footer entry that matters in this mode
	}{
		{"Main", func(*Model) {}, "R resign"},
		{"Detail", func(m *Model) { keys(m, "enter") }, "esc back"},
		{"NodeDetail", func(m *Model) { keys(m, "tab", "enter") }, "esc back"},
		{"EventDetail", func(m *Model) { m.Update(eventsMsg{sampleEvents()}); keys(m, "shift+tab", "enter") }, "esc back"},
		{"Help", func(m *Model) { keys(m, "?") }, "esc close"},
		{"Filter", func(m *Model) { keys(m, "/") }, "enter keep"},
	}
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		for _, mode := range modes {
			t.Run(itoa(sz[0])+"x"+itoa(sz[1])+"/"+mode.name, func(t *testing.T) {
				m, _ := setup(t, healthySnapshot(), func(o *Options) {
					o.Faults, o.DSN = &fakeFaults{keys: demoFaults}, "postgres://postgres@127.0.0.1:54321/pgleader?sslmode=disable"
				})
				m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				mode.enter(m)
				lines := strings.Split(strings.TrimRight(screen(m), "\n"), "\n")
				footer := lines[len(lines)-1]
				if strings.Contains(footer, ellipsis) || textWidth(footer) > sz[0] {
					t.Errorf("footer cut: %q", footer)
				}
				if !strings.Contains(footer, mode.want) {
					t.Errorf("footer lacks %q: %q", mode.want, footer)
				}
				if mode.name != "Help" {
					return
				}
				// The whole help screen, every page of it.
				body := m.helpLines(sz[0], 1000)[1:]
				text := make([]string, 0, len(body))
				for _, l := range body {
					l = ansi.Strip(l)
					if strings.Contains(l, ellipsis) || textWidth(l) > sz[0] {
						t.Errorf("help line cut: %q", l)
					}
					text = append(text, strings.Join(strings.Fields(l), " "))
				}
				all := strings.Join(text, "\n")
				for _, g := range m.keys.groups() {
					for _, b := range g.bindings {
						// A wrapped description continues in its column: check
						// its words, each on some line.
						for _, word := range strings.Fields(b.Help().Desc) {
							if !strings.Contains(all, word) {
								t.Errorf("help lacks %q of %q", word, b.Help().Desc)
							}
						}
					}
				}
			})
		}
	}
}
