// Package retry holds the one backoff policy of pgleader's reconnecting loops
// (the engine's sessions and the collector's reads): jittered exponential delays
// with a floor and a cap, and a sleep that a context ends.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff: the n-th consecutive failure waits a random
// time in [d/2, d], where d = Base·2^(n−1) capped at Max. The jitter keeps many
// clients that failed together (a database restart) from retrying in step.
type Backoff struct {
	Base time.Duration // the first delay's upper bound
	Max  time.Duration // the cap
}

// Delay returns the delay after the n-th consecutive failure (n ≥ 1; n < 1 counts
// as 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// Sleep waits d or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
