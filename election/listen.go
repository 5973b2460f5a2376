package election

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/notifybudget"
	"github.com/pgleader/pgleader/protocol"
)

// The listen session is the only session of a node that LISTENs (on leader_change),
// and nothing waits on its statements. PostgreSQL sends a listening session every
// pending notification before the reply to any statement, and any role may NOTIFY
// any channel: on a session whose replies the heartbeat needs (the leadership or
// the guard session) a flood puts an unbounded queue in front of that reply
// (measured: a ping behind 10k queued 7000-byte notifications waits 158 ms, behind
// 50k, 0.8 s). So notifications reach the node on a session of their own, and what
// they cost the node is bounded by a budget per window (notifybudget): beyond it
// the listen session is closed — which drops the server's queue for it at once,
// without reading it — and the node stays deaf for a while, during which
// heartbeats find what notifications would have said (within one interval I, as
// after any lost wake-up). Then it listens again and re-reads (a heartbeat now,
// and the ring).
const (
	// Per notifybudget.Window, at least: a node's budget is the larger of this
	// and hintPerScope notifications per scope it campaigns for (newHintBudget).
	hintBudgetMin = 1024
	// A legitimate burst announces each scope a few times (a claim or release
	// batch announces every scope it carries; a failover releases and claims).
	hintPerScope  = 4
	hintBytesEach = 512 // bytes per notification of the budget: ours are < 300
)

// newHintBudget is the budget of a node that campaigns for scopes scopes.
func newHintBudget(scopes int) notifybudget.Budget {
	n := max(hintBudgetMin, hintPerScope*scopes)
	return notifybudget.New(n, n*hintBytesEach)
}

// hintsActed remembers when each hint was last acted on (listenLoop only).
type hintsActed map[hint]time.Time

// collapse reports whether h only repeats, within spacing, a hint acted on at
// now; if not, it records h as acted on. A hint asks the node to re-read, and its
// heartbeat re-reads every interval anyway: a burst of the same hint is one
// wake-up. Hints that differ in what they make the node do are kept apart: a
// release per scope (its claim), a lost node per node (its scopes' claims);
// resign and handover requests (a heartbeat now, which reads them all) and joins
// (the ring re-reads its peer, whichever node joined) each by kind alone. The map
// holds at most limit hints (then it starts afresh: a budget's worth).
func (a hintsActed) collapse(now time.Time, h hint, spacing time.Duration, limit int) bool {
	k := hint{Event: h.Event}
	switch h.Event {
	case protocol.NotifyReleased:
		k.Scope = h.Scope
	case protocol.NotifyNodeLost:
		k.Holder = h.Holder
	}
	if at, ok := a[k]; ok && now.Sub(at) < spacing {
		return true
	}
	if len(a) >= limit {
		clear(a)
	}
	a[k] = now
	return false
}

// listener is the state of a session's listen session (listenLoop only; the
// notification callback runs on listenLoop's goroutine, inside its reads).
type listener struct {
	s       *session
	budget  notifybudget.Budget
	acted   hintsActed
	flooded bool // the budget of the current window ran out: close the session
}

// onNotification is the listen session's pgconn callback: within the budget it
// hands the hint to the engine unless it repeats one just acted on; beyond the
// budget, it only marks the flood.
func (l *listener) onNotification(_ *pgconn.PgConn, n *pgconn.Notification) {
	if l.flooded {
		return
	}
	now := time.Now()
	if !l.budget.Admit(now, n.PID, len(n.Payload)) {
		l.flooded = true
		return
	}
	h, ok := parseHint(n.Payload)
	if !ok || l.acted.collapse(now, h, l.s.e.cfg.HeartbeatInterval/2, hintBudgetMin) {
		return
	}
	l.s.e.onHint(h)
}

// openListen opens a listen session and LISTENs on it.
func (l *listener) openListen(ctx context.Context) (*pgx.Conn, error) {
	e := l.s.e
	cfg := e.connConfig("listen", false)
	cfg.OnNotification = l.onNotification
	conn, err := e.connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if h := e.test.beforeListen; h != nil {
		h()
	}
	if _, err := conn.Exec(ctx, "LISTEN "+protocol.NotifyChannel); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}

// listenLoop owns the listen session from openLockSession on and closes it when the
// session ends. It reads notifications until the budget runs out (then the node is
// deaf for deafFor) or the listen session fails (then it reopens it with the
// engine's backoff); neither ends the leadership session, whose heartbeats are the
// fallback for every wake-up. Each reopening is followed by a heartbeat and a ring
// re-read, since what was announced in between was missed.
func (l *listener) listenLoop(conn *pgx.Conn) {
	s, e := l.s, l.s.e
	floods, failures := 0, 0
	since := time.Now()
	for {
		var err error
		for err == nil && !l.flooded {
			err = conn.PgConn().WaitForNotification(s.ctx)
		}
		// Closing drops whatever the server still queues for this session.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if l.flooded {
			if time.Since(since) >= notifybudget.CalmAfter {
				floods = 0
			}
			floods++
			wait = notifybudget.DeafFor(floods)
			count, bytes := l.budget.Window()
			e.log.Warn("notification flood on leader_change: stopped listening; wake-ups come from heartbeats meanwhile",
				"node", e.cfg.NodeID, "for", wait, "window", notifybudget.Window, "notifications", count,
				"bytes", bytes, "senders", l.budget.TopSenders())
		} else {
			failures++
			wait = backoff(failures)
			e.log.Warn("listen session failed", "node", e.cfg.NodeID, "err", err, "attempt", failures)
		}
		for conn = nil; conn == nil; {
			sleepCtx(s.ctx, wait)
			if s.ctx.Err() != nil {
				return
			}
			l.flooded, l.budget, l.acted = false, newHintBudget(len(e.cfg.Scopes)), hintsActed{}
			octx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			conn, err = l.openListen(octx)
			cancel()
			if err != nil {
				failures++
				wait = backoff(failures)
				e.log.Warn("cannot open the listen session", "node", e.cfg.NodeID, "err", err, "attempt", failures)
			}
		}
		failures = 0
		since = time.Now()
		s.kickHeartbeat()
		e.ring.reread()
	}
}
