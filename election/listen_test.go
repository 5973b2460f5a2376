package election

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The budget admits up to its count and bytes per window, and starts afresh in
// the next window.
func TestHintBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	small := &pgconn.Notification{PID: 7, Payload: `{"event":"released","scope":"a"}`}
	big := &pgconn.Notification{PID: 8, Payload: strings.Repeat("x", 7000)}
	tests := []struct {
		name     string
		scopes   int
		n        *pgconn.Notification
		admitted int // admitted in one window before the first refusal
	}{
		{"SmallPayloadsCount", 3, small, hintBudgetMin},
		{"LargePayloadsBytes", 3, big, hintBudgetMin * hintBytesEach / 7000},
		{"ScalesWithScopes", 1000, small, 1000 * hintPerScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHintBudget(tt.scopes)
			got := 0
			for b.admit(t0, tt.n) {
				got++
			}
			if got != tt.admitted {
				t.Errorf("admitted %d in a window, want %d", got, tt.admitted)
			}
			if !b.admit(t0.Add(hintWindow), tt.n) {
				t.Error("refused in the next window")
			}
		})
	}
}

func TestHintBudgetNamesSenders(t *testing.T) {
	b := newHintBudget(1)
	for i := range 100 {
		pid := uint32(1 + i%40) // more pids than it counts
		if i < 50 {
			pid = 99
		}
		b.admit(time.Unix(0, 0), &pgconn.Notification{PID: pid})
	}
	if got := b.topSenders(); !strings.HasPrefix(got, "pid 99 (50), ") || len(b.senders) != maxSenders {
		t.Errorf("topSenders %q with %d pids counted", got, len(b.senders))
	}
}

// A repeated hint is acted on once per spacing; hints that make the node do
// different things are kept apart.
func TestHintCollapse(t *testing.T) {
	b := newHintBudget(1)
	t0 := time.Unix(1000, 0)
	b.admit(t0, &pgconn.Notification{})
	const sp = 50 * time.Millisecond
	steps := []struct {
		at       time.Duration
		h        hint
		collapse bool
	}{
		{0, hint{Event: "released", Scope: "a", Holder: "n1"}, false},
		{time.Millisecond, hint{Event: "released", Scope: "a", Holder: "n2"}, true},
		{time.Millisecond, hint{Event: "released", Scope: "b"}, false},
		{time.Millisecond, hint{Event: "node_lost", Holder: "n1"}, false},
		{time.Millisecond, hint{Event: "node_lost", Holder: "n2"}, false},
		{2 * time.Millisecond, hint{Event: "resign_requested", Scope: "a"}, false},
		{2 * time.Millisecond, hint{Event: "resign_requested", Scope: "b"}, true},
		{3 * time.Millisecond, hint{Event: "node_joined", Holder: "x"}, false},
		{3 * time.Millisecond, hint{Event: "node_joined", Holder: "y"}, true},
		{sp, hint{Event: "released", Scope: "a"}, false},
	}
	for i, s := range steps {
		if got := b.collapse(t0.Add(s.at), s.h, sp); got != s.collapse {
			t.Errorf("step %d %+v at %v: collapse %v, want %v", i, s.h, s.at, got, s.collapse)
		}
	}
}

func TestDeafFor(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, deafMax, deafMax}
	for i, w := range want {
		if got := deafFor(i + 1); got != w {
			t.Errorf("deafFor(%d) = %v, want %v", i+1, got, w)
		}
	}
}
