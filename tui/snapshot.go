package tui

import (
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
)

// Poll interval bounds and steps for + and -.
const (
	minInterval = 100 * time.Millisecond
	maxInterval = 60 * time.Second
)

var intervalSteps = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
	15 * time.Second, 30 * time.Second, 60 * time.Second,
}

const (
	eventBuffer    = 256  // Feed.Subscribe buffer
	pausedEventCap = 5000 // events kept while paused; older ones are counted, not kept
	hbSamples      = 120  // heartbeat-age samples kept per scope for the sparkline
)

// Messages from the feed and the clock.
type (
	snapshotMsg   struct{ snap *collector.Snapshot }
	eventsMsg     struct{ events []collector.Event }
	feedClosedMsg struct{}
	eventsEndMsg  struct{}
	tickMsg       struct{}
	noteMsg       struct{ text string }
)

func (m *Model) waitSnapshot() tea.Cmd {
	ctx, ch := m.ctx, m.snapCh
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-ch:
			if !ok {
				return feedClosedMsg{}
			}
			for { // latest wins
				select {
				case s2, ok := <-ch:
					if !ok {
						return snapshotMsg{s} // the close is seen on the next wait
					}
					s = s2
				default:
					return snapshotMsg{s}
				}
			}
		}
	}
}

func (m *Model) waitEvents() tea.Cmd {
	ctx, ch := m.ctx, m.evCh
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return eventsEndMsg{}
			}
			batch := []collector.Event{e}
			for len(batch) < 512 {
				select {
				case e, ok := <-ch:
					if !ok {
						return eventsMsg{batch}
					}
					batch = append(batch, e)
				default:
					return eventsMsg{batch}
				}
			}
			return eventsMsg{batch}
		}
	}
}

// tick wakes the model every second so that ages keep counting; unlike
// tea.Tick it returns as soon as the dashboard stops.
func (m *Model) tick() tea.Cmd {
	ctx := m.ctx
	return func() tea.Msg {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return tickMsg{}
		}
	}
}

// waitNote delivers the next line of Options.Notes.
func (m *Model) waitNote() tea.Cmd {
	ctx, ch := m.ctx, m.opts.Notes
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case text, ok := <-ch:
			if !ok {
				return nil
			}
			return noteMsg{text}
		}
	}
}

// apply puts a snapshot on screen.
func (m *Model) apply(s *collector.Snapshot) {
	m.snap = s
	m.keys.fleet = len(s.Databases) > 1
	if s.Seq != m.lastSeq || m.termsByScope == nil {
		m.lastSeq = s.Seq
		m.indexSnapshot(s)
	}
	m.invalidate()
}

// indexSnapshot derives what every render needs from a new snapshot.
func (m *Model) indexSnapshot(s *collector.Snapshot) {
	m.termsByScope = map[string][]collector.Term{}
	seen := map[string]map[int64]bool{}
	add := func(t collector.Term) {
		k := keyOf(t.Database, t.Scope)
		if seen[k] == nil {
			seen[k] = map[int64]bool{}
		}
		if seen[k][t.Epoch] {
			return
		}
		seen[k][t.Epoch] = true
		m.termsByScope[k] = append(m.termsByScope[k], t)
	}
	for i := len(s.Terms) - 1; i >= 0; i-- { // newest first → oldest first
		add(s.Terms[i])
	}
	for _, sc := range s.Scopes {
		if sc.OpenTerm != nil {
			add(*sc.OpenTerm)
		}
	}
	for _, ts := range m.termsByScope {
		sortTermsByStart(ts)
	}
	now := m.timelineNow()
	m.marks.update(m.termsByScope, now.Add(-timelineWindow), now)

	m.nodeAlerts = map[string]int{}
	for _, a := range s.Alerts {
		if a.Node != "" {
			m.nodeAlerts[keyOf(a.Database, a.Node)]++
		}
	}

	m.unknownCandidates = map[string][]string{}
	if s.Replay != nil {
		leader := map[string]string{}
		for _, sc := range s.Scopes {
			leader[keyOf(sc.Database, sc.Name)] = sc.Leader
		}
		for _, n := range s.Nodes {
			if n.State != collector.NodeUnknown {
				continue
			}
			for _, sc := range n.Scopes {
				if k := keyOf(n.Database, sc); leader[k] != n.ID {
					m.unknownCandidates[k] = append(m.unknownCandidates[k], n.ID)
				}
			}
		}
		return // replayed: no heartbeat ages to sample
	}
	live := map[string]bool{}
	for _, sc := range s.Scopes {
		k := keyOf(sc.Database, sc.Name)
		live[k] = true
		r := m.hb[k]
		if r == nil {
			r = newRing(hbSamples)
			m.hb[k] = r
		}
		if sc.Leader != "" {
			r.push(sc.HeartbeatAge)
		} else {
			r.push(-1) // no holder: a gap in the sparkline
		}
	}
	for name := range m.hb {
		if !live[name] {
			delete(m.hb, name)
		}
	}
}

// stale reports whether the collector says the data may be out of date.
func (m *Model) stale() bool {
	if m.snap == nil {
		return false
	}
	h := m.snap.Health
	// An error since the last good read; Health keeps the last error after the
	// reads recover, for the record.
	return h.Source == collector.SourceDisconnected || (h.LastError != "" && !h.LastErrorAt.Before(h.LastPoll))
}

func (m *Model) togglePause() {
	m.paused = !m.paused
	if m.paused {
		m.setStatus("paused: snapshots are not applied, events are kept", toneWarn)
		return
	}
	if m.pending != nil {
		m.apply(m.pending)
		m.pending = nil
	}
	n := len(m.pausedEvents)
	m.events.add(m.pausedEvents...)
	m.pausedEvents = nil
	msg := fmt.Sprintf("resumed: %s appended", plural(n, "buffered event"))
	if m.pausedDropped > 0 {
		msg += fmt.Sprintf(", %d older ones dropped", m.pausedDropped)
	}
	m.pausedDropped = 0
	m.setStatus(msg, toneNone)
}

func (m *Model) receiveEvents(evs []collector.Event) {
	if r := m.replay; r != nil {
		r.liveEvents = append(r.liveEvents, evs...)
		if over := len(r.liveEvents) - pausedEventCap; over > 0 {
			r.liveEvents = append(r.liveEvents[:0:0], r.liveEvents[over:]...)
		}
		return
	}
	if !m.paused {
		m.events.add(evs...)
		return
	}
	m.pausedEvents = append(m.pausedEvents, evs...)
	if over := len(m.pausedEvents) - pausedEventCap; over > 0 {
		m.pausedDropped += over
		m.pausedEvents = append(m.pausedEvents[:0:0], m.pausedEvents[over:]...)
	}
}

// stepInterval moves the poll interval one step along intervalSteps.
func (m *Model) stepInterval(dir int) {
	cur := m.interval
	next := cur
	if dir > 0 {
		next = maxInterval
		for _, s := range intervalSteps {
			if s > cur {
				next = s
				break
			}
		}
	} else {
		next = minInterval
		for i := len(intervalSteps) - 1; i >= 0; i-- {
			if intervalSteps[i] < cur {
				next = intervalSteps[i]
				break
			}
		}
	}
	next = max(minInterval, min(maxInterval, next))
	if next == cur {
		m.setStatus(fmt.Sprintf("poll interval stays %s (bounds %s..%s)", fmtInterval(cur), fmtInterval(minInterval), fmtInterval(maxInterval)), toneWarn)
		return
	}
	m.interval = next
	m.feed.SetPollInterval(next)
	m.setStatus("poll interval "+fmtInterval(next), toneNone)
}
