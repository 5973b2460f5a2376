package tui

import (
	"testing"
	"time"
)

// TestFormatters pins the dashboard's own duration formats; everything else
// is human.Cell.
func TestFormatters(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(time.Duration) string
		d    time.Duration
		want string
	}{
		{"fmtInterval", fmtInterval, 100 * time.Millisecond, "100ms"},
		{"fmtInterval", fmtInterval, 250 * time.Millisecond, "250ms"},
		{"fmtInterval", fmtInterval, 3 * time.Millisecond, "3ms"},
		{"fmtInterval", fmtInterval, time.Second, "1s"},
		{"fmtInterval", fmtInterval, 1500 * time.Millisecond, "1.5s"},
		{"fmtInterval", fmtInterval, 15 * time.Second, "15s"},
		// From a minute on, the dashboard's one cell format (was Go's "1m0s").
		{"fmtInterval", fmtInterval, time.Minute, "1m00s"},
		{"fmtInterval", fmtInterval, 90 * time.Second, "1m30s"},

		{"fmtAgo", fmtAgo, 400 * time.Millisecond, "just now"},
		{"fmtAgo", fmtAgo, 2 * time.Second, "2s ago"},
		{"fmtAgo", fmtAgo, 59*time.Second + 900*time.Millisecond, "59s ago"},
		{"fmtAgo", fmtAgo, 3*time.Minute + 12*time.Second, "3m12s ago"},

		{"fmtAxis", fmtAxis, 5 * time.Minute, "5m"},
		{"fmtAxis", fmtAxis, 30 * time.Second, "30s"},
	} {
		if got := c.f(c.d); got != c.want {
			t.Errorf("%s(%v) = %q, want %q", c.name, c.d, got, c.want)
		}
	}
}
