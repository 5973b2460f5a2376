package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Fleet watches several pgleader databases at once, one Collector per
// database (a member), and publishes one merged Snapshot and one Event stream
// for all of them: the dashboard reads a Fleet as it reads a Collector.
//
// Every member reads on its own; the fleet re-merges whenever one of them
// publishes, from each member's newest snapshot, and never waits for the
// others. A member that cannot be read — its reads fail, hang, or take longer
// than UnreachableAfter — keeps its last snapshot in the merge, marked
// unreachable in Snapshot.Databases: its scopes keep their last-known state
// (the views grey them; they are not counted as NO LEADER), and its alerts are
// replaced by one collector_down alert naming the database. So one slow or
// unreachable database never stalls nor blanks the others.
//
// In a merged snapshot every scope, node, term, alert and event carries its
// member's name in its Database field: scope names and node ids repeat across
// databases (node-1 in billing and in orders), so (Database, name) is the key.
// A single database goes through a Collector, where Database is empty.
type Fleet struct {
	cfg     FleetConfig
	members []*fleetMember
	hub     *hub
	start   time.Time
	wake    chan struct{} // a member published: merge

	runMu   sync.Mutex
	started bool

	mu   sync.Mutex // guards seq, down, last and the members' caches
	seq  uint64
	down map[string]Alert // the collector_down alerts of the unreachable members, by server
	last *Snapshot        // the last merge's; its Databases and the members' from tell what it was made of
}

// FleetMember is one database of a Fleet: its name, as the views and the
// Database fields show it, and its collector.
type FleetMember struct {
	Name      string
	Collector *Collector
}

// FleetConfig tunes a Fleet. The zero value is ready to use.
type FleetConfig struct {
	// UnreachableAfter is how old a member's last successful read may be
	// before the member is shown unreachable although its collector has not
	// said so (a read that hangs: the collector's own read timeout is 10 s).
	// Default: 3 × the member's poll interval, at least 5 s.
	UnreachableAfter time.Duration
	// MergeGap is the least time between two merges: the members' updates
	// that arrive within it are merged once. Members read on their own clocks,
	// so without it a fleet of N databases would publish N snapshots per poll
	// interval, and a dashboard redraw its whole view N times. Default 200 ms:
	// a change reaches the merged view at most that much later than its
	// database's snapshot, and a fleet publishes at most 5 snapshots a second.
	MergeGap time.Duration
}

// DatabaseStatus is how a fleet member's database reads.
type DatabaseStatus string

// Database statuses.
const (
	// DatabaseUp: its last read succeeded, within UnreachableAfter.
	DatabaseUp DatabaseStatus = "up"
	// DatabaseConnecting: no read has finished nor failed yet, and the fleet
	// started less than UnreachableAfter ago.
	DatabaseConnecting DatabaseStatus = "connecting"
	// DatabaseUnreachable: its reads fail or hang (Reason says which); the
	// fleet shows its last snapshot, if any.
	DatabaseUnreachable DatabaseStatus = "unreachable"
)

// DatabaseState is one fleet member in a merged snapshot.
type DatabaseState struct {
	Name   string         `json:"name"`
	Status DatabaseStatus `json:"status"`
	// Database is the member's Health.Database ("app @ db1:5432").
	Database string `json:"database,omitempty"`
	// LastRead is the collector time of its last successful read (zero:
	// none); Age is the merge's time minus it.
	LastRead time.Time     `json:"last_read,omitzero"`
	Age      time.Duration `json:"age"`
	Source   Source        `json:"source,omitempty"`
	// Reason says why it is not up: the collector's last error, or how long
	// its reads have not finished.
	Reason string `json:"reason,omitempty"`
	// Scopes and Troubled count its scopes and those whose last-known
	// verdict is Troubled.
	Scopes   int `json:"scopes"`
	Troubled int `json:"troubled"`
}

// Up reports whether the database reads now.
func (d DatabaseState) Up() bool { return d.Status == DatabaseUp }

// fleetMember is a member and what the fleet derived from its newest
// snapshot (under Fleet.mu).
type fleetMember struct {
	name string
	c    *Collector

	stopped atomic.Pointer[error] // Run returned early, with this error
	pollErr error                 // Fleet.Poll's error for it (under Fleet.mu)

	from   *Snapshot // the snapshot the copies below were made from
	scopes []Scope
	nodes  []Node
	terms  []Term
	alerts []Alert
}

// NewFleet returns a fleet of members, in the order the views list them. Names
// must be unique and not empty, and each collector must not be run by
// anything else: Fleet.Run runs them.
func NewFleet(members []FleetMember, cfg FleetConfig) (*Fleet, error) {
	if len(members) == 0 {
		return nil, errors.New("collector: a fleet needs at least one member")
	}
	f := &Fleet{cfg: cfg, hub: newHub(), start: time.Now(), wake: make(chan struct{}, 1), down: map[string]Alert{}}
	seen := map[string]bool{}
	for i, m := range members {
		switch {
		case m.Name == "":
			return nil, fmt.Errorf("collector: fleet member %d has no name", i+1)
		case seen[m.Name]:
			return nil, fmt.Errorf("collector: fleet member name %q is used twice", m.Name)
		case m.Collector == nil:
			return nil, fmt.Errorf("collector: fleet member %q has no collector", m.Name)
		}
		seen[m.Name] = true
		f.members = append(f.members, &fleetMember{name: m.Name, c: m.Collector})
	}
	if f.cfg.MergeGap <= 0 {
		f.cfg.MergeGap = 200 * time.Millisecond
	}
	return f, nil
}

// Snapshot returns the latest merged snapshot, nil before the first merge.
func (f *Fleet) Snapshot() *Snapshot { return f.hub.current.Load() }

// Updates subscribes to merged snapshots, latest wins (as Collector.Updates).
func (f *Fleet) Updates() (<-chan *Snapshot, func()) { return f.hub.subscribeUpdates() }

// Subscribe returns the members' events merged into one ordered stream, each
// with its member's name in Database, renumbered (Seq) in the order the fleet
// received them, and the fleet's own: a collector_down alert firing or
// resolving as a member becomes unreachable or reads again. Delivery never
// blocks the fleet nor the members (as Collector.Subscribe).
func (f *Fleet) Subscribe(buffer int) (<-chan Event, func()) { return f.hub.subscribeEvents(buffer) }

// Refresh asks every member for a read now.
func (f *Fleet) Refresh() {
	for _, m := range f.members {
		m.c.Refresh()
	}
}

// SetPollInterval sets every member's poll interval.
func (f *Fleet) SetPollInterval(d time.Duration) {
	for _, m := range f.members {
		m.c.SetPollInterval(d)
	}
}

// PollInterval returns the first member's poll interval (SetPollInterval
// sets them all alike).
func (f *Fleet) PollInterval() time.Duration { return f.members[0].c.PollInterval() }

// Run runs every member's collector and merges their snapshots until ctx
// ends, then returns, once every member's Run has returned, the errors of
// those that failed (errors.Join). A member whose Run fails early (e.g. a
// logical source its database cannot serve) is shown unreachable with the
// error; the others go on. A Fleet runs once: a second call returns ErrClosed.
func (f *Fleet) Run(ctx context.Context) error {
	f.runMu.Lock()
	if f.started {
		f.runMu.Unlock()
		return ErrClosed
	}
	f.started = true
	f.runMu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(f.members))
	var runs sync.WaitGroup
	f.watch(ctx, func() { // subscribed to every member: no event is missed
		for i, m := range f.members {
			runs.Go(func() {
				err := m.c.Run(ctx)
				if err != nil && ctx.Err() == nil {
					m.stopped.Store(&err)
					f.poke()
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", m.name, err)
				}
			})
		}
	})
	cancel()
	runs.Wait()
	return errors.Join(errs...)
}

// watch follows the members' snapshots and events until ctx ends, merging,
// then closes the fleet's channels; subscribed is called once it has
// subscribed to every member. The members' collectors run elsewhere (Run, or
// a test that publishes into them).
func (f *Fleet) watch(ctx context.Context, subscribed func()) {
	defer f.hub.close()
	var tasks sync.WaitGroup
	var stops []func()
	for _, m := range f.members {
		snaps, stopSnaps := m.c.Updates()
		evs, stopEvents := m.c.Subscribe(DefaultEventBuffer)
		stops = append(stops, stopSnaps, stopEvents)
		tasks.Go(func() {
			for range snaps {
				f.poke()
			}
		})
		tasks.Go(func() {
			for ev := range evs {
				f.hub.publish(nil, []Event{tagEvent(ev, m.name)})
			}
		})
	}
	subscribed()
	defer func() {
		for _, stop := range stops {
			stop()
		}
		tasks.Wait()
	}()
	// The ticker notices a member that stopped publishing (a hung read): no
	// update says so.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
			f.merge(time.Now())
		case <-tick.C:
			if f.statusChanged(time.Now()) {
				f.merge(time.Now())
			}
		}
		select { // updates within MergeGap are merged together
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.MergeGap):
		}
	}
}

// poke asks the merge loop for a merge, without waiting.
func (f *Fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Poll reads every member once, concurrently (Collector.Poll: through Run
// when it runs), and returns the merged snapshot: a member whose read failed
// is unreachable in it, with its error. The error is non-nil only when no
// member could be read.
func (f *Fleet) Poll(ctx context.Context) (*Snapshot, error) {
	errs := make([]error, len(f.members))
	var polls sync.WaitGroup
	for i, m := range f.members {
		polls.Go(func() { _, errs[i] = m.c.Poll(ctx) })
	}
	polls.Wait()
	f.mu.Lock()
	for i, m := range f.members {
		m.pollErr = errs[i]
	}
	f.mu.Unlock()
	snap := f.merge(time.Now())
	for _, err := range errs {
		if err == nil {
			return snap, nil
		}
	}
	return snap, errors.Join(errs...)
}

// tagEvent is ev of member name.
func tagEvent(ev Event, name string) Event {
	ev.Database = name
	if ev.Alert != nil {
		a := *ev.Alert
		a.Database = name
		ev.Alert = &a
	}
	return ev
}

// unreachableAfter is the member's UnreachableAfter.
func (f *Fleet) unreachableAfter(m *fleetMember) time.Duration {
	if f.cfg.UnreachableAfter > 0 {
		return f.cfg.UnreachableAfter
	}
	return max(3*m.c.PollInterval(), 5*time.Second)
}

// stateOf judges member m at now from its newest snapshot (nil: none yet).
func (f *Fleet) stateOf(m *fleetMember, snap *Snapshot, now time.Time) DatabaseState {
	st := DatabaseState{Name: m.name, Status: DatabaseUp, Database: m.c.database}
	limit := f.unreachableAfter(m)
	if snap != nil {
		h := snap.Health
		st.Database, st.Source = h.Database, h.Source
		st.LastRead = cmp.Or(h.LastPoll, snap.At)
		st.Age = now.Sub(st.LastRead)
		st.Scopes = len(snap.Scopes)
		for i := range snap.Scopes {
			if snap.Scopes[i].Verdict.Troubled() {
				st.Troubled++
			}
		}
	}
	lastErr := m.c.lastError()
	switch {
	case m.stopped.Load() != nil:
		st.Status, st.Reason = DatabaseUnreachable, "its collector stopped: "+(*m.stopped.Load()).Error()
	case m.pollErr != nil:
		st.Status, st.Reason = DatabaseUnreachable, m.pollErr.Error()
	case snap == nil && (lastErr != "" || now.Sub(f.start) > limit):
		st.Status = DatabaseUnreachable
		st.Reason = cmp.Or(lastErr, fmt.Sprintf("no read has finished in %s", roundAge(now.Sub(f.start))))
	case snap == nil:
		st.Status = DatabaseConnecting
	case snap.Health.Source == SourceDisconnected:
		st.Status, st.Reason = DatabaseUnreachable, cmp.Or(snap.Health.LastError, "disconnected")
	case st.Age > limit:
		st.Status = DatabaseUnreachable
		st.Reason = fmt.Sprintf("no read has finished for %s: the database is slow or the network hangs", roundAge(st.Age))
	}
	return st
}

func roundAge(d time.Duration) time.Duration { return d.Round(time.Second) }

// statusChanged reports whether a member's status differs from the last
// merge's.
func (f *Fleet) statusChanged(now time.Time) bool {
	last := f.Snapshot()
	if last == nil {
		return true
	}
	for i, m := range f.members {
		if f.stateOf(m, m.c.Snapshot(), now).Status != last.Databases[i].Status {
			return true
		}
	}
	return false
}

// merge builds the merged snapshot from every member's newest one, publishes
// it with the fleet's own events, and returns it.
func (f *Fleet) merge(now time.Time) *Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &Snapshot{Databases: make([]DatabaseState, len(f.members))}
	var ns, nn, nt, na int
	snaps := make([]*Snapshot, len(f.members))
	same := f.last != nil
	for i, m := range f.members {
		snaps[i] = m.c.Snapshot()
		out.Databases[i] = f.stateOf(m, snaps[i], now)
		same = same && snaps[i] == m.from && out.Databases[i].Status == f.last.Databases[i].Status &&
			out.Databases[i].Reason == f.last.Databases[i].Reason
	}
	if same {
		return f.last // nothing new: no snapshot to publish, nor to draw
	}
	for i, m := range f.members {
		if snaps[i] != nil {
			m.tag(snaps[i])
			ns, nn, nt, na = ns+len(m.scopes), nn+len(m.nodes), nt+len(m.terms), na+len(m.alerts)
		}
	}
	out.Scopes, out.Nodes = make([]Scope, 0, ns), make([]Node, 0, nn)
	out.Terms, out.Alerts = make([]Term, 0, nt), make([]Alert, 0, na+len(f.members))
	out.FenceRejected = map[string]uint64{}
	var evs []Event
	for i, m := range f.members {
		st := out.Databases[i]
		if snaps[i] != nil {
			out.Scopes = append(out.Scopes, m.scopes...)
			out.Nodes = append(out.Nodes, m.nodes...)
			out.Terms = append(out.Terms, m.terms...)
			out.Retired += snaps[i].Retired
			// The lock table is a server's, and databases may share one:
			// the fullest member's, not a sum.
			if l := snaps[i].Locks; l.Capacity > 0 && (out.Locks.Capacity == 0 ||
				float64(l.Advisory)/float64(l.Capacity) > float64(out.Locks.Advisory)/float64(out.Locks.Capacity)) {
				out.Locks = l
			}
			for scope, n := range snaps[i].FenceRejected {
				out.FenceRejected[m.name+"/"+scope] = n
			}
		}
		if st.Status != DatabaseUnreachable && snaps[i] != nil {
			// An unreachable member's own alerts are last-known: not shown; its
			// server's one collector_down is (below). A member's own
			// collector_down, raised before the fleet calls it unreachable, is
			// the same outage: also left to the server's alert.
			for _, a := range m.alerts {
				if a.Kind != AlertCollectorDown {
					out.Alerts = append(out.Alerts, a)
				}
			}
		}
	}
	// One collector_down per server whose databases cannot be read, naming them.
	down := unreachableAlerts(out.Databases, now)
	for key, a := range down {
		prev, was := f.down[key]
		if was && prev.Summary == a.Summary {
			a = prev
		} else {
			if was {
				a.Since = prev.Since
			}
			evs = append(evs, Event{At: now, Kind: EventAlertFiring, Detail: a.Summary, Alert: &a, Database: a.Database})
		}
		f.down[key] = a
		out.Alerts = append(out.Alerts, a)
	}
	for key, a := range f.down {
		if _, still := down[key]; !still {
			delete(f.down, key)
			evs = append(evs, Event{At: now, Kind: EventAlertResolved, Detail: a.Summary, Alert: &a, Database: a.Database})
		}
	}
	slices.SortStableFunc(out.Terms, func(a, b Term) int { return b.AcquiredAt.Compare(a.AcquiredAt) })
	sortFleetAlerts(out.Alerts)
	out.Health, out.At, out.DBTime = f.health(snaps, out.Databases, now)
	f.seq++
	out.Seq = f.seq
	f.last = out
	f.hub.publish(out, evs)
	return out
}

// unreachableAlerts are the collector_down alerts of the members that cannot be
// read, one per server (databases of one server fail together: one outage, one
// alert), by server: the server and the cause first, then the databases (their
// fleet names, in Alert.Database too) and since when they are unread.
func unreachableAlerts(states []DatabaseState, now time.Time) map[string]Alert {
	type group struct {
		names []string
		cause string
		since time.Time // the oldest last read; zero: one was never read
		never bool
	}
	groups := map[string]*group{}
	var order []string
	for _, st := range states {
		if st.Status != DatabaseUnreachable {
			continue
		}
		_, server := splitDatabase(st.Database)
		if server == "?" {
			server = st.Name // no server known: the member alone
		}
		g := groups[server]
		if g == nil {
			g = &group{cause: shortCause(st.Reason)}
			groups[server] = g
			order = append(order, server)
		}
		g.names = append(g.names, st.Name)
		switch {
		case st.LastRead.IsZero():
			g.never = true
		case g.since.IsZero() || st.LastRead.Before(g.since):
			g.since = st.LastRead
		}
	}
	out := make(map[string]Alert, len(groups))
	for _, server := range order {
		g := groups[server]
		when := "never read"
		if !g.never {
			when = "unread since " + g.since.Format("15:04:05")
		}
		out[server] = Alert{Kind: AlertCollectorDown, Severity: SeverityCritical, Database: strings.Join(g.names, ", "),
			Summary: fmt.Sprintf("%s: %s — %s %s", server, g.cause, strings.Join(g.names, ", "), when),
			Hint:    downHint, Runbook: AlertCollectorDown.Runbook(), Since: cmp.Or(g.since, now)}
	}
	return out
}

// sortFleetAlerts orders alerts as a collector does (critical first, then
// kind, scope, node), with the database before the scope.
func sortFleetAlerts(as []Alert) {
	rank := func(s Severity) int {
		if s == SeverityCritical {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(as, func(a, b Alert) int {
		return cmp.Or(cmp.Compare(rank(a.Severity), rank(b.Severity)), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Database, b.Database), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Node, b.Node))
	})
}

// health is the merged snapshot's health, its time (At: the oldest of the
// members that read; the view's "updated Ns ago" speaks for all of them)
// and its database time (the newest).
func (f *Fleet) health(snaps []*Snapshot, states []DatabaseState, now time.Time) (Health, time.Time, time.Time) {
	h := Health{Database: fmt.Sprintf("%d databases", len(f.members)), Source: SourceDisconnected, SlotLagBytes: -1}
	var at, dbTime, newest time.Time
	versions := map[string]bool{}
	up := 0
	for i, s := range snaps {
		if s == nil {
			continue
		}
		mh := s.Health
		h.Polls += mh.Polls
		h.PollErrors += mh.PollErrors
		h.Notifications += mh.Notifications
		h.NotificationsCoalesced += mh.NotificationsCoalesced
		h.Reconnects += mh.Reconnects
		h.DroppedEvents += mh.DroppedEvents
		h.Transactions += mh.Transactions
		h.DecodeErrors += mh.DecodeErrors
		versions[mh.ServerVersion] = true
		if s.DBTime.After(dbTime) {
			dbTime = s.DBTime
		}
		if s.At.After(newest) {
			newest = s.At
		}
		if !states[i].Up() {
			continue
		}
		up++
		if at.IsZero() || s.At.Before(at) {
			at = s.At
		}
		if mh.LastPoll.After(h.LastPoll) {
			h.LastPoll = mh.LastPoll // the newest read
		}
		h.PollDuration = max(h.PollDuration, mh.PollDuration)
		if sourceRank(mh.Source) > sourceRank(h.Source) || h.Source == SourceDisconnected {
			h.Source = mh.Source // the worst of those that read
		}
	}
	h.DroppedEvents += f.hub.dropped.Load()
	if len(versions) == 1 {
		for v := range versions {
			h.ServerVersion = v
		}
	}
	if up == 0 {
		// Nothing reads: the whole view is stale, and says why.
		at = newest
		var reasons []string
		for _, st := range states {
			if st.Reason != "" {
				reasons = append(reasons, st.Name+": "+st.Reason)
			}
		}
		h.LastError, h.LastErrorAt = strings.Join(reasons, "; "), now
		if len(reasons) == 0 {
			h.Source = SourcePolling // connecting: nothing failed yet
		}
	}
	return h, at, dbTime
}

// sourceRank orders the sources best first.
func sourceRank(s Source) int {
	switch s {
	case SourceLogical:
		return 0
	case SourceLive:
		return 1
	case SourcePolling:
		return 2
	}
	return 3
}

// tag makes the member's copies of snap's rows, each with the member's name
// in Database, once per snapshot of the member.
func (m *fleetMember) tag(snap *Snapshot) {
	if m.from == snap {
		return
	}
	m.from = snap
	m.scopes = slices.Clone(snap.Scopes)
	for i := range m.scopes {
		sc := &m.scopes[i]
		sc.Database = m.name
		if sc.OpenTerm != nil {
			t := *sc.OpenTerm
			t.Database = m.name
			sc.OpenTerm = &t
		}
		sc.Alerts = tagAlerts(sc.Alerts, m.name)
	}
	m.nodes = slices.Clone(snap.Nodes)
	for i := range m.nodes {
		m.nodes[i].Database = m.name
	}
	m.terms = slices.Clone(snap.Terms)
	for i := range m.terms {
		m.terms[i].Database = m.name
	}
	m.alerts = tagAlerts(snap.Alerts, m.name)
}

func tagAlerts(as []Alert, name string) []Alert {
	if len(as) == 0 {
		return as
	}
	out := slices.Clone(as)
	for i := range out {
		out[i].Database = name
	}
	return out
}

// lastError is the collector's last read or connection error ("" for none).
func (c *Collector) lastError() string {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.lastErr
}
