package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// failovers is healthySnapshot after n more failovers of billing: epochs
// 43…42+n, each 10 s, the newest open; Terms newest first as the collector
// sends them.
func failovers(n int) *collector.Snapshot {
	s := healthySnapshot()
	s.Seq += uint64(n)
	holders := []string{"node-a", "node-b", "node-c"}
	var terms []collector.Term
	for i := 1; i <= n; i++ {
		epoch := int64(42 + i)
		from := time.Duration(n-i+1) * 10 * time.Second
		holder := holders[i%len(holders)]
		if i == n {
			terms = append([]collector.Term{*openTerm("billing", epoch, holder, "host-"+holder[5:], 4000+i, from, 20*time.Millisecond)}, terms...)
			continue
		}
		terms = append([]collector.Term{closedTerm("billing", epoch, holder, from, from-10*time.Second, "crashed", 20*time.Millisecond)}, terms...)
	}
	if n > 0 {
		// The open term of epoch 42 ended with the first failover.
		old := s.Terms[0]
		old.ReleasedAt, old.EndedBy = t0.Add(-time.Duration(n)*10*time.Second), "crashed"
		old.HeldFor = old.ReleasedAt.Sub(old.AcquiredAt)
		s.Terms[0] = old
		s.Scopes[0].Epoch, s.Scopes[0].Leader = terms[0].Epoch, terms[0].Holder
		s.Scopes[0].OpenTerm = &terms[0]
	}
	s.Terms = append(terms, s.Terms...)
	return s
}

func TestTermsFollow(t *testing.T) {
	t.Run("FollowsNewTerms", func(t *testing.T) {
		m, _ := setup(t, failovers(0))
		m.Update(tea.WindowSizeMsg{Width: 100, Height: 24}) // the terms pane shows a few rows
		keys(m, "tab", "tab")                               // focus the terms
		for n := 1; n <= 7; n++ {
			m.Update(snapshotMsg{failovers(n)})
			m.ensureRows()
			if got, want := m.terms.selected(), "billing\x00"+itoa(42+n); got != want {
				t.Fatalf("after %d failovers the cursor is on %q, want the newest %q", n, got, want)
			}
		}
		s := screen(m)
		if !strings.Contains(s, "▸     49  billing") || !strings.Contains(s, "following") {
			t.Fatalf("the newest term (49) is not under the cursor, or the pane does not say it follows:\n%s", s)
		}
	})
	t.Run("MovingOffStops", func(t *testing.T) {
		m, _ := setup(t, failovers(1))
		m.Update(tea.WindowSizeMsg{Width: 100, Height: 24})
		keys(m, "tab", "tab", "down")
		m.ensureRows()
		was := m.terms.selected()
		m.Update(snapshotMsg{failovers(2)})
		m.ensureRows()
		if m.terms.following || m.terms.selected() != was {
			t.Fatalf("scrolled away, the cursor must stay on its term %q: following=%v on %q", was, m.terms.following, m.terms.selected())
		}
		if s := screen(m); !strings.Contains(s, "scrolled (home follows)") {
			t.Fatalf("the pane does not say how to follow again:\n%s", s)
		}
		keys(m, "home")
		m.Update(snapshotMsg{failovers(3)})
		m.ensureRows()
		if !m.terms.following || m.terms.selected() != "billing\x0045" {
			t.Fatalf("home must resume following: following=%v on %q", m.terms.following, m.terms.selected())
		}
	})
}
