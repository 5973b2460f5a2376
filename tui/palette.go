package tui

import "fmt"

// Theme chooses the colours for the terminal's background.
type Theme string

const (
	// ThemeAuto asks the terminal for its background colour and picks the
	// light or dark palette from the answer; until it answers (or when it
	// never does) the terminal's own 16 colours are used.
	ThemeAuto Theme = ""
	// ThemeLight is for dark text on a light background.
	ThemeLight Theme = "light"
	// ThemeDark is for light text on a dark background.
	ThemeDark Theme = "dark"
)

// ParseTheme reads a --theme value: light, dark or auto.
func ParseTheme(s string) (Theme, error) {
	switch s {
	case "auto", "":
		return ThemeAuto, nil
	case "light":
		return ThemeLight, nil
	case "dark":
		return ThemeDark, nil
	}
	return ThemeAuto, fmt.Errorf("theme must be light, dark or auto (got %q)", s)
}

// palette is the colour of each tone for one background. Colours are
// lipgloss colour strings: "#rrggbb", or an ANSI index for the terminal's own
// palette.
type palette struct {
	name string
	// background is the colour the palette is drawn on when the terminal's
	// background is its default; the contrast test measures against it.
	background string

	ok, warn, bad, crit, muted string
	focus                      string // the focused pane's title
	holders                    [holderTones]string
}

// The light and dark palettes reach a WCAG contrast ratio of at least 4.5:1
// against their background (white, black) for every tone (TestThemeContrast).
// Holder colours are hues apart, and also not the verdicts' green and red.
var (
	darkPalette = palette{
		name: "dark", background: "#000000",
		ok: "#5fd75f", warn: "#ffd75f", bad: "#ff6b6b", crit: "#ff79ff", muted: "#8f8f8f",
		focus:   "#5fd7ff",
		holders: [holderTones]string{"#5fd7ff", "#87afff", "#d787ff", "#ffaf5f", "#87d7af", "#ff87af", "#d7d787", "#c6c6c6"},
	}
	lightPalette = palette{
		name: "light", background: "#ffffff",
		ok: "#0a7a25", warn: "#8a5a00", bad: "#c00000", crit: "#a0009f", muted: "#6a6a6a",
		focus:   "#00708a",
		holders: [holderTones]string{"#00708a", "#1f4fbf", "#7b2fa0", "#a04a00", "#1d7048", "#b02a64", "#6b6b00", "#3a3a3a"},
	}
	// ansiPalette is the terminal's own 16 colours: they follow its theme,
	// whatever it is, but their contrast is the terminal's business. Used
	// while the background is unknown.
	ansiPalette = palette{
		name: "terminal",
		ok:   "2", warn: "3", bad: "1", crit: "5", muted: "8",
		focus:   "6",
		holders: [holderTones]string{"6", "4", "5", "3", "14", "12", "13", "11"},
	}
)

// paletteFor is the palette of a theme; nil means no colour at all.
func paletteFor(theme Theme, noColor bool) *palette {
	switch {
	case noColor:
		return nil
	case theme == ThemeLight:
		return &lightPalette
	case theme == ThemeDark:
		return &darkPalette
	default:
		return &ansiPalette
	}
}
