package election

import (
	"testing"
	"time"
)

// TestLeaseWatch: a follower may claim a held scope only after seeing its
// lease_seq unchanged for a whole lease from the heartbeat that first returned
// it; any renewal starts the watch over; a free scope may be claimed at once.
func TestLeaseWatch(t *testing.T) {
	const L = 500 * time.Millisecond
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	var w leaseWatch
	w.reset()
	if w.expected() != -1 || w.runsOut(L) != 0 {
		t.Fatalf("fresh watch: expected %d, runs out at %d", w.expected(), w.runsOut(L))
	}
	steps := []struct {
		at    int64 // ms
		free  bool
		seq   int64
		claim bool
	}{
		{100, false, 7, false}, // first sight of seq 7
		{350, false, 7, false},
		{599, false, 7, false}, // 499 ms: not yet
		{600, false, 7, true},  // a whole lease
		{650, false, 8, false}, // renewed: watch again from 650
		{1149, false, 8, false},
		{1150, false, 8, true},
		{1200, true, 9, true}, // released: at once
	}
	for _, s := range steps {
		if got := w.observe(s.free, s.seq, ms(s.at), L); got != s.claim {
			t.Fatalf("at %d ms, seq %d free=%v: claim %v, want %v", s.at, s.seq, s.free, got, s.claim)
		}
		if s.claim && w.expected() != s.seq {
			t.Fatalf("at %d ms: a claim expects seq %d, want %d", s.at, w.expected(), s.seq)
		}
	}

	// The timer: a lease first seen at 2000 ms runs out at 2500 ms, not before.
	w.reset()
	w.observe(false, 20, ms(2000), L)
	if at := w.runsOut(L); at != ms(2500) {
		t.Fatalf("runs out at %d, want %d", at, ms(2500))
	}
	if w.expire(ms(2499), L) {
		t.Fatal("expired 1 ms early")
	}
	if !w.expire(ms(2500), L) || w.expected() != 20 {
		t.Fatalf("not expired at 2500 ms (expects %d)", w.expected())
	}
	// Won: forgotten.
	w.reset()
	if w.expire(ms(9000), L) || w.runsOut(L) != 0 {
		t.Fatal("a won scope still watched")
	}
}
