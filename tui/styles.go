package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// tone is the meaning of a piece of text; a style set maps it to a look.
// Keeping meaning and look apart lets one render path serve colour, NO_COLOR
// and the dimmed "data may be stale" mode.
type tone uint8

const (
	toneNone tone = iota
	toneOK
	toneWarn
	toneBad
	toneCrit // split brain: louder than bad
	toneMuted
	toneHolder0 // toneHolder0+i: the holder with mark i in the terms timeline
	toneHolder1
	toneHolder2
	toneHolder3
	toneHolder4
	toneHolder5
	toneHolder6
	toneHolder7
	toneCount
)

const holderTones = int(toneCount - toneHolder0)

// styles is one look. Styles are built once per (palette, dim) pair.
type styles struct {
	tones [toneCount]lipgloss.Style
	plain [toneCount]bool // the tone adds no escape codes: skip Render
	// cursorTones and idleTones are each tone on the cursor row of the
	// focused pane (reversed: the tone's colour becomes the bar's) and of
	// another pane (bold): the cursor never hides what a cell says.
	cursorTones, idleTones [toneCount]lipgloss.Style

	title      lipgloss.Style // "pgleader top"
	paneTitle  lipgloss.Style
	paneFocus  lipgloss.Style // title of the focused pane
	colHeader  lipgloss.Style
	cursor     lipgloss.Style // selected row in the focused pane (cursorTones[toneNone])
	cursorIdle lipgloss.Style // selected row elsewhere (idleTones[toneNone])
	paused     lipgloss.Style
	replay     lipgloss.Style // the REPLAY banner: never mistaken for live
	critical   lipgloss.Style // alert banner, critical
	warning    lipgloss.Style // alert banner, warning
	modal      lipgloss.Style
	key        lipgloss.Style
	status     lipgloss.Style
	errorText  lipgloss.Style
	help       help.Model
}

// newStyles builds the look of palette p (nil: no colour), dimmed or not.
func newStyles(p *palette, dim bool) *styles {
	s := &styles{}
	base := lipgloss.NewStyle()
	if dim {
		base = base.Faint(true)
	}
	noColor := p == nil
	color := func(st lipgloss.Style, c string) lipgloss.Style {
		if noColor || dim {
			return st
		}
		return st.Foreground(lipgloss.Color(c))
	}
	if noColor {
		p = &palette{}
	}
	s.tones[toneNone] = base
	s.tones[toneOK] = color(base, p.ok)
	s.tones[toneWarn] = color(base, p.warn)
	s.tones[toneBad] = color(base.Bold(!dim), p.bad)
	s.tones[toneCrit] = color(base.Bold(!dim), p.crit)
	s.tones[toneMuted] = color(base, p.muted)
	for i, c := range p.holders {
		s.tones[toneHolder0+tone(i)] = color(base, c)
	}
	for i := range s.tones {
		s.plain[i] = s.tones[i].Render("x") == "x"
		s.cursorTones[i] = s.tones[i].Reverse(true)
		s.idleTones[i] = s.tones[i].Bold(true)
	}

	s.title = base.Bold(true)
	s.paneTitle = base.Bold(true)
	s.paneFocus = color(base.Bold(true), p.focus)
	s.colHeader = color(base.Bold(true), p.muted)
	s.cursor = s.cursorTones[toneNone]
	s.cursorIdle = s.idleTones[toneNone]
	s.paused = base.Reverse(true).Bold(true)
	s.replay = color(base.Reverse(true).Bold(true), p.warn)
	s.critical = color(base.Bold(true), p.bad)
	s.warning = color(base.Bold(true), p.warn)
	s.modal = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1)
	if !noColor {
		s.modal = s.modal.BorderForeground(lipgloss.Color(p.warn))
	}
	s.key = base.Bold(true)
	s.status = base
	s.errorText = color(base.Bold(true), p.bad)

	s.help = help.New()
	hs := help.Styles{
		ShortKey:       base.Bold(true),
		ShortDesc:      base,
		ShortSeparator: color(base, p.muted),
		Ellipsis:       color(base, p.muted),
		FullKey:        base.Bold(true),
		FullDesc:       base,
		FullSeparator:  color(base, p.muted),
	}
	s.help.Styles = hs
	s.help.ShortSeparator = "  "
	return s
}

// render renders text in tone t.
func (s *styles) render(t tone, text string) string {
	if s.plain[t] || text == "" {
		return text
	}
	return s.tones[t].Render(text)
}
