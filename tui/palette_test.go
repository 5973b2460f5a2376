package tui

import (
	"fmt"
	"image/color"
	"math"
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
)

// luminance is the WCAG 2 relative luminance of c.
func luminance(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	lin := func(v uint32) float64 {
		s := float64(v) / 0xffff
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// contrast is the WCAG 2 contrast ratio of two colours, 1 to 21.
func contrast(a, b color.Color) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

func TestContrastFormula(t *testing.T) {
	white, black := lipgloss.Color("#ffffff"), lipgloss.Color("#000000")
	for _, tc := range []struct {
		fg, bg color.Color
		want   float64
	}{
		{black, white, 21},
		{white, white, 1},
		{lipgloss.Color("#767676"), white, 4.54}, // the classic lightest AA grey on white
		{lipgloss.Color("#777777"), white, 4.48},
	} {
		if got := contrast(tc.fg, tc.bg); math.Abs(got-tc.want) > 0.01 {
			t.Errorf("contrast(%v, %v) = %.3f, want %.2f", tc.fg, tc.bg, got, tc.want)
		}
	}
}

// TestThemeContrast measures every text colour of the light and dark looks —
// each tone, the titles, headers, banners, help separators — against the
// theme's background, and wants WCAG AA for normal text: 4.5:1.
func TestThemeContrast(t *testing.T) {
	for _, p := range []*palette{&lightPalette, &darkPalette} {
		t.Run(p.name, func(t *testing.T) {
			bg := lipgloss.Color(p.background)
			st := newStyles(p, false)
			check := func(what string, s lipgloss.Style) {
				fg := s.GetForeground()
				if _, none := fg.(lipgloss.NoColor); none || fg == nil {
					return // the terminal's default text colour
				}
				if r := contrast(fg, bg); r < 4.5 {
					r8, g8, b8, _ := fg.RGBA()
					t.Errorf("%s: #%02x%02x%02x on %s has contrast %.2f:1, want at least 4.5:1",
						what, r8>>8, g8>>8, b8>>8, p.background, r)
				}
			}
			for i, s := range st.tones {
				check("tone "+itoa(i), s)
			}
			for what, s := range map[string]lipgloss.Style{
				"title": st.title, "pane title": st.paneTitle, "focused pane title": st.paneFocus,
				"column header": st.colHeader, "critical banner": st.critical, "warning banner": st.warning,
				"key": st.key, "status": st.status, "error": st.errorText,
				"help key": st.help.Styles.ShortKey, "help text": st.help.Styles.ShortDesc,
				"help separator": st.help.Styles.ShortSeparator, "help ellipsis": st.help.Styles.Ellipsis,
				"full help separator": st.help.Styles.FullSeparator,
			} {
				check(what, s)
			}
			// The modal's border is not text, but a frame that cannot be seen
			// is no frame.
			if r := contrast(st.modal.GetBorderTopForeground(), bg); r < 3 {
				t.Errorf("modal border contrast %.2f:1, want at least 3:1", r)
			}
		})
	}
}

// TestFallbackContrast: the colours used before the terminal says its
// background (or when it never does) read on white and on black alike: every
// tone, holder mark, the focus and the modal's border at a WCAG contrast of at
// least 3:1 against both #FFFFFF and #000000.
func TestFallbackContrast(t *testing.T) {
	p := &fallbackPalette
	colours := map[string]string{"ok": p.ok, "warn": p.warn, "bad": p.bad, "crit": p.crit, "muted": p.muted, "focus": p.focus}
	for i, h := range p.holders {
		colours["holder "+itoa(i)] = h
	}
	st := newStyles(p, false)
	for i, s := range st.tones {
		if fg := s.GetForeground(); fg != nil {
			if _, none := fg.(lipgloss.NoColor); !none {
				r, g, b, _ := fg.RGBA()
				colours["tone "+itoa(i)] = fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
			}
		}
	}
	if len(colours) < 6+holderTones+1 {
		t.Fatalf("only %d colours measured", len(colours))
	}
	for what, c := range colours {
		for _, bg := range []string{"#FFFFFF", "#000000"} {
			if r := contrast(lipgloss.Color(c), lipgloss.Color(bg)); r < 3 {
				t.Errorf("%s %s on %s: contrast %.2f:1, want at least 3:1", what, c, bg, r)
			}
		}
	}
	for _, bg := range []string{"#FFFFFF", "#000000"} {
		if r := contrast(st.modal.GetBorderTopForeground(), lipgloss.Color(bg)); r < 3 {
			t.Errorf("modal border on %s: contrast %.2f:1, want at least 3:1", bg, r)
		}
	}
}

func TestTheme(t *testing.T) {
	colour := regexp.MustCompile(`\x1b\[[0-9;]*38;2;([0-9]+);([0-9]+);([0-9]+)`)
	t.Run("ExplicitThemeDrawsItsPalette", func(t *testing.T) {
		for _, tc := range []struct {
			theme Theme
			p     *palette
		}{{ThemeLight, &lightPalette}, {ThemeDark, &darkPalette}} {
			m, _ := setup(t, troubleSnapshot(), func(o *Options) { o.NoColor, o.Theme = false, tc.theme })
			if m.look.tones[toneBad].GetForeground() != lipgloss.Color(tc.p.bad) {
				t.Fatalf("theme %s: bad is %v, want %s", tc.theme, m.look.tones[toneBad].GetForeground(), tc.p.bad)
			}
			if cmd := m.Init(); cmd == nil {
				t.Fatal("Init returned no command")
			}
		}
	})
	t.Run("AutoFollowsTheTerminal", func(t *testing.T) {
		m, _ := setup(t, troubleSnapshot(), func(o *Options) { o.NoColor = false })
		if m.look.tones[toneBad].GetForeground() != lipgloss.Color(fallbackPalette.bad) {
			t.Fatal("before the terminal answers, auto uses the fallback colours")
		}
		m.Update(tea.BackgroundColorMsg{Color: lipgloss.Color("#fdf6e3")}) // solarized light
		if m.look.tones[toneBad].GetForeground() != lipgloss.Color(lightPalette.bad) {
			t.Fatal("a light background must bring the light palette")
		}
		m.Update(tea.BackgroundColorMsg{Color: lipgloss.Color("#1e1e1e")})
		if m.look.tones[toneBad].GetForeground() != lipgloss.Color(darkPalette.bad) {
			t.Fatal("a dark background must bring the dark palette")
		}
		if !colour.MatchString(m.View().Content) {
			t.Fatal("the dark palette draws no true colours")
		}
	})
	t.Run("NoColorWins", func(t *testing.T) {
		t.Setenv("NO_COLOR", "1")
		for _, th := range []Theme{ThemeAuto, ThemeLight, ThemeDark} {
			m, _ := setup(t, troubleSnapshot(), func(o *Options) { o.NoColor, o.Theme = false, th })
			m.Update(tea.BackgroundColorMsg{Color: lipgloss.Color("#000000")})
			if c := m.View().Content; colour.MatchString(c) || ansiColour.MatchString(c) {
				t.Fatalf("theme %q: colour codes with NO_COLOR set", th)
			}
		}
	})
	t.Run("Parse", func(t *testing.T) {
		for in, want := range map[string]Theme{"auto": ThemeAuto, "light": ThemeLight, "dark": ThemeDark} {
			if got, err := ParseTheme(in); err != nil || got != want {
				t.Errorf("ParseTheme(%q) = %q, %v", in, got, err)
			}
		}
		if _, err := ParseTheme("solarized"); err == nil {
			t.Error("ParseTheme accepts solarized")
		}
	})
}

var ansiColour = regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|9[0-7]|38;)[0-9;]*m`)

// TestCursorKeepsTone: the cursor row keeps every cell's colour — a SPLIT
// BRAIN under the cursor still reads in the split-brain colour, reversed in
// the focused pane, bold elsewhere — and so does the event log's cursor line.
func TestCursorKeepsTone(t *testing.T) {
	for _, theme := range []Theme{ThemeLight, ThemeDark} {
		t.Run(string(theme), func(t *testing.T) {
			p := paletteFor(theme, false)
			r, g, b, _ := lipgloss.Color(p.crit).RGBA()
			crit := regexp.MustCompile(`\x1b\[[0-9;]*\b7;38;2;` + itoa(int(r>>8)) + `;` + itoa(int(g>>8)) + `;` + itoa(int(b>>8)) + `m‼ SPLIT BRAIN`)
			idle := regexp.MustCompile(`\x1b\[1;[0-9;]*38;2;` + itoa(int(r>>8)) + `;` + itoa(int(g>>8)) + `;` + itoa(int(b>>8)) + `m‼ SPLIT BRAIN`)
			m, _ := setup(t, troubleSnapshot(), func(o *Options) { o.NoColor, o.Theme = false, theme })
			m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
			row := cursorRow(t, m.View().Content, "billing")
			if !crit.MatchString(row) {
				t.Errorf("focused cursor row %q: the verdict lost its colour", row)
			}
			keys(m, "tab") // the nodes pane has the focus; the scopes cursor idles
			if row := cursorRow(t, m.View().Content, "billing"); !idle.MatchString(row) {
				t.Errorf("idle cursor row %q: the verdict lost its colour", row)
			}
			m.Update(eventsMsg{[]collector.Event{{At: t0, Kind: collector.EventFenceRejected, Scope: "billing", Node: "node-c", Epoch: 41}}})
			keys(m, "shift+tab", "shift+tab") // the events pane
			r, g, b, _ = lipgloss.Color(p.bad).RGBA()
			bad := regexp.MustCompile(`\x1b\[[0-9;]*\b7;38;2;` + itoa(int(r>>8)) + `;` + itoa(int(g>>8)) + `;` + itoa(int(b>>8)) + `m▸ .*fence rejected`)
			if !bad.MatchString(m.View().Content) {
				t.Errorf("the event log's cursor line lost its colour:\n%q", m.View().Content)
			}
		})
	}
}

// cursorRow is the frame's line with the cursor marker and text.
func cursorRow(t *testing.T, frame, text string) string {
	t.Helper()
	for _, l := range strings.Split(frame, "\n") {
		if p := ansi.Strip(l); strings.HasPrefix(p, "▸ ") && strings.Contains(p, text) {
			return l
		}
	}
	t.Fatalf("no cursor row with %q", text)
	return ""
}
