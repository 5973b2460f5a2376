package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// heartbeatSQL: a led row's holder is the target of a handover asked for it
// (schema 8), NULL otherwise.
const heartbeatSQL = "SELECT kind, scope, ok, epoch, holder, resign FROM pgleader.node_heartbeat($1, $2, $3, $4, $5, $6)"

// heartbeat is the session's heartbeat, in its mode. Its round trip is a leadDo
// request, which waits for guardBeat (guardLoop) while leadLoop is busy with it:
// guardLoop never waits for leadLoop, so the wait cannot close a cycle.
func (s *session) heartbeat() { s.m.heartbeat(s) }

// lockHeartbeat confirms every term of the session in one round trip on the leadership
// session, pings the guard session concurrently, and extends or ends the terms. For
// the scopes it follows it learns of new leaders and of scopes left without a live
// holder (which it claims: the fallback when no wake-up reached this node), and it
// learns which peer to watch.
func (s *session) lockHeartbeat() {
	e := s.e
	terms, scopes, epochs := s.termsSnapshot()
	led := map[*Scope]bool{}
	var settled []string
	for _, t := range terms {
		led[t.scope] = true
		if t.isSettled() {
			settled = append(settled, t.scope.name)
		}
	}
	var follow []string
	var known []int64
	for _, sc := range e.order {
		if !led[sc] {
			follow = append(follow, sc.name)
			known = append(known, sc.knownEpoch())
		}
	}

	rt := s.hb.next()
	ok := rt.ok             // the led scopes the database still gives this node
	resign := rt.resign     // led scopes an operator asked to give up (request_resign, request_handover)
	handover := rt.handover // of those, the ones to hand to a chosen node (request_handover)
	rt.ran = s.leadDo(func() {
		// The deadline starts once the session is ours: time spent queueing behind a
		// claim or a release is not the round trip's. The guard's ping runs beside
		// it, in guardLoop, which never waits for leadLoop.
		ctx, cancel := s.stmtCtx(e.cfg.HeartbeatTimeout)
		defer cancel()
		rt.start = monotime.Now()
		guardErr := make(chan error, 1)
		go func() { guardErr <- s.guardBeat(ctx) }()
		rows, err := s.lead.Query(ctx, heartbeatSQL, e.cfg.NodeID, scopes, epochs, follow, known, settled)
		if err == nil {
			var kind string
			var scope *string
			var good, wantResign bool
			var epoch *int64
			var holder *string
			_, err = pgx.ForEachRow(rows, []any{&kind, &scope, &good, &epoch, &holder, &wantResign}, func() error {
				switch {
				case kind == "led" && scope != nil:
					ok[*scope] = good
					resign[*scope] = wantResign
					if holder != nil && *holder != e.cfg.NodeID { // schema 8: the handover's target
						handover[*scope] = *holder
					}
				case kind == "follow" && scope != nil && epoch != nil:
					rt.seen = append(rt.seen, observation{*scope, *epoch, holder})
				case kind == "reserved" && scope != nil && epoch != nil && holder != nil: // schema 17
					rt.reserved = append(rt.reserved, observation{*scope, *epoch, holder})
				case kind == "ring" && holder != nil && epoch != nil:
					rt.peer = &ringPeer{node: *holder, beacon: *epoch}
				}
				return nil
			})
		}
		rt.err = err
		rt.gErr = <-guardErr
	}) == nil // not run: the session is lost
	if !rt.ran {
		return
	}
	start, err := rt.start, rt.err
	latency := monotime.Since(start)
	if err == nil && rt.gErr != nil {
		err = fmt.Errorf("guard session: %w", rt.gErr)
	}
	if err == nil && latency >= e.cfg.HeartbeatTimeout {
		err = fmt.Errorf("heartbeat took %v, timeout is %v", latency, e.cfg.HeartbeatTimeout)
	}
	if err != nil {
		s.heartbeatFailed(err, latency, terms)
		return
	}
	e.ring.setPeer(rt.peer, start)
	var free []*Scope
	for _, o := range rt.reserved {
		// A handover's reservation, as its doorbell would have said (a node
		// whose doorbell cannot ring learns it here): the target ends its
		// cooldown and claims.
		if sc := e.scopes[o.scope]; sc != nil {
			sc.reserve(*o.holder, o.epoch)
		}
	}
	for _, o := range rt.seen {
		sc := e.scopes[o.scope]
		if sc == nil {
			continue
		}
		if o.holder == nil {
			free = append(free, sc)
			continue
		}
		if *o.holder != e.cfg.NodeID {
			sc.observe(*o.holder, o.epoch)
		}
	}
	if len(free) > 0 {
		s.requestClaims(free, "")
	}
	e.lastHeartbeat.Store(&heartbeatMark{mono: start, wall: time.Now()})
	s.confirmTerms(terms, ok, resign, handover, start, latency)
}

// heartbeatRound is what a heartbeat's round trip found, written in its leadDo
// request. The session keeps one and reuses it (heartbeats run on the serving
// goroutine, one at a time, and nothing keeps a round's maps or slices past its
// heartbeat): a heartbeat's request allocates only its closure.
type heartbeatRound struct {
	ran       bool // false: the session was lost, nothing was sent
	start     int64
	err, gErr error
	ok        map[string]bool
	resign    map[string]bool
	handover  map[string]string
	seen      []observation // lock mode: the followed scopes
	reserved  []observation // lock mode: followed scopes a handover reserves (holder: the target)
	peer      *ringPeer     // lock mode: the ring peer to watch
	leases    []leaseView   // lease mode: the followed scopes
}

// observation is a followed scope as a lock-mode heartbeat saw it.
type observation struct {
	scope  string
	epoch  int64
	holder *string
}

// next returns the round, emptied for the next heartbeat.
func (r *heartbeatRound) next() *heartbeatRound {
	if r.ok == nil {
		r.ok, r.resign, r.handover = map[string]bool{}, map[string]bool{}, map[string]string{}
	}
	clear(r.ok)
	clear(r.resign)
	clear(r.handover)
	clear(r.seen)
	clear(r.reserved)
	clear(r.leases)
	r.ran, r.start, r.err, r.gErr, r.peer = false, 0, nil, nil, nil
	r.seen, r.reserved, r.leases = r.seen[:0], r.reserved[:0], r.leases[:0]
	return r
}

// termsSnapshot returns the session's terms, their scopes' names and epochs.
func (s *session) termsSnapshot() (terms []*term, scopes []string, epochs []int64) {
	s.termsMu.Lock()
	defer s.termsMu.Unlock()
	for t := range s.terms {
		terms = append(terms, t)
		scopes = append(scopes, t.scope.name)
		epochs = append(epochs, t.epoch)
	}
	return terms, scopes, epochs
}

// heartbeatFailed reports a failed heartbeat round trip and gives the session up.
func (s *session) heartbeatFailed(err error, latency time.Duration, terms []*term) {
	e := s.e
	reason := protocol.ReasonHeartbeatTimeout
	if !errors.Is(err, context.DeadlineExceeded) && latency < e.cfg.HeartbeatTimeout {
		reason = protocol.ReasonLostConnection
	}
	e.emit(Event{Kind: EventHeartbeatFailed, Reason: reason, Err: err, Latency: latency, Terms: termRefs(terms)})
	e.log.Warn("heartbeat failed", "node", e.cfg.NodeID, "err", err, "latency", latency)
	s.lose(reason, err)
}

// confirmTerms applies a successful heartbeat (started at start) to the terms it
// carried: extends the confirmed ones, starts the releases an operator asked for,
// and ends the ones the database no longer gives this node (evicted).
func (s *session) confirmTerms(terms []*term, ok, resign map[string]bool, handover map[string]string, start int64, latency time.Duration) {
	e := s.e
	var confirmed []*term
	for _, t := range terms {
		if ok[t.scope.name] {
			t.confirm(start)
			confirmed = append(confirmed, t)
		}
	}
	// One event for the round trip, before the terms it confirmed act on it.
	e.emit(Event{Kind: EventHeartbeatOK, TrustUntilMonoNS: start + int64(e.cfg.TrustWindow), Latency: latency,
		Terms: termRefs(confirmed)})
	for _, t := range terms {
		if ok[t.scope.name] {
			if resign[t.scope.name] {
				t.requestResign(handover[t.scope.name])
			}
		} else if s.removeTerm(t) {
			// Still ours when the answer came: not a term released meanwhile.
			t.end(protocol.ReasonEvicted, false)
		}
	}
}

// termRefs names the terms of a heartbeat event.
func termRefs(terms []*term) []TermRef {
	if len(terms) == 0 {
		return nil
	}
	refs := make([]TermRef, len(terms))
	for i, t := range terms {
		refs[i] = TermRef{Scope: t.scope.name, Epoch: t.epoch}
	}
	return refs
}

// kickHeartbeat makes the session heartbeat now rather than at the next tick: an
// operator's request to resign or hand over a led scope is read by the
// heartbeat, and should not wait up to an interval.
func (s *session) kickHeartbeat() {
	select {
	case s.hbKick <- struct{}{}:
	default:
	}
}
