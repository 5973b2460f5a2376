package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
)

// deadHolderSnapshot: every node of billing was killed. node-a's term 43 is
// still open on record (no successor closed it), its holder silent since
// its last heartbeat at t0-2m04s: the collector's Term.Silent, LastSign and
// HeldFor say so. reports is led as usual, by node-b.
func deadHolderSnapshot() *collector.Snapshot {
	s := healthySnapshot()
	s.Seq = 110
	last := t0.Add(-2*time.Minute - 4*time.Second)
	open := openTerm("billing", 43, "node-a", "host-a", 4343, 3*time.Minute, 18*time.Millisecond)
	open.Silent, open.LastSign, open.HeldFor = true, last, last.Sub(open.AcquiredAt)
	prev := closedTerm("billing", 42, "node-c", 4*time.Minute, 3*time.Minute, "crashed", 1800*time.Millisecond)
	prev.LastSign = open.AcquiredAt.Add(-open.HandoverGap)
	prev.HeldFor = prev.LastSign.Sub(prev.AcquiredAt)
	b := &s.Scopes[0]
	b.Epoch, b.Leader, b.LeaderHost, b.HolderPID, b.LockPIDs, b.Waiters = 43, "node-a", "host-a", 4343, nil, 0
	b.AcquiredAt, b.Tenure, b.OpenTerm = open.AcquiredAt, 3*time.Minute, open
	b.LastHeartbeat, b.HeartbeatAge = last, t0.Sub(last)
	b.LeaderlessFor, b.Followers, b.Verdict = t0.Sub(last), []string{}, collector.VerdictNoLeader
	nl := collector.Alert{Kind: collector.AlertNoLeader, Severity: collector.SeverityCritical, Scope: "billing",
		Summary: "billing has had no leader for 2m04s: term 43 of node-a is still open and no live candidate is left",
		Hint:    "every candidate is gone: start a node for this scope", Runbook: "docs/runbooks.md#no_leader", Since: last}
	b.Alerts = []collector.Alert{nl}
	s.Alerts = []collector.Alert{nl}
	s.Terms = []collector.Term{*open, prev, *s.Scopes[1].OpenTerm}
	s.Scopes[1].Followers = []string{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.ID == "node-b" {
			n.Scopes = []string{"reports"}
			continue
		}
		n.Leads, n.Live, n.State = []string{}, false, collector.NodeDown
		n.LastSeen, n.LastSeenAge = last, t0.Sub(last)
		n.Scopes = []string{"billing"}
	}
	return s
}

// outageSnapshot: the server was down for 44.5 s. reports' term 7 ended as
// database_failover: it was held until its holder's last heartbeat before
// the outage (t0-1m44.5s), and its successor, term 8, began 44.5 s later.
func outageSnapshot() *collector.Snapshot {
	s := healthySnapshot()
	s.Seq = 111
	last := t0.Add(-time.Minute - 44500*time.Millisecond)
	cur := openTerm("reports", 8, "node-b", "host-b", 5252, time.Minute, 44500*time.Millisecond)
	cur.LastSign = t0
	ended := closedTerm("reports", 7, "node-b", 3*time.Minute, time.Minute, "database_failover", 0)
	ended.LastSign, ended.HeldFor = last, last.Sub(ended.AcquiredAt)
	r := &s.Scopes[1]
	r.Epoch, r.HolderPID, r.LockPIDs, r.AcquiredAt, r.Tenure, r.OpenTerm = 8, 5252, []int{5252}, cur.AcquiredAt, time.Minute, cur
	s.Terms = append(s.Terms[:3], *cur, ended)
	return s
}

// TestDeadHolder: an open term whose holder is silent never reads
// "(leading)": the terms table says since when it is silent, HELD FOR ends
// at its last sign of life, the timeline strip stops there, and the scope
// detail names no leader.
func TestDeadHolder(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		t.Run(itoa(sz[0])+"x"+itoa(sz[1]), func(t *testing.T) {
			m, _ := setup(t, deadHolderSnapshot())
			m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			keys(m, "tab", "tab")
			s := screen(m)
			row := lineWith(s, `43\s+billing`)
			if !strings.Contains(row, "holder silent since 03:09:56") || strings.Contains(row, "(leading)") || !strings.Contains(row, " 56s ") {
				t.Errorf("billing's open term: %q, want held 56s and the holder silent since 03:09:56", row)
			}
			strip := stripOf(t, s, "billing")
			if i, ok := m.marks.mark("node-a"); !ok || !strings.HasSuffix(strings.TrimRight(strip, "·"), holderGlyphs[i]) || !strings.HasSuffix(strip, "·") {
				t.Errorf("billing's strip %q: want node-a's mark, then nobody up to now", strip)
			}
		})
	}
	t.Run("Detail", func(t *testing.T) {
		m, _ := setup(t, deadHolderSnapshot())
		keys(m, "enter")
		s := screen(m)
		if !strings.Contains(s, "leader      none · was node-a on host-a, epoch 43 from 03:09:00 · holder silent since 03:09:56") {
			t.Errorf("the detail does not say billing has no leader:\n%s", s)
		}
	})
}

// lineWith is the first line of s that matches the regular expression re.
func lineWith(s, re string) string {
	return regexp.MustCompile(`(?m)^.*` + re + `.*$`).FindString(s)
}

// stripOf is scope's timeline strip on screen, from its first mark.
func stripOf(t *testing.T, s, scope string) string {
	t.Helper()
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(strings.TrimPrefix(l, "▸"))
		if len(f) == 2 && f[0] == scope && strings.ContainsAny(f[1], "·"+strings.Join(holderGlyphs[:], "")) {
			return f[1]
		}
	}
	t.Fatalf("no strip of %s:\n%s", scope, s)
	return ""
}

// TestOutageIsAGap: after a 44.5 s outage the ended term's HELD FOR stops
// at its holder's last heartbeat and the next term's gap is the outage: held
// and gap add up to the time that passed, and the strip shows nobody
// leading during the outage.
func TestOutageIsAGap(t *testing.T) {
	m, _ := setup(t, outageSnapshot())
	keys(m, "tab", "tab")
	s := screen(m)
	ended, next := lineWith(s, `\b7\s+reports`), lineWith(s, `\b8\s+reports`)
	if !strings.Contains(ended, "1m15s") || !strings.Contains(ended, "database_failover") {
		t.Errorf("term 7: %q, want held 1m15s (to its last heartbeat), ended database_failover", ended)
	}
	if !strings.Contains(next, "44s") {
		t.Errorf("term 8: %q, want the 44s outage as its gap", next)
	}
	strip := stripOf(t, s, "reports")
	if inner := strings.Trim(strip, "·"); !strings.Contains(inner, "·") {
		t.Errorf("reports' strip %q: want a gap between the two terms of node-b", strip)
	}
}

// TestReplaySettlesTerms: a replayed moment shows its terms as a live read
// would: a term closed by its successor held until its holder's last
// heartbeat (the successor's start minus its gap), an open term whose holder
// is past its trust window silent since its last heartbeat.
func TestReplaySettlesTerms(t *testing.T) {
	h := replayHistory()
	crash := t0.Add(-14 * time.Minute)
	after := settled(h.At(t0.Add(-time.Minute)))
	for _, tm := range after.Terms {
		if tm.Scope == "billing" && tm.Epoch == 41 && (!tm.LastSign.Equal(crash) || tm.HeldFor != 16*time.Minute) {
			t.Errorf("after the takeover, term 41: last sign %v, held %v; want %v, 16m", tm.LastSign, tm.HeldFor, crash)
		}
	}
	raw := h.At(crash.Add(2 * time.Second))
	between := settled(raw)
	var found bool
	for _, tm := range between.Terms {
		if tm.Scope == "billing" && tm.Epoch == 41 {
			found = true
			if !tm.Open() || !tm.Silent || !tm.LastSign.Equal(crash) || tm.HeldFor != 16*time.Minute {
				t.Errorf("before the takeover, term 41: open %v silent %v last sign %v held %v; want silent since %v, 16m",
					tm.Open(), tm.Silent, tm.LastSign, tm.HeldFor, crash)
			}
		}
	}
	if !found {
		t.Fatal("no term 41 before the takeover")
	}
	if sc, _ := between.Scope("billing"); sc.OpenTerm == nil || !sc.OpenTerm.Silent {
		t.Errorf("billing's open term is not silent: %+v", sc.OpenTerm)
	}
	for _, tm := range raw.Terms {
		if tm.Silent || !tm.LastSign.IsZero() {
			t.Errorf("settled modified the snapshot it was given: %+v", tm)
		}
	}
}

// TestGapBefore: the gap is the time without a leader before the row's term
// began: its column is named so, stands just before the term's start (not
// beside the ENDED BY of the row, which ended after it), and the help's
// legend says what it measures.
func TestGapBefore(t *testing.T) {
	m, _ := setup(t, outageSnapshot())
	keys(m, "tab", "tab")
	s := screen(m)
	head := lineWith(s, `EPOCH\s+SCOPE`)
	if !regexp.MustCompile(`LEADER\s+GAP BEFORE\s+STARTED\s+HELD FOR\s+ENDED BY\s*$`).MatchString(head) {
		t.Errorf("terms header %q: want GAP BEFORE between LEADER and STARTED, ENDED BY last", head)
	}
	if row := lineWith(s, `\b8\s+reports`); !regexp.MustCompile(`node-b\s+44s\s+03:11:00\s`).MatchString(row) {
		t.Errorf("term 8: %q, want its 44s gap just before its start", row)
	}
	m.openOverlay(overlayHelp)
	m.mode.query = "gap before"
	help := strings.Join(strings.Fields(ansi.Strip(strings.Join(m.helpLines(120, 40), " "))), " ") // wrapped: its words
	if !strings.Contains(help, "GAP BEFORE") || !strings.Contains(help, "predecessor's last sign of life to its start") {
		t.Errorf("the help's legend does not explain GAP BEFORE:\n%s", help)
	}
}

// TestDegradedSaysWhy: a scope DEGRADED by a late heartbeat alone (no alert)
// says so in its ALERTS cell and in its detail, instead of "—".
func TestDegradedSaysWhy(t *testing.T) {
	s := healthySnapshot()
	b := &s.Scopes[0]
	b.Verdict, b.HeartbeatAge, b.LastHeartbeat = collector.VerdictDegraded, 1200*time.Millisecond, t0.Add(-1200*time.Millisecond)
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		m, _ := setup(t, s)
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		if row := lineWith(screen(m), `billing\s+▲ DEGRADED`); !strings.HasSuffix(strings.TrimSpace(row), "hb late") {
			t.Errorf("%dx%d: billing's row %q: want the reason in ALERTS", sz[0], sz[1], row)
		}
		keys(m, "enter")
		if v := lineWith(screen(m), `verdict\s`); !strings.Contains(v, "▲ DEGRADED · heartbeat late: 1.2s old, over 2 × its 0.5s interval") {
			t.Errorf("%dx%d: detail verdict %q: want why", sz[0], sz[1], v)
		}
	}
}
