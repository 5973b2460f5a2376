package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
)

// Replayer reads the history of a window of time around an instant
// (collector.ReadHistory on a connection of its own). The dashboard steps
// through a window in memory and asks for another only past its edges.
type Replayer interface {
	History(ctx context.Context, at time.Time) (*collector.History, error)
}

// replayEvents is how many events of the history the replayed log shows.
const replayEvents = 500

// replayReadTimeout bounds one read of a window of history.
const replayReadTimeout = 30 * time.Second

// replayState is the dashboard's replay mode: the window of history it steps
// through and the instant it shows. While it lasts, the collector's snapshots
// are kept aside (pending), its events buffered, and no action runs.
type replayState struct {
	hist    *collector.History
	at      time.Time
	loading bool

	live       eventLog          // the live event log, back when going live
	liveEvents []collector.Event // live events received while replaying
}

// replayMsg carries a window of history read for the instant at; step -1
// then shows the transition before at (entering replay from live).
type replayMsg struct {
	hist *collector.History
	at   time.Time
	step int
	err  error
}

// replayKey handles the replay keys, in either mode, and refuses what must
// not happen while replaying. done: the key was handled.
func (m *Model) replayKey(msg tea.KeyPressMsg) (cmd tea.Cmd, done bool) {
	k := m.keys
	switch {
	case key.Matches(msg, k.ReplayPrev):
		return m.stepReplay(-1), true
	case key.Matches(msg, k.ReplayNext):
		return m.stepReplay(+1), true
	case key.Matches(msg, k.Live):
		if m.replay == nil {
			m.setStatus("already live", toneNone)
		} else {
			m.goLive()
		}
		return nil, true
	}
	if m.replay == nil {
		return nil, false
	}
	live := k.Live.Help().Key
	for _, f := range m.keys.Faults {
		if key.Matches(msg, f) {
			m.setStatus("replaying: fault keys act on the live cluster only ("+live+" goes live)", toneWarn)
			return nil, true
		}
	}
	switch {
	case key.Matches(msg, k.Evict), key.Matches(msg, k.Resign), key.Matches(msg, k.Handover):
		m.setStatus("replaying: no actions on a past moment ("+live+" goes live)", toneWarn)
		return nil, true
	case key.Matches(msg, k.Pause), key.Matches(msg, k.Refresh), key.Matches(msg, k.Slower), key.Matches(msg, k.Faster):
		m.setStatus("replaying: the collector's updates wait until live ("+live+")", toneWarn)
		return nil, true
	}
	return nil, false
}

// enterReplay shows the instant at of hist, keeping the live view aside.
func (m *Model) enterReplay(hist *collector.History, at time.Time) {
	if m.replay == nil {
		m.replay = &replayState{live: m.events, liveEvents: m.pausedEvents}
		m.paused, m.pausedEvents, m.pausedDropped = false, nil, 0
	}
	m.confirm = nil
	m.replay.hist, m.replay.at, m.replay.loading = hist, at, false
	m.showReplay()
}

// showReplay rebuilds the shown instant: its snapshot and its event log.
func (m *Model) showReplay() {
	r := m.replay
	m.apply(settled(r.hist.At(r.at)))
	m.events = newEventLog()
	m.events.add(r.hist.Events(r.at, replayEvents)...)
}

// goLive leaves replay: the collector's latest snapshot, the live event log
// with what arrived meanwhile.
func (m *Model) goLive() {
	r := m.replay
	m.replay = nil
	m.events = r.live
	m.events.add(r.liveEvents...)
	snap := m.pending
	if snap == nil {
		snap = m.feed.Snapshot()
	}
	m.pending = nil
	if snap != nil {
		m.apply(snap)
	} else {
		m.snap = nil
		m.invalidate()
	}
	m.setStatus(fmt.Sprintf("live again: %s appended", plural(len(r.liveEvents), "event")), toneNone)
}

// stepReplay shows the previous (dir < 0) or next transition; from live,
// the previous one enters replay. Past the window's edge it reads the next
// window.
func (m *Model) stepReplay(dir int) tea.Cmd {
	r := m.replay
	if r == nil {
		if dir > 0 {
			m.setStatus("live: nothing after now ("+m.keys.ReplayPrev.Help().Key+" steps back)", toneNone)
			return nil
		}
		if m.opts.Replay == nil || m.snap == nil {
			m.setStatus("replay is not available here", toneWarn)
			return nil
		}
		m.setStatus("reading the history…", toneNone)
		return m.readHistory(m.snap.DBTime, -1)
	}
	if r.loading {
		return nil
	}
	h := r.hist
	target := h.Next(r.at)
	if dir < 0 {
		target = h.Prev(r.at)
	}
	switch {
	case target.IsZero() && dir < 0:
		m.setStatus("no earlier transition recorded", toneNone)
		return nil
	case target.IsZero():
		m.setStatus("no later transition recorded ("+m.keys.Live.Help().Key+" goes live)", toneNone)
		return nil
	case h.Contains(target):
		r.at = target
		m.showReplay()
		m.setStatus("", toneNone)
		return nil
	case m.opts.Replay == nil:
		m.setStatus("the next transition lies outside the history read", toneWarn)
		return nil
	}
	r.loading = true
	m.setStatus("reading the history around "+fmtStamp(target)+"…", toneNone)
	return m.readHistory(target, 0)
}

// readHistory reads the window around at, off the update loop.
func (m *Model) readHistory(at time.Time, step int) tea.Cmd {
	rep, ctx := m.opts.Replay, m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, replayReadTimeout)
		defer cancel()
		h, err := rep.History(ctx, at)
		return replayMsg{hist: h, at: at, step: step, err: err}
	}
}

// receiveReplay shows a window of history read by readHistory.
func (m *Model) receiveReplay(msg replayMsg) {
	if msg.err != nil {
		if m.replay != nil {
			m.replay.loading = false
		}
		m.setStatus("reading the history failed: "+msg.err.Error(), toneBad)
		return
	}
	at := msg.at
	if msg.step < 0 {
		if at = msg.hist.Prev(at); at.IsZero() {
			m.setStatus("no transition recorded before now", toneNone)
			return
		}
	}
	m.enterReplay(msg.hist, at)
}

// replayBanner is the line that tells a replayed frame from a live one:
// "⏮ REPLAY 03:12:04.250 — 14m ago · heartbeat ages, locks and sessions
// n/a", the date shown when it is not today's.
func replayBanner(info *collector.ReplayInfo, now time.Time, w int) string {
	at := info.At
	stamp := at.Format("15:04:05.000")
	if y, mo, d := now.Date(); at.Year() != y || at.Month() != mo || at.Day() != d {
		stamp = at.Format("2006-01-02 15:04:05.000")
	}
	line := "⏮ REPLAY " + stamp + " — " + human.Cell(now.Sub(info.At)) + " ago"
	for _, more := range []string{" · NOT LIVE", " · heartbeat ages, locks and sessions not rebuilt (n/a)"} {
		if textWidth(line+more) <= w-2 {
			line += more
		}
	}
	return " " + line + " "
}

// replayHeader is the header while replaying: the banner, the keys that
// step and go live, then the verdict line of the replayed instant.
func (m *Model) replayHeader(w int) []string {
	st := m.look
	info := m.snap.Replay
	banner := st.replay.Render(fitLine(replayBanner(info, m.opts.Now(), w), w))
	var steps []string
	if !info.Prev.IsZero() {
		steps = append(steps, m.keys.ReplayPrev.Help().Key+" "+fmtStamp(info.Prev))
	} else {
		steps = append(steps, m.keys.ReplayPrev.Help().Key+" —")
	}
	if !info.Next.IsZero() {
		steps = append(steps, m.keys.ReplayNext.Help().Key+" "+fmtStamp(info.Next))
	} else {
		steps = append(steps, m.keys.ReplayNext.Help().Key+" —")
	}
	steps = append(steps, m.keys.Live.Help().Key+" live", "actions off")
	if m.replay != nil && m.replay.loading {
		steps = append(steps, "reading…")
	}
	nav := st.render(toneWarn, strings.Join(steps, " · "))
	lines := []string{banner, fitLine(nav, w), m.verdictLine(w)}
	for _, n := range info.Notes {
		lines = append(lines, st.render(toneWarn, fitLine("  note: "+n, w)))
	}
	return lines
}

// replayKeysHelp is the footer while replaying (in a detail view: how to
// leave it first). No action is offered: none runs on a past moment.
func (k keyMap) replayKeysHelp(detail bool) []key.Binding {
	if detail {
		return []key.Binding{brief("back", k.Back), k.scrollBrief(true), brief("prev", k.ReplayPrev), brief("next", k.ReplayNext),
			brief("live", k.Live), brief("help", k.Help), brief("quit", k.Quit)}
	}
	return []key.Binding{brief("prev", k.ReplayPrev), brief("next", k.ReplayNext), brief("live", k.Live),
		brief("help", k.Help), brief("quit", k.Quit), brief("pane", k.NextPane), brief("detail", k.Enter),
		brief("filter", k.Filter), brief("problems", k.Problems), brief("sort", k.Sort, k.Reverse)}
}

// settled is the replayed snapshot s with its terms as a live read gives
// them (collector.History.At leaves them as recorded, held until the
// instant): each term's last sign of life, whether an open one's holder was
// silent at the instant, and HeldFor ending at the last sign, so that a crash
// or a database outage reads as a gap, not as time held. s is not modified.
func settled(s *collector.Snapshot) *collector.Snapshot {
	if s == nil || s.Replay == nil {
		return s
	}
	out := *s
	at := s.DBTime
	out.Scopes = slices.Clone(s.Scopes)
	scopes := make(map[string]*collector.Scope, len(out.Scopes))
	for i := range out.Scopes {
		sc := &out.Scopes[i]
		scopes[keyOf(sc.Database, sc.Name)] = sc
		if sc.OpenTerm != nil {
			t := *sc.OpenTerm
			settleOpen(&t, sc, at)
			t.HeldFor = heldFor(t, at)
			sc.OpenTerm = &t
		}
	}
	out.Terms = slices.Clone(s.Terms)
	newer := map[string]*collector.Term{} // newest first: a term's successor comes before it
	for i := range out.Terms {
		t := &out.Terms[i]
		k := keyOf(t.Database, t.Scope)
		switch {
		case t.Open():
			settleOpen(t, scopes[k], at)
		case !t.LastSign.IsZero():
		case t.EndedBy.Clean():
			t.LastSign = t.ReleasedAt
		default:
			// Closed by its successor: the holder's last heartbeat is the
			// successor's start minus its handover gap.
			if n := newer[k]; n != nil && n.Epoch > t.Epoch && n.HandoverGap > 0 {
				t.LastSign = n.AcquiredAt.Add(-n.HandoverGap)
			}
		}
		t.HeldFor = heldFor(*t, at)
		newer[k] = t
	}
	return &out
}

// settleOpen sets an open term's last sign of life and whether its holder is
// silent, from its scope at the instant: led then (LeaderLive), its last sign
// is the instant; else the last heartbeat on record.
func settleOpen(t *collector.Term, sc *collector.Scope, at time.Time) {
	if sc != nil && sc.Epoch == t.Epoch && sc.LeaderLive {
		t.LastSign, t.Silent = at, false
		return
	}
	t.Silent = true
	if sc != nil && sc.Epoch == t.Epoch && !sc.LastHeartbeat.IsZero() {
		t.LastSign = sc.LastHeartbeat
	}
}

// heldFor is how long t's holder led, as collector.Term.HeldFor says it:
// up to now while it leads, else up to its last sign of life (its release
// where that is not known).
func heldFor(t collector.Term, now time.Time) time.Duration {
	switch {
	case t.Open() && !t.Silent:
		return max(0, now.Sub(t.AcquiredAt))
	case !t.LastSign.IsZero():
		end := t.LastSign
		if !t.ReleasedAt.IsZero() && t.ReleasedAt.Before(end) {
			end = t.ReleasedAt
		}
		return max(0, end.Sub(t.AcquiredAt))
	case t.Open():
		return 0 // silent, and never seen leading
	}
	return max(0, t.ReleasedAt.Sub(t.AcquiredAt))
}
