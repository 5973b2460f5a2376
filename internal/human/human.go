// Package human formats durations for people: the one place where pgleader
// decides how a duration reads, in command output, alert messages, logs and the
// dashboard.
package human

import (
	"fmt"
	"strconv"
	"time"
)

// Duration formats d at a precision that suits its size: 850µs, 3.2ms, 12ms,
// 1.25s, 4m05s, 3h12m, 2d04h. For command output, alert and event text.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return Cell(d)
}

// Cell formats d in at most six characters, for a narrow table cell: 0.4s, 9.9s,
// 42s, 3m12s, 2h05m, 3d04h (0s for zero or less).
func Cell(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
