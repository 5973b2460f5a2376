package tui

import "fmt"

// Theme chooses the colours for the terminal's background.
type Theme string

const (
	// ThemeAuto asks the terminal for its background colour and picks the
	// light or dark palette from the answer; until it answers (or when it
	// never does) colours readable on a light and on a dark background alike
	// are used.
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
	// fallbackPalette is used while the background is unknown (the terminal
	// has not answered, or never does): each colour reaches a WCAG contrast
	// of at least 3:1 against white and against black alike
	// (TestFallbackContrast), so it reads on either. The terminal's own 16
	// colours did not: its yellow and bright cyan measure 1.07–1.7:1 on
	// white. They are entries of the 256-colour cube, shown exactly by a
	// terminal without true colour.
	fallbackPalette = palette{
		name: "fallback",
		ok:   "#008700", warn: "#af5f00", bad: "#d70000", crit: "#af00af", muted: "#878787",
		focus:   "#0087af",
		holders: [holderTones]string{"#0087af", "#5f5fd7", "#af5faf", "#d75f00", "#00875f", "#d75f87", "#878700", "#875f5f"},
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
		return &fallbackPalette
	}
}
