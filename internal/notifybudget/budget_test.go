package notifybudget

import (
	"strings"
	"testing"
	"time"
)

// A budget admits up to its count and bytes per window, and starts afresh in the
// next window.
func TestAdmit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name          string
		count, bytes  int
		size          int
		admitted      int // admitted in one window before the first refusal
		wantCountRecv int
	}{
		{"Count", 100, 1 << 20, 10, 100, 101},
		{"Bytes", 100, 70_000, 7000, 10, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.count, tt.bytes)
			got := 0
			for b.Admit(t0.Add(time.Duration(got)*time.Millisecond), 7, tt.size) {
				got++
			}
			if got != tt.admitted {
				t.Errorf("admitted %d in a window, want %d", got, tt.admitted)
			}
			if n, by := b.Window(); n != tt.wantCountRecv || by != n*tt.size {
				t.Errorf("window received %d notifications, %d bytes", n, by)
			}
			if !b.Admit(t0.Add(Window), 7, tt.size) {
				t.Error("refused in the next window")
			}
		})
	}
}

func TestTopSenders(t *testing.T) {
	b := New(1000, 1<<20)
	for i := range 100 {
		pid := uint32(1 + i%40) // more pids than it counts
		if i < 50 {
			pid = 99
		}
		b.Admit(time.Unix(0, 0), pid, 1)
	}
	if got := b.TopSenders(); !strings.HasPrefix(got, "pid 99 (50), ") || len(b.senders) != maxSenders {
		t.Errorf("TopSenders %q with %d pids counted", got, len(b.senders))
	}
}

func TestDeafFor(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, deafMax, deafMax}
	for i, w := range want {
		if got := DeafFor(i + 1); got != w {
			t.Errorf("DeafFor(%d) = %v, want %v", i+1, got, w)
		}
	}
}
