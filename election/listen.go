package election

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The listen session is the only session of a node that LISTENs (on leader_change),
// and nothing waits on its statements. PostgreSQL sends a listening session every
// pending notification before the reply to any statement, and any role may NOTIFY
// any channel: on a session whose replies the heartbeat needs (the leadership or
// the guard session) a flood puts an unbounded queue in front of that reply
// (measured: a ping behind 10k queued 7000-byte notifications waits 158 ms, behind
// 50k, 0.8 s). So notifications reach the node on a session of their own, and what
// they cost the node is bounded by a budget per window: beyond it the listen
// session is closed — which drops the server's queue for it at once, without
// reading it — and the node stays deaf for a while, during which heartbeats find
// what notifications would have said (within one interval I, as after any lost
// wake-up). Then it listens again and re-reads (a heartbeat now, and the ring).
const (
	hintWindow = time.Second // the budget's window
	// Per window, at least: a node's budget is the larger of this and
	// hintPerScope notifications per scope it campaigns for (hintBudget.limits).
	hintBudgetMin = 1024
	// A legitimate burst announces each scope a few times (a claim or release
	// batch announces every scope it carries; a failover releases and claims).
	hintPerScope  = 4
	hintBytesEach = 512              // bytes per notification of the budget: ours are < 300
	deafFirst     = time.Second      // the first deaf period after a flood; doubles per flood
	deafMax       = 30 * time.Second // … up to this
	// A listening period this long without a flood forgets the previous floods.
	calmAfter  = time.Minute
	maxSenders = 16 // distinct sender pids counted per window (for the log)
)

// hintBudget counts the notifications of the current window (listenLoop only).
type hintBudget struct {
	count0  int // the budget: notifications per window
	bytes0  int // … and payload bytes
	start   time.Time
	count   int
	bytes   int
	senders map[uint32]int // pid → notifications this window, at most maxSenders pids
	acted   map[hint]time.Time
}

// admit counts n, received at now, and reports whether it is within the budget.
func (b *hintBudget) admit(now time.Time, n *pgconn.Notification) bool {
	if b.senders == nil || now.Sub(b.start) >= hintWindow {
		b.start, b.count, b.bytes, b.senders, b.acted = now, 0, 0, map[uint32]int{}, map[hint]time.Time{}
	}
	b.count++
	b.bytes += len(n.Payload)
	if _, ok := b.senders[n.PID]; ok || len(b.senders) < maxSenders {
		b.senders[n.PID]++
	}
	return b.count <= b.count0 && b.bytes <= b.bytes0
}

// newHintBudget is the budget of a node that campaigns for scopes scopes.
func newHintBudget(scopes int) hintBudget {
	n := max(hintBudgetMin, hintPerScope*scopes)
	return hintBudget{count0: n, bytes0: n * hintBytesEach}
}

// collapse reports whether h only repeats, within spacing, a hint acted on at
// now; if not, it records h as acted on. A hint asks the node to re-read, and its
// heartbeat re-reads every interval anyway: a burst of the same hint is one
// wake-up. Hints that differ in what they make the node do are kept apart: a
// release per scope (its claim), a lost node per node (its scopes' claims);
// resign and handover requests (a heartbeat now, which reads them all) and joins
// (the ring re-reads its peer, whichever node joined) each by kind alone. The
// map is bounded by the window's budget.
func (b *hintBudget) collapse(now time.Time, h hint, spacing time.Duration) bool {
	k := hint{Event: h.Event}
	switch h.Event {
	case "released":
		k.Scope = h.Scope
	case "node_lost":
		k.Holder = h.Holder
	}
	if at, ok := b.acted[k]; ok && now.Sub(at) < spacing {
		return true
	}
	b.acted[k] = now
	return false
}

// topSenders names the backends that sent most of this window's notifications.
func (b *hintBudget) topSenders() string {
	pids := slices.Collect(maps.Keys(b.senders))
	slices.SortFunc(pids, func(x, y uint32) int { return cmp.Compare(b.senders[y], b.senders[x]) })
	var out []string
	for _, pid := range pids[:min(len(pids), 3)] {
		out = append(out, fmt.Sprintf("pid %d (%d)", pid, b.senders[pid]))
	}
	return strings.Join(out, ", ")
}

// deafFor is how long the node stops listening after its floods-th consecutive flood.
func deafFor(floods int) time.Duration {
	d := deafFirst
	for i := 1; i < floods && d < deafMax; i++ {
		d *= 2
	}
	return min(d, deafMax)
}

// listener is the state of a session's listen session (listenLoop only; the
// notification callback runs on listenLoop's goroutine, inside its reads).
type listener struct {
	s       *session
	budget  hintBudget
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
	if !l.budget.admit(now, n) {
		l.flooded = true
		return
	}
	h, ok := parseHint(n.Payload)
	if !ok || l.budget.collapse(now, h, l.s.e.cfg.HeartbeatInterval/2) {
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
	if testBeforeListen != nil {
		testBeforeListen(e)
	}
	if _, err := conn.Exec(ctx, "LISTEN leader_change"); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}

// listenLoop owns the listen session from openSession on and closes it when the
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
			if time.Since(since) >= calmAfter {
				floods = 0
			}
			floods++
			wait = deafFor(floods)
			e.log.Warn("notification flood on leader_change: stopped listening; wake-ups come from heartbeats meanwhile",
				"node", e.cfg.NodeID, "for", wait, "window", hintWindow, "notifications", l.budget.count,
				"bytes", l.budget.bytes, "senders", l.budget.topSenders())
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
			l.flooded, l.budget = false, newHintBudget(len(e.cfg.Scopes))
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
