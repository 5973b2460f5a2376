package election

import (
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/notifybudget"
)

// A node's budget: at least hintBudgetMin notifications a window, more for a
// node of many scopes, and as many times hintBytesEach bytes.
func TestHintBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name     string
		scopes   int
		size     int
		admitted int // admitted in one window before the first refusal
	}{
		{"SmallPayloadsCount", 3, len(`{"event":"released","scope":"a"}`), hintBudgetMin},
		{"LargePayloadsBytes", 3, 7000, hintBudgetMin * hintBytesEach / 7000},
		{"ScalesWithScopes", 1000, 100, 1000 * hintPerScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHintBudget(tt.scopes)
			got := 0
			for b.Admit(t0, 1, tt.size) {
				got++
			}
			if got != tt.admitted {
				t.Errorf("admitted %d in a window, want %d", got, tt.admitted)
			}
			if !b.Admit(t0.Add(notifybudget.Window), 1, tt.size) {
				t.Error("refused in the next window")
			}
		})
	}
}

// A repeated hint is acted on once per spacing; hints that make the node do
// different things are kept apart.
func TestHintCollapse(t *testing.T) {
	a := hintsActed{}
	t0 := time.Unix(1000, 0)
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
		if got := a.collapse(t0.Add(s.at), s.h, sp, 100); got != s.collapse {
			t.Errorf("step %d %+v at %v: collapse %v, want %v", i, s.h, s.at, got, s.collapse)
		}
	}
	// Bounded: forged node_lost hints of ever new nodes never grow it past the limit.
	for i := range 1000 {
		a.collapse(t0, hint{Event: "node_lost", Holder: strings.Repeat("n", i%50) + string(rune('a'+i%26))}, sp, 100)
	}
	if len(a) > 100 {
		t.Errorf("%d hints remembered, limit 100", len(a))
	}
}
