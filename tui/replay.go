package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/internal/human"
)

// Replayer reads the history of a window of time around an instant
// (collector.ReadHistory on a connection of its own, rebuilt by replay.New). The dashboard steps
// through a window in memory and asks for another only past its edges.
type Replayer interface {
	History(ctx context.Context, at time.Time) (*replay.History, error)
}

// ReplayFleet is Options.Replay over a fleet: the Replayer of each database,
// in the fleet's order. The dashboard replays them side by side, each row
// naming its database, and steps through the transitions of all of them.
// Its own History refuses: each database has a history of its own.
type ReplayFleet []DatabaseReplayer

// DatabaseReplayer is one database of a ReplayFleet: the fleet member's name
// and the Replayer of its history.
type DatabaseReplayer struct {
	Database string
	Replayer Replayer
}

// errFleetHistory is ReplayFleet.History's refusal.
var errFleetHistory = errors.New("a fleet's history is read per database")

// History refuses (see ReplayFleet).
func (ReplayFleet) History(context.Context, time.Time) (*replay.History, error) {
	return nil, errFleetHistory
}

// DatabaseHistory is a window of history read for one database: Database
// names the fleet member ("" for one database); Err, when the read failed
// (History nil), shows the database as unreachable.
type DatabaseHistory struct {
	Database string
	History  *replay.History
	Err      error
}

// Replayed is the picture of the instant at rebuilt from windows of history,
// one per database, and its last n events, oldest first: what a replaying
// dashboard shows, for `pgleader top --at --once`. With one database (its
// Database "") it is that database's snapshot; over several, every scope,
// node, term, alert and event names its database, and a database whose
// history could not be read is unreachable in Snapshot.Databases. Terms are
// settled as a live read gives them: each held until its holder's last sign
// of life, an open one whose holder leads no more Silent.
func Replayed(hs []DatabaseHistory, at time.Time, n int) (*collector.Snapshot, []collector.Event) {
	return replaySnapshot(hs, at, 0), replayedEvents(hs, at, n)
}

// replayEvents is how many events of the history the replayed log shows.
const replayEvents = 500

// replayReadTimeout bounds one read of a window of history.
const replayReadTimeout = 30 * time.Second

// replayState is the dashboard's replay mode: the windows of history it
// steps through (one per database) and the instant it shows. While it lasts,
// the collector's snapshots are kept aside (pending), its events buffered,
// and no action runs.
type replayState struct {
	dbs     []DatabaseHistory
	at      time.Time
	loading bool
	seq     uint64 // the replayed snapshots' Seq

	live       eventLog          // the live event log, back when going live
	liveEvents []collector.Event // live events received while replaying
}

// replayMsg carries windows of history read for the instant at (the
// databases read; the others keep theirs); step -1 then shows the transition
// before at (entering replay from live).
type replayMsg struct {
	dbs  []DatabaseHistory
	at   time.Time
	step int
}

// enterReplay shows the instant at of the windows dbs, keeping the live
// view aside.
func (m *Model) enterReplay(dbs []DatabaseHistory, at time.Time) {
	if m.replay == nil {
		m.replay = &replayState{live: m.events, liveEvents: m.pausedEvents}
		m.paused, m.pausedEvents, m.pausedDropped = false, nil, 0
	}
	if m.mode.overlay == overlayConfirm {
		m.closeOverlay() // the question was about the live cluster
	}
	m.replay.dbs, m.replay.at, m.replay.loading = dbs, at, false
	m.showReplay()
}

// showReplay rebuilds the shown instant: its snapshot and its event log.
func (m *Model) showReplay() {
	r := m.replay
	r.seq++
	m.apply(replaySnapshot(r.dbs, r.at, r.seq))
	m.events = newEventLog()
	m.events.add(replayedEvents(r.dbs, r.at, replayEvents)...)
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

// replayers are the Replayers of Options.Replay, one per database (one with
// Database "" over one database); nil without replay.
func (m *Model) replayers() []DatabaseReplayer {
	switch r := m.opts.Replay.(type) {
	case nil:
		return nil
	case ReplayFleet:
		return r
	default:
		return []DatabaseReplayer{{Replayer: r}}
	}
}

// stepReplay shows the previous (dir < 0) or next transition of any
// database; from live, the previous one enters replay. Past the edge of a
// database's window it reads that database's next window.
func (m *Model) stepReplay(dir int) tea.Cmd {
	r := m.replay
	if r == nil {
		if dir > 0 {
			m.setStatus("live: nothing after now ("+m.keys.ReplayPrev.Help().Key+" steps back)", toneNone)
			return nil
		}
		reps := m.replayers()
		if reps == nil || m.snap == nil {
			m.setStatus("replay is not available here", toneWarn)
			return nil
		}
		at := m.snap.DBTime
		if at.IsZero() {
			at = m.opts.Now()
		}
		m.setStatus("reading the history…", toneNone)
		return m.readHistory(reps, at, -1)
	}
	if r.loading {
		return nil
	}
	target := visibleTransition(r.dbs, r.at, dir)
	switch {
	case target.IsZero() && dir < 0:
		m.setStatus("no earlier transition recorded", toneNone)
		return nil
	case target.IsZero():
		m.setStatus("no later transition recorded ("+m.keys.Live.Help().Key+" goes live)", toneNone)
		return nil
	}
	// The databases whose window lacks the target are read again; one whose
	// history could not be read is tried again with them.
	var need, failed []DatabaseReplayer
	reps := map[string]Replayer{}
	for _, dr := range m.replayers() {
		reps[dr.Database] = dr.Replayer
	}
	for _, db := range r.dbs {
		rep := reps[db.Database]
		switch {
		case db.History == nil && rep != nil:
			failed = append(failed, DatabaseReplayer{db.Database, rep})
		case db.History != nil && !db.History.Contains(target):
			if rep == nil {
				m.setStatus("the next transition lies outside the history read", toneWarn)
				return nil
			}
			need = append(need, DatabaseReplayer{db.Database, rep})
		}
	}
	if len(need) == 0 {
		r.at = target
		m.showReplay()
		m.setStatus("", toneNone)
		return nil
	}
	r.loading = true
	m.setStatus("reading the history around "+fmtStamp(target)+"…", toneNone)
	return m.readHistory(append(need, failed...), target, 0)
}

// visibleTransition is the transition a step in direction dir goes to.
// Transitions less than a millisecond apart (a claim's term row and its
// audit row) are one instant on screen, which shows milliseconds: a step
// leaves the run of them at at, and lands on the last of the next run, where
// all of its rows are in the picture (zero: none).
func visibleTransition(dbs []DatabaseHistory, at time.Time, dir int) time.Time {
	const same = time.Millisecond
	step := nextTransition
	if dir < 0 {
		step = prevTransition
	}
	cur, t := at, step(dbs, at)
	for i := 0; i < 100 && !t.IsZero() && t.Sub(cur).Abs() < same; i++ {
		cur, t = t, step(dbs, t) // still at's run
	}
	if dir > 0 {
		for i := 0; i < 100 && !t.IsZero(); i++ {
			n := nextTransition(dbs, t)
			if n.IsZero() || n.Sub(t) >= same {
				break
			}
			t = n
		}
	}
	return t
}

// prevTransition is the last transition before at in any database's
// history (zero: none).
func prevTransition(dbs []DatabaseHistory, at time.Time) time.Time {
	var out time.Time
	for _, db := range dbs {
		if db.History != nil {
			if p := db.History.Prev(at); p.After(out) {
				out = p
			}
		}
	}
	return out
}

// nextTransition is the first transition after at in any database's
// history (zero: none).
func nextTransition(dbs []DatabaseHistory, at time.Time) time.Time {
	var out time.Time
	for _, db := range dbs {
		if db.History != nil {
			if n := db.History.Next(at); !n.IsZero() && (out.IsZero() || n.Before(out)) {
				out = n
			}
		}
	}
	return out
}

// readHistory reads the windows around at of the databases of reps,
// concurrently, off the update loop.
func (m *Model) readHistory(reps []DatabaseReplayer, at time.Time, step int) tea.Cmd {
	ctx := m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, replayReadTimeout)
		defer cancel()
		out := make([]DatabaseHistory, len(reps))
		var wg sync.WaitGroup
		for i, dr := range reps {
			wg.Go(func() {
				h, err := dr.Replayer.History(ctx, at)
				out[i] = DatabaseHistory{Database: dr.Database, History: h, Err: err}
			})
		}
		wg.Wait()
		return replayMsg{dbs: out, at: at, step: step}
	}
}

// receiveReplay shows windows of history read by readHistory: each replaces
// its database's; entering from live, they are every database's.
func (m *Model) receiveReplay(msg replayMsg) {
	var errs []string
	for _, db := range msg.dbs {
		if db.Err != nil {
			e := db.Err.Error()
			if db.Database != "" {
				e = db.Database + ": " + e
			}
			errs = append(errs, e)
		}
	}
	if len(errs) == len(msg.dbs) {
		if m.replay != nil {
			m.replay.loading = false
		}
		m.setStatus("reading the history failed: "+strings.Join(errs, "; "), toneBad)
		return
	}
	dbs := msg.dbs
	if m.replay != nil && msg.step >= 0 {
		dbs = slices.Clone(m.replay.dbs)
		for _, read := range msg.dbs {
			if i := slices.IndexFunc(dbs, func(d DatabaseHistory) bool { return d.Database == read.Database }); i >= 0 {
				dbs[i] = read
			}
		}
	}
	at := msg.at
	if msg.step < 0 {
		if at = prevTransition(dbs, at); at.IsZero() {
			m.setStatus("no transition recorded before now", toneNone)
			return
		}
	}
	m.enterReplay(dbs, at)
	if len(errs) > 0 {
		m.setStatus("reading the history failed for "+strings.Join(errs, "; "), toneBad)
	} else {
		m.setStatus("", toneNone) // "reading the history…" is over
	}
}

// replaySnapshot is the snapshot of the instant at rebuilt from dbs (see
// Replayed), its Seq seq (0: the first history's count).
func replaySnapshot(dbs []DatabaseHistory, at time.Time, seq uint64) *collector.Snapshot {
	if len(dbs) == 1 && dbs[0].Database == "" && dbs[0].History != nil {
		s := settled(dbs[0].History.At(at))
		if seq > 0 {
			s.Seq = seq
		}
		return s
	}
	out := &collector.Snapshot{Seq: max(seq, 1), At: at, DBTime: at, FenceRejected: map[string]uint64{},
		Health: collector.Health{Source: collector.SourceReplay, SlotLagBytes: -1},
		Replay: &collector.ReplayInfo{At: at, Unknown: slices.Clone(replay.Unknown)},
		Scopes: []collector.Scope{}, Nodes: []collector.Node{}, Terms: []collector.Term{}, Alerts: []collector.Alert{},
		Databases: make([]collector.DatabaseState, 0, len(dbs))}
	info := out.Replay
	info.Prev, info.Next = prevTransition(dbs, at), nextTransition(dbs, at)
	for _, db := range dbs {
		st := collector.DatabaseState{Name: db.Database, Status: collector.DatabaseUp, Source: collector.SourceReplay}
		if db.History == nil {
			st.Status, st.Reason = collector.DatabaseUnreachable, "its history could not be read"
			if db.Err != nil {
				st.Reason += ": " + db.Err.Error()
			}
			out.Databases = append(out.Databases, st)
			continue
		}
		h := db.History
		s := settled(h.At(at))
		st.LastRead, st.Database = at, s.Health.Database
		for _, n := range s.Replay.Notes {
			info.Notes = append(info.Notes, db.Database+": "+n)
		}
		if info.DBNow.IsZero() || h.DBNow.After(info.DBNow) {
			info.DBNow = h.DBNow
		}
		if info.From.IsZero() || h.From.After(info.From) {
			info.From = h.From // the fleet's window: where every history is read
		}
		if info.To.IsZero() || h.To.Before(info.To) {
			info.To = h.To
		}
		if !h.Earliest.IsZero() && (info.Earliest.IsZero() || h.Earliest.Before(info.Earliest)) {
			info.Earliest = h.Earliest
		}
		out.Retired += s.Retired
		for _, sc := range s.Scopes {
			sc.Database = db.Database
			if sc.OpenTerm != nil {
				t := *sc.OpenTerm
				t.Database = db.Database
				sc.OpenTerm = &t
			}
			sc.Alerts = tagAlerts(sc.Alerts, db.Database)
			if sc.Verdict.Troubled() {
				st.Troubled++
			}
			out.Scopes = append(out.Scopes, sc)
		}
		st.Scopes = len(s.Scopes)
		for _, n := range s.Nodes {
			n.Database = db.Database
			out.Nodes = append(out.Nodes, n)
		}
		for _, t := range s.Terms {
			t.Database = db.Database
			out.Terms = append(out.Terms, t)
		}
		out.Alerts = append(out.Alerts, tagAlerts(s.Alerts, db.Database)...)
		out.Databases = append(out.Databases, st)
	}
	slices.SortStableFunc(out.Terms, func(a, b collector.Term) int { return b.AcquiredAt.Compare(a.AcquiredAt) })
	slices.SortStableFunc(out.Alerts, func(a, b collector.Alert) int {
		crit := func(a collector.Alert) bool { return a.Severity == collector.SeverityCritical }
		if crit(a) != crit(b) {
			if crit(a) {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return out
}

// tagAlerts is as, each naming database db.
func tagAlerts(as []collector.Alert, db string) []collector.Alert {
	out := slices.Clone(as)
	for i := range out {
		out[i].Database = db
	}
	return out
}

// replayedEvents is the last n events of dbs up to the instant at, oldest
// first, each naming its database over a fleet.
func replayedEvents(dbs []DatabaseHistory, at time.Time, n int) []collector.Event {
	var evs []collector.Event
	for _, db := range dbs {
		if db.History == nil {
			continue
		}
		for _, e := range db.History.Events(at, n) {
			e.Database = db.Database
			if e.Alert != nil {
				a := *e.Alert
				a.Database = db.Database
				e.Alert = &a
			}
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b collector.Event) int { return a.At.Compare(b.At) })
	if n > 0 && len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	return evs
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
	prev, next := info.Prev, info.Next
	if m.replay != nil {
		// Where [ and ] go: past transitions that show as this same instant.
		prev, next = visibleTransition(m.replay.dbs, info.At, -1), visibleTransition(m.replay.dbs, info.At, +1)
	}
	var steps []string
	if !prev.IsZero() {
		steps = append(steps, m.keys.ReplayPrev.Help().Key+" "+fmtStamp(prev))
	} else {
		steps = append(steps, m.keys.ReplayPrev.Help().Key+" —")
	}
	if !next.IsZero() {
		steps = append(steps, m.keys.ReplayNext.Help().Key+" "+fmtStamp(next))
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
// them (replay.History.At leaves them as recorded, held until the
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
