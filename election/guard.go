package election

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// guardReq is a statement for guardLoop to run on the guard connection.
type guardReq struct {
	ctx   context.Context
	run   func(ctx context.Context) error
	reply chan error
}

// guardDo runs fn on the guard connection, in guardLoop.
func (s *session) guardDo(ctx context.Context, fn func(ctx context.Context) error) error {
	req := guardReq{ctx: ctx, run: fn, reply: make(chan error, 1)}
	select {
	case s.guardReqs <- req:
	case <-s.lost:
		return errSessionLost
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-s.lost:
		return errSessionLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// guardLoop owns the guard connection: it runs guardDo requests (lease arming, the
// heartbeat's ping) one at a time. No session of a node LISTENs, so the reply to
// a request is never queued behind notifications: the heartbeat's ping costs one
// round trip whatever anyone NOTIFYs. While the lease is armed and no heartbeat has pinged the guard for an
// interval (the leadership session is busy with a long batch), it pings the guard
// itself: the guard must never expire while the process runs, and must never
// expire before the trust of the last heartbeat has (the heartbeat's own ping,
// sent after the heartbeat started, sees to that: see "No overlap" in the package
// doc). A broken guard connection loses the session.
func (s *session) guardLoop() {
	T := s.e.cfg.HeartbeatTimeout
	ping := time.NewTimer(time.Hour)
	defer ping.Stop()
	for !s.isLost() {
		var due <-chan time.Time
		if s.guardLease {
			ping.Reset(time.Until(s.guardPing))
			due = ping.C
		}
		select {
		case <-s.ctx.Done():
			return
		case req := <-s.guardReqs:
			err := req.ctx.Err()
			if err == nil {
				err = req.run(req.ctx)
			}
			req.reply <- err
			if err != nil && s.guard.IsClosed() { // the statement was cut: the guard is gone
				s.lose(protocol.ReasonLostConnection, fmt.Errorf("guard session: %w", err))
				return
			}
		case <-due:
			ctx, cancel := s.stmtCtx(T)
			err := s.pingGuard(ctx)
			cancel()
			if err != nil {
				s.lose(protocol.ReasonLostConnection, fmt.Errorf("guard session: %w", err))
				return
			}
		}
	}
}

// guardBeat keeps the guard session's lease in step with leadership, at every
// heartbeat: while the node leads any scope the guard has idle_session_timeout = L
// and is pinged with every heartbeat, so it expires together with the leadership
// session if the process freezes; otherwise the lease is disarmed and the guard left
// alone, costing the server nothing.
//
// Whether the node leads is read in guardLoop, not taken from the caller: a
// heartbeat's snapshot of the terms may predate a claim whose lead() has already
// armed the lease (addTerm happens before that arming), and must not disarm it.
func (s *session) guardBeat(ctx context.Context) error {
	return s.guardDo(ctx, func(ctx context.Context) error {
		s.termsMu.Lock()
		leading := len(s.terms) > 0
		s.termsMu.Unlock()
		switch {
		case leading && s.guardLease:
			return s.pingGuard(ctx)
		case leading == s.guardLease:
			return nil
		}
		return s.setGuardLease(ctx, leading)
	})
}

// armGuard makes sure the guard's lease is armed, and that its idle timer runs
// out no earlier than since + W (since: monotonic): before a new term's gate may open
// (lead, since = the claim's start), and speculatively alongside a claim by a
// node that leads nothing (since = now), so that a won claim does not wait for a
// guard round trip. A lease armed by a guard statement that started at or after
// since − (L − W)/2 needs nothing more: its timer runs out no earlier than
// since + W + (L − W)/2, half the safety gap after the gate's trust. One armed
// earlier (for a claim that was lost, the next heartbeat not yet come) gets a
// ping: its timer may run out while the new term's gate is open, freeing the
// guard a successor waits for (docs/model.md §8.2), or as the gate closes,
// spending the gap L − W that absorbs the clocks' and timers' slack (§8.5; a
// statement that started exactly L − W before since would do that).
func (s *session) armGuard(ctx context.Context, since int64) error {
	return s.guardDo(ctx, func(ctx context.Context) error {
		// The guard's timer runs out L after its last statement ended; the
		// term's trust, W after since: a statement that started no earlier
		// than since − (L − W)/2 outlasts it by half the gap at least.
		switch {
		case s.guardLease && s.guardStmt >= since-int64(s.e.cfg.SessionLease-s.e.cfg.TrustWindow)/2:
			return nil
		case s.guardLease:
			return s.pingGuard(ctx)
		}
		return s.setGuardLease(ctx, true)
	})
}

// pingGuard resets the guard's idle timer (guardLoop only).
func (s *session) pingGuard(ctx context.Context) error {
	s.guardStmt = monotime.Now()
	if err := s.guard.Ping(ctx); err != nil {
		return err
	}
	s.guardPing = time.Now().Add(s.e.cfg.HeartbeatInterval)
	return nil
}

func (s *session) setGuardLease(ctx context.Context, on bool) error {
	lease := "0"
	if on {
		lease = strconv.FormatInt(s.e.cfg.SessionLease.Milliseconds(), 10)
	}
	// No arguments: pgx sends it with the simple protocol, one round trip (with an
	// argument its first use costs a prepare round trip too, inside a heartbeat's
	// deadline).
	s.guardStmt = monotime.Now()
	if _, err := s.guard.Exec(ctx, "SELECT pg_catalog.set_config('idle_session_timeout', '"+lease+"', false)"); err != nil {
		return err
	}
	s.guardLease = on
	s.guardPing = time.Now().Add(s.e.cfg.HeartbeatInterval)
	return nil
}
