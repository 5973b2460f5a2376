package election

import (
	"slices"
	"testing"
)

func TestUnwatchedHolders(t *testing.T) {
	cases := []struct {
		me, peer string
		observed []string
		want     []string
	}{
		// The incident: n3 watches n1 (the ring wraps), n1 died before n3 aimed, so
		// ring_next skipped it and gave n2.
		{"n3", "n2", []string{"n1", "", "n1"}, []string{"n1"}},
		{"n3", "n1", []string{"n1"}, nil},                            // the peer itself: its watch reports it
		{"n1", "n3", []string{"n2", "n4"}, []string{"n2"}},           // n4 is past the peer
		{"n2", "", []string{"n1", "n2", "n3"}, []string{"n1", "n3"}}, // alone: everyone else is dead
		{"n2", "n3", []string{"n2", ""}, nil},                        // this node, unknown
		{"b", "a", []string{"c", "z", "a"}, []string{"c", "z"}},      // wraps around the end
	}
	for _, c := range cases {
		got := unwatchedHolders(c.me, c.peer, c.observed)
		if !slices.Equal(got, c.want) {
			t.Errorf("unwatchedHolders(%q, %q, %q) = %q, want %q", c.me, c.peer, c.observed, got, c.want)
		}
	}
}
