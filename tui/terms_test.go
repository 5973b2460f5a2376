package tui

import (
	"slices"
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
		if lineWith(s, `^▸\s+49\s+billing`) == "" || !strings.Contains(s, "following") {
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

func TestHolderMarks(t *testing.T) {
	marksOf := func(m *Model, nodes ...string) []string {
		var out []string
		for _, n := range nodes {
			if i, ok := m.marks.mark(n); ok {
				out = append(out, holderGlyphs[i])
			} else {
				out = append(out, moreGlyph)
			}
		}
		return out
	}
	t.Run("StableWhenAnotherNodeLeads", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot())
		before := marksOf(m, "node-a", "node-b", "node-c")
		// node-0 sorts first and leads from now on: nobody else's mark moves.
		s := healthySnapshot()
		s.Seq++
		nt := openTerm("billing", 43, "node-0", "host-0", 4343, 0, 10*time.Millisecond)
		s.Terms[0].ReleasedAt, s.Terms[0].EndedBy = t0, "crashed"
		s.Scopes[0].Leader, s.Scopes[0].Epoch, s.Scopes[0].OpenTerm = "node-0", 43, nt
		s.Terms = append([]collector.Term{*nt}, s.Terms...)
		m.Update(snapshotMsg{s})
		if after := marksOf(m, "node-a", "node-b", "node-c"); !slices.Equal(before, after) {
			t.Fatalf("marks moved when node-0 began to lead: %v → %v", before, after)
		}
		if got := marksOf(m, "node-0"); got[0] == moreGlyph || slices.Contains(before, got[0]) {
			t.Fatalf("node-0 got mark %q, want a free one (others %v)", got[0], before)
		}
	})
	t.Run("SameMarkInEveryStrip", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot())
		lines, _ := m.timelineLines(m.look, 2+7+1+60, 3, []string{"billing", "reports"})
		b, _ := m.marks.mark("node-b")
		// node-b led billing at the window's start and leads reports throughout.
		if billing, reports := plain(lines[1]), plain(lines[2]); !strings.Contains(billing, "billing "+holderGlyphs[b]) ||
			!strings.Contains(reports, strings.Repeat(holderGlyphs[b], 60)) {
			t.Fatalf("node-b's mark %s differs between strips:\n%s\n%s", holderGlyphs[b], billing, reports)
		}
	})
	t.Run("FreedWhenItLeavesTheWindow", func(t *testing.T) {
		var hm holderMarks
		terms := map[string][]collector.Term{"s": {
			closedTerm("s", 1, "node-x", 4*time.Minute, 3*time.Minute, "crashed", 0),
			closedTerm("s", 2, "node-y", 3*time.Minute, time.Minute, "crashed", 0),
		}}
		hm.update(terms, t0.Add(-timelineWindow), t0)
		y, _ := hm.mark("node-y")
		// Ten minutes on node-x is out of the window; node-y still in it.
		terms["s"] = append(terms["s"], *openTerm("s", 3, "node-z", "host-z", 1, 0, 0))
		later := t0.Add(3*time.Minute + 30*time.Second)
		hm.update(terms, later.Add(-timelineWindow), later)
		if _, ok := hm.mark("node-x"); ok {
			t.Fatal("node-x left the window but keeps its mark")
		}
		if y2, _ := hm.mark("node-y"); y2 != y {
			t.Fatalf("node-y's mark moved from %d to %d", y, y2)
		}
		if z, _ := hm.mark("node-z"); z != 0 {
			t.Fatalf("node-z got mark %d, want node-x's freed 0", z)
		}
	})
	t.Run("BeyondThePalette", func(t *testing.T) {
		m, _ := setup(t, bigSnapshot(10, 10))
		n := 0
		for i := range m.snap.Nodes {
			if _, ok := m.marks.mark(m.snap.Nodes[i].ID); ok {
				n++
			}
		}
		if n != holderTones {
			t.Fatalf("%d of 10 leaders have a mark, want the palette's %d", n, holderTones)
		}
	})
}

func TestTimelineFailover(t *testing.T) {
	// billing's epoch 42 ends a minute ago; node-c takes it on the second WAL
	// timeline (t2·1): the database failed over.
	s := healthySnapshot()
	nt := openTerm("billing", 1<<40+1, "node-c", "host-c", 4343, time.Minute, 30*time.Millisecond)
	s.Terms[0].ReleasedAt, s.Terms[0].EndedBy = t0.Add(-time.Minute), "crashed"
	s.Scopes[0].Leader, s.Scopes[0].Epoch, s.Scopes[0].OpenTerm = "node-c", nt.Epoch, nt
	s.Terms = append([]collector.Term{*nt}, s.Terms...)
	m, _ := setup(t, s)
	lines, legend := m.timelineLines(m.look, 2+7+1+60, 3, []string{"billing", "reports"})
	// 60 columns of 5 s: a minute ago is column 48, after the 10-column label.
	if axis := []rune(plain(lines[0])); len(axis) <= 58 || string(axis[58]) != failoverGlyph {
		t.Fatalf("no failover marker a minute ago on the axis:\n%s", plain(lines[0]))
	}
	if !strings.Contains(plain(legend), failoverGlyph+" db failover") {
		t.Fatalf("legend %q does not name the failover marker", plain(legend))
	}

	// The collector's failover event marks its time too.
	m, _ = setup(t, healthySnapshot())
	m.Update(eventsMsg{[]collector.Event{{At: t0.Add(-2 * time.Minute), Kind: collector.EventFailover, Epoch: 1 << 40}}})
	lines, _ = m.timelineLines(m.look, 2+7+1+60, 3, []string{"billing", "reports"})
	if axis := []rune(plain(lines[0])); len(axis) <= 46 || string(axis[46]) != failoverGlyph {
		t.Fatalf("no failover marker two minutes ago on the axis:\n%s", plain(lines[0]))
	}
}

// dbFailoverSnapshot is failovers(7) where the database failed over before the
// last one: node-b's term 49 was granted on WAL timeline 2 (t2·1).
func dbFailoverSnapshot() *collector.Snapshot {
	s := failovers(7)
	nt := s.Terms[0]
	nt.ID, nt.Epoch = 1<<40+1, 1<<40+1
	s.Terms[0] = nt
	s.Scopes[0].Epoch, s.Scopes[0].OpenTerm = nt.Epoch, &s.Terms[0]
	s.Timeline, s.EpochFloor = 2, 1<<40
	return s
}

// TestTimelineWithinTermsWindow: the collector carries every term that ended
// within its TermsWindow (by default); a timeline reaching further back would
// draw the older scopes' terms as no leader where they fell out of the
// snapshot.
func TestTimelineWithinTermsWindow(t *testing.T) {
	if timelineWindow > collector.DefaultTermsWindow {
		t.Fatalf("the timeline shows %v, the collector carries the terms of %v", timelineWindow, collector.DefaultTermsWindow)
	}
}
