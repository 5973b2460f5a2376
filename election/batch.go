package election

import (
	"context"
	"sync"
	"time"
)

// maxBatch bounds the scopes of one claim or release round trip, so that a round
// trip stays well inside the heartbeat timeout and the heartbeats of led scopes,
// which queue behind it on the leadership session, are not delayed for long.
const maxBatch = 250

// batchTimeout bounds a claim or release round trip. It is looser than the
// heartbeat timeout: a round trip that misses it drops the leadership session (pgx
// closes a connection whose statement was cut), which ends every term of the node,
// so a batch slowed by a busy server must not trip it; a connection that is really
// gone is noticed by the socket watcher at once.
func (s *session) batchTimeout() time.Duration { return 4 * s.e.cfg.HeartbeatTimeout }

// batchQueue collects claims and releases for the leadership session. Requests that
// arrive while a round trip is in flight go together in the next one (group
// commit): one death that frees a thousand scopes costs a handful of round trips,
// and a single claim is sent at once.
type batchQueue struct {
	mu       sync.Mutex
	claims   []*Scope
	announce []string
	releases []releaseReq
	closed   bool // the session ended and its queue was answered: accept nothing more
	kick     chan struct{}
}

func (q *batchQueue) init() { q.kick = make(chan struct{}, 1) }

func (q *batchQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// serve runs the leadership session until it is lost or ctx ends: a heartbeat every
// interval, and the queued releases and claims in between, releases first (they
// free scopes for others), each round trip at most maxBatch scopes. One goroutine
// does both, so a burst of claims never starves the heartbeat: it runs between two
// batches as soon as it is due. When the session ends it answers every request
// still queued.
func (s *session) serve(ctx context.Context) {
	defer s.failQueued()
	tick := time.NewTicker(s.e.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.lost:
			return
		case <-tick.C:
			s.heartbeat()
		case <-s.hbKick:
			s.heartbeat()
		case <-s.batch.kick:
			for ctx.Err() == nil && !s.isLost() && s.runNext() {
				select {
				case <-tick.C:
					s.heartbeat()
				default:
				}
			}
		}
	}
}

// take removes the next round trip's work from the queue: releases first (they
// free scopes for others), at most maxBatch of them, or else at most maxBatch
// claims. A lost peer is announced with the last claim batch queued: the other
// nodes then find the scopes this node claimed already taken (their claims are
// cheap, and do not compete with this node's), and claim at once the ones it does
// not campaign for.
func (q *batchQueue) take() (rel []releaseReq, claims []*Scope, announce string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rel = q.releases[:min(len(q.releases), maxBatch)]
	q.releases = q.releases[len(rel):]
	if len(rel) > 0 {
		return rel, nil, ""
	}
	claims = q.claims[:min(len(q.claims), maxBatch)]
	q.claims = q.claims[len(claims):]
	if len(q.announce) > 0 && len(q.claims) == 0 {
		announce, q.announce = q.announce[0], q.announce[1:]
	}
	return nil, claims, announce
}

// runNext runs one round trip of queued work; false when the queue is empty.
func (s *session) runNext() bool {
	rel, claims, announce := s.batch.take()
	switch {
	case len(rel) > 0:
		s.runReleases(rel)
	case len(claims) > 0 || announce != "":
		s.runClaims(claims, announce)
	default:
		return false
	}
	return true
}

// failQueued answers every queued request of a lost session.
func (s *session) failQueued() {
	q := &s.batch
	q.mu.Lock()
	claims, rel := q.claims, q.releases
	q.claims, q.releases, q.announce = nil, nil, nil
	q.closed = true
	q.mu.Unlock()
	for _, sc := range claims {
		sc.deliver(claimOutcome{sess: s, err: errSessionLost})
	}
	for _, r := range rel {
		r.reply <- releaseResult{err: errSessionLost}
	}
}
