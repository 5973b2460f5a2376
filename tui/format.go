package tui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
)

const ellipsis = "…"

// textWidth is the display width of s (ANSI aware), with an ASCII fast path:
// most cells are plain ASCII and this runs for every visible cell.
func textWidth(s string) int {
	if plainASCII(s) {
		return len(s)
	}
	return ansi.StringWidth(s)
}

// plainASCII reports whether s is printable ASCII: one column per byte, no
// escape codes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c < 0x20 {
			return false
		}
	}
	return true
}

// truncate cuts s to at most w columns, marking the cut with "…". Plain ASCII
// is cut by bytes: ansi.Truncate measures the whole string, and a cell may
// hold a long list (a node's roles at a thousand scopes).
// keepTail cuts s to w columns from the left, an ellipsis first: a wrapped
// Go error says its cause last ("failed to connect to …: server error:
// FATAL: the database system is shutting down"), and the cause is what the
// reader needs.
func keepTail(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := textWidth(s)
	if n <= w {
		return s
	}
	return ellipsis + ansi.TruncateLeft(s, n-w+1, "")
}

func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if plainASCII(s) {
		if len(s) <= w {
			return s
		}
		return s[:w-1] + ellipsis
	}
	if textWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, ellipsis)
}

// padRight truncates or pads s to exactly w columns.
func padRight(s string, w int) string {
	s = truncate(s, w)
	if n := w - textWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

// padLeft truncates or left-pads s to exactly w columns.
func padLeft(s string, w int) string {
	s = truncate(s, w)
	if n := w - textWidth(s); n > 0 {
		return strings.Repeat(" ", n) + s
	}
	return s
}

// fitLine truncates or pads a (possibly styled) line to exactly w columns.
func fitLine(s string, w int) string {
	sw := textWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, ellipsis)
	}
	if sw < w {
		return s + strings.Repeat(" ", w-sw)
	}
	return s
}

// Durations in the dashboard's cells and texts are human.Cell's (0.4s, 42s,
// 3m12s, 2h05m). fmtInterval and fmtAgo say something else; so does fmtAxis
// (terms.go), a tick label.

// fmtInterval renders a poll interval, or the collector's read time, as an
// operator would set it: 100ms, 250ms, 1s, 1.5s, 15s; from a minute on as a
// cell (1m00s). human.Cell would show 250ms as "0.2s", human.Duration 1s as
// "1.00s".
func fmtInterval(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.Itoa(int(d/time.Millisecond)) + "ms"
	case d < time.Minute:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(d.Seconds(), 'f', 1, 64), "0"), ".") + "s"
	default:
		return human.Cell(d)
	}
}

// fmtAgo is the age of the data at the one-second resolution of the
// dashboard's clock: "just now", "4s ago", then a cell ("3m12s ago").
func fmtAgo(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s ago"
	default:
		return human.Cell(d) + " ago"
	}
}

// fmtClock renders a time of day (seconds); "—" for the zero time.
func fmtClock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format("15:04:05")
}

// fmtStamp renders an event timestamp, HH:MM:SS.mmm.
func fmtStamp(t time.Time) string {
	return t.Format("15:04:05.000")
}

// verdictTone is the colour of a verdict; its words and glyph are
// show.Verdict's, its rank the collector's (Verdict.Rank).
func verdictTone(v collector.Verdict) tone {
	switch v {
	case collector.VerdictOK:
		return toneOK
	case collector.VerdictDegraded:
		return toneWarn
	case collector.VerdictNoLeader:
		return toneBad
	case collector.VerdictSplitBrain:
		return toneCrit
	default:
		return toneMuted // IDLE (nobody is meant to lead: not a problem), or unknown
	}
}

// severityLabel is the glyph + word of an alert severity.
func severityLabel(s collector.Severity) (string, tone) {
	switch s {
	case collector.SeverityCritical:
		return "‼ CRITICAL", toneBad
	case collector.SeverityWarning:
		return "▲ WARNING", toneWarn
	default:
		return "• " + strings.ToUpper(string(s)), toneMuted
	}
}

// sourceLabel describes where the data comes from.
func sourceLabel(h collector.Health) (string, tone) {
	switch s := h.Source; s {
	case collector.SourceLive:
		return "● live", toneOK
	case collector.SourceLogical:
		return "● logical", toneOK
	case collector.SourcePolling:
		if h.Pooler {
			return "◐ polling (through a pooler)", toneMuted
		}
		return "◐ polling (LISTEN down)", toneWarn
	case collector.SourceDisconnected:
		return "✖ DISCONNECTED", toneBad
	case collector.SourceReplay:
		return "⏮ REPLAY (rebuilt, not live)", toneWarn
	case "":
		return "? source", toneMuted
	default:
		return "? " + string(s), toneMuted
	}
}

// heartbeatTone judges a heartbeat age against the holder's own timing:
// up to two intervals is normal, up to the trust window is late, beyond it the
// holder's gate is closed (or should be) while it may still hold the lock.
func heartbeatTone(age time.Duration, t collector.Timing) tone {
	if t.HeartbeatInterval <= 0 {
		return toneNone
	}
	switch {
	case age <= 2*t.HeartbeatInterval:
		return toneOK
	case t.TrustWindow <= 0 || age <= t.TrustWindow:
		return toneWarn
	default:
		return toneBad
	}
}

// sparkline renders values as block heights, full = max.
func sparkline(vals []time.Duration, full time.Duration) string {
	const bars = "▁▂▃▄▅▆▇█"
	runes := []rune(bars)
	if full <= 0 {
		for _, v := range vals {
			full = max(full, v)
		}
	}
	var b strings.Builder
	for _, v := range vals {
		if v < 0 {
			b.WriteByte(' ')
			continue
		}
		i := 0
		if full > 0 {
			i = int(float64(v) / float64(full) * float64(len(runes)-1))
		}
		b.WriteRune(runes[min(max(i, 0), len(runes)-1)])
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func itoa(n int) string { return strconv.Itoa(n) }
