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
	// An 80-column dashboard shows 46 characters of a note (its time and
	// "» demo" take the rest): the figure must be among them.
	const shown = 46
	if got := drain(l); len(got) != 2 || got[0] != "failover billing in 12ms: node-1 → node-2 (epoch 3) after kill -9" ||
		strings.Index(got[0], "12ms")+len("12ms") > shown {
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
	if len(got) != 1 || got[0] != "failover of 300 scopes: 151ms median, 300ms max, after kill -9 (to node-2 ×200, node-3 ×100)" ||
		strings.Index(got[0], "300ms")+len("300ms") > shown {
		t.Fatalf("many: %q", got)
	}
}

// TestCheckDSN: the demo refuses, naming the fix, what its fault proxy cannot
// stand in front of, and takes a single-host URL.
func TestCheckDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"":                                           "",
		"postgres://u@db.example:6432/app":           "",
		"postgresql://u@db.example/app":              "",
		"postgres://u@h1:5432,h2:5432/app":           "several hosts (h1:5432,h2:5432)",
		"host=db port=5432 user=u":                   "as a URL",
		"postgres://u@/app?host=/var/run/postgresql": "TCP host",
	} {
		err := CheckDSN(dsn)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckDSN(%q) = %v, want nil", dsn, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckDSN(%q) = %v, want an error saying %q", dsn, err, want)
		}
	}
}
