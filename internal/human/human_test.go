package human

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {850 * time.Microsecond, "850µs"}, {3200 * time.Microsecond, "3.2ms"},
		{12 * time.Millisecond, "12ms"}, {1250 * time.Millisecond, "1.25s"},
		{4*time.Minute + 5*time.Second, "4m05s"}, {3*time.Hour + 12*time.Minute, "3h12m"},
		{52 * time.Hour, "2d04h"}, {-12 * time.Millisecond, "-12ms"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestCell(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {400 * time.Millisecond, "0.4s"}, {9900 * time.Millisecond, "9.9s"},
		{42 * time.Second, "42s"}, {3*time.Minute + 12*time.Second, "3m12s"},
		{2*time.Hour + 5*time.Minute, "2h05m"}, {76 * time.Hour, "3d04h"},
	} {
		if got := Cell(c.d); got != c.want || len(got) > 6 {
			t.Errorf("Cell(%v) = %q, want %q (at most 6 bytes)", c.d, got, c.want)
		}
	}
}
