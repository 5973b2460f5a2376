package retry

import (
	"context"
	"testing"
	"time"
)

// The n-th delay lies in [d/2, d] with d = Base·2^(n−1) capped at Max, and it is
// jittered (not one fixed value).
func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 25 * time.Millisecond, Max: time.Second}
	for n := 0; n <= 40; n++ {
		d := b.Base
		for i := 1; i < n && d < b.Max; i++ {
			d *= 2
		}
		d = min(d, b.Max)
		seen := map[time.Duration]bool{}
		for range 200 {
			got := b.Delay(n)
			if got < d/2 || got > d {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, got, d/2, d)
			}
			seen[got] = true
		}
		if len(seen) < 50 {
			t.Fatalf("Delay(%d) took only %d distinct values in 200 draws: not jittered", n, len(seen))
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	Sleep(ctx, time.Hour)
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not end with its context")
	}
}
