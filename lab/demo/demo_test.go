package demo

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNumberedScopes(t *testing.T) {
	if got := NumberedScopes(3); !slices.Equal(got, []string{"scope-0001", "scope-0002", "scope-0003"}) {
		t.Fatalf("3: %v", got)
	}
	got := NumberedScopes(12000)
	if len(got) != 12000 || got[0] != "scope-00001" || got[11999] != "scope-12000" || !slices.IsSorted(got) {
		t.Fatalf("12000: %s … %s, sorted %v", got[0], got[len(got)-1], slices.IsSorted(got))
	}
}

func TestWorkInterval(t *testing.T) {
	for _, tc := range []struct {
		scopes int
		want   time.Duration
	}{{1, 200 * time.Millisecond}, {2, 200 * time.Millisecond}, {10, 200 * time.Millisecond}, {100, 2 * time.Second}, {1000, 20 * time.Second}} {
		if got := WorkInterval(tc.scopes); got != tc.want {
			t.Errorf("%d scopes: %v, want %v", tc.scopes, got, tc.want)
		}
	}
}

func TestScopeList(t *testing.T) {
	if got := scopeList([]string{"billing", "reports"}); got != "[billing reports]" {
		t.Errorf("two: %q", got)
	}
	if got := scopeList(NumberedScopes(1000)); got != "1000: [scope-0001 scope-0002 … scope-1000]" {
		t.Errorf("a thousand: %q", got)
	}
}

// TestTakeoverNotes: a fault that struck a few scopes gets a line per
// takeover; one that struck many gets one line, once all are done.
func TestTakeoverNotes(t *testing.T) {
	drain := func(l *lab) []string {
		var out []string
		for {
			select {
			case n := <-l.notes:
				out = append(out, n)
			default:
				return out
			}
		}
	}
	l := &lab{notes: make(chan string, 16)}
	few := &strike{fault: "kill -9", n: 2}
	l.noteTakeover(few, Failover{Fault: "kill -9", Scope: "billing", From: "node-1", To: "node-2", Epoch: 3, Duration: 12 * time.Millisecond})
	l.noteTakeover(few, Failover{Fault: "kill -9", Scope: "reports", From: "node-1", To: "node-3", Epoch: 5, Duration: 14 * time.Millisecond})
	if got := drain(l); len(got) != 2 || got[0] != "failover billing: node-1 → node-2 (epoch 3) 12ms after kill -9" {
		t.Fatalf("few: %q", got)
	}

	many := &strike{fault: "kill -9", n: 300}
	for i := range 300 {
		to := "node-2"
		if i%3 == 0 {
			to = "node-3"
		}
		l.noteTakeover(many, Failover{Fault: "kill -9", Scope: "s", From: "node-1", To: to, Duration: time.Duration(i+1) * time.Millisecond})
		if i < 299 {
			if got := drain(l); len(got) != 0 {
				t.Fatalf("a line before all are done: %q", got)
			}
		}
	}
	got := drain(l)
	if len(got) != 1 || !strings.HasPrefix(got[0], "failover of 300 scopes after kill -9: median 151ms, max 300ms (to node-2 ×200, node-3 ×100)") {
		t.Fatalf("many: %q", got)
	}
}
