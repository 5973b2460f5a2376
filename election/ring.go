package election

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/monotime"
)

// peerWait identifies one peer wait statement (a new one per statement).
type peerWait struct{ peer ringPeer }

// peerWaitSlice bounds one peer wait statement; the loop re-issues it. A statement
// blocked on a lock holds its snapshot, and so the database's xmin horizon, for as
// long as it waits: a wait without end kept vacuum from removing any row version
// written since, and at a thousand scopes the heartbeats' updates bloated
// leader_state by 30 MB in a minute, until heartbeats missed their deadline. Each
// slice costs one short transaction: 0.25 per heartbeat interval at the defaults. A
// 5 s slice measured 88 % HOT updates and a table still growing (12 MB after a
// minute at 1,000 scopes); 2 s, 98 % and a steady 2.2 MB.
const peerWaitSlice = 2 * time.Second

// ringPeer is the node this node watches: the next live node in node_id order.
type ringPeer struct {
	node   string
	beacon int64 // advisory key its leadership session holds while it lives
}

// guardWait is a wait for one guard key, shared by every new term that waits on it
// (a node that led many scopes is the predecessor of many terms at once).
type guardWait struct {
	key      int64
	deadline int64         // the latest deadline among the waiters (monotonic)
	done     chan struct{} // closed when served
	free     bool          // set before done is closed
}

// ring owns the node's third connection, the watch connection. It blocks on the
// beacon of one peer (the ring successor): the statement returns within a
// millisecond of that peer's leadership session ending, however it ended, and the
// node then claims the peer's scopes and announces the loss to every node (see
// "How a follower learns" in the package doc). It also serves a new term's waits
// for its predecessors' guards, which take precedence: the peer wait is interrupted
// (a cancel request) and resumed after.
type ring struct {
	e *Elector

	mu    sync.Mutex
	peer  *ringPeer // from the last heartbeat (or ring_next); nil: alone, or unknown
	stale bool      // a node joined between this node and its peer: read ring_next again
	read  int64     // monotonic time of the last ring_next read on the watch connection

	conn      atomic.Pointer[pgx.Conn]
	waiting   atomic.Pointer[peerWait] // the peer wait in flight, if any
	cancelled atomic.Bool              // cancel requests are being sent for the wait in flight
	waits     map[int64]*guardWait     // under mu: guard waits not yet served
	changed   chan struct{}            // peer changed or a guard wait arrived
}

func newRing(e *Elector) *ring {
	return &ring{e: e, waits: map[int64]*guardWait{}, changed: make(chan struct{}, 1)}
}

func (r *ring) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// interrupt cuts a peer wait in flight so the loop looks at its inputs again. A
// cancel request that reaches the server before the statement has started is
// ignored there (the backend is idle), so cancel requests are repeated, further
// and further apart, until that very wait has ended. One that arrives late is
// harmless: a cancelled statement is simply run again.
func (r *ring) interrupt() {
	r.signal()
	w := r.waiting.Load()
	if w == nil || !r.cancelled.CompareAndSwap(false, true) {
		return // nothing to cut, or cancel requests are on their way already
	}
	c := r.conn.Load()
	if c == nil {
		return
	}
	go func() {
		for d := time.Millisecond; r.waiting.Load() == w; d = min(2*d, 100*time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = c.PgConn().CancelRequest(ctx)
			cancel()
			time.Sleep(d)
		}
	}()
}

// setPeer records the peer a heartbeat that started at the monotonic time since
// reported and, if it changed, re-aims the wait. A report older than the watch
// connection's own last read of the ring is ignored.
func (r *ring) setPeer(p *ringPeer, since int64) {
	r.mu.Lock()
	if since < r.read {
		r.mu.Unlock()
		return
	}
	same := (r.peer == nil && p == nil) || (r.peer != nil && p != nil && *r.peer == *p)
	r.peer = p
	r.mu.Unlock()
	if same {
		return
	}
	if w := r.waiting.Load(); w != nil && p != nil && w.peer == *p {
		return
	}
	r.interrupt()
}

// joined re-aims the wait at once when the node that just joined is this node's
// new successor (it falls between this node and its current peer).
func (r *ring) joined(node string) {
	me := r.e.cfg.NodeID
	r.mu.Lock()
	p := r.peer
	next := p == nil || between(me, node, p.node)
	if next {
		r.stale = true
	}
	r.mu.Unlock()
	if next {
		r.interrupt()
	}
}

// reread makes the loop read its peer again (ring_next) at once. A new session
// LISTENs from its start on: a node that joined before that (before this node's
// first session, or while it had none) announced itself to no one here, and the
// ring's last read may predate it. Missed, the node that joined right after this
// one's first read went unwatched until this node's next heartbeat (the crash
// benchmark's first kill took ≈450 ms about one run in thirty).
func (r *ring) reread() {
	r.mu.Lock()
	r.stale = true
	r.mu.Unlock()
	r.interrupt()
}

// between reports whether x comes after a and before b going around the ring in
// node_id order (b == a: the whole ring but a).
func between(a, x, b string) bool {
	if a < b {
		return a < x && x < b
	}
	return x > a || x < b
}

func (r *ring) currentPeer() *ringPeer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peer
}

// awaitFree waits until no session holds key exclusively (true), or until the
// monotonic deadline (false), whichever comes first; false too when ctx ends.
// Concurrent waits for the same key share one statement.
func (r *ring) awaitFree(ctx context.Context, key int64, deadline int64) bool {
	left := time.Duration(deadline - monotime.Now())
	if left <= 0 {
		return false
	}
	r.mu.Lock()
	w := r.waits[key]
	if w == nil {
		w = &guardWait{key: key, deadline: deadline, done: make(chan struct{})}
		r.waits[key] = w
	} else if deadline > w.deadline {
		w.deadline = deadline
	}
	r.mu.Unlock()
	r.interrupt()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-w.done:
		return w.free
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// nextWait takes a guard wait to serve, if any.
func (r *ring) nextWait() *guardWait {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, w := range r.waits {
		delete(r.waits, k)
		return w
	}
	return nil
}

// loop runs until ctx ends; it owns the watch connection.
func (r *ring) loop(ctx context.Context) {
	e := r.e
	failures := 0
	aimed := &ringPeer{} // the peer the loop last aimed at (nil: alone); none yet
	reported := ""       // the peer whose loss this loop announced since it last aimed
	defer func() {
		if c := r.conn.Swap(nil); c != nil {
			c.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		conn := r.conn.Load()
		if conn == nil || conn.IsClosed() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := e.dial(cctx, "watch", false, 0)
			cancel()
			if err != nil {
				failures++
				if ctx.Err() == nil {
					e.log.Warn("cannot open the watch connection", "node", e.cfg.NodeID, "err", err, "attempt", failures)
				}
				r.serveExpired()
				sleepCtx(ctx, backoff(failures))
				continue
			}
			r.conn.Store(c)
			conn = c
			// Learn the peer at once rather than at the next heartbeat.
			if p, err := r.fetchPeer(ctx, conn); err == nil {
				r.mu.Lock()
				r.peer = p
				r.mu.Unlock()
			}
		}
		if w := r.nextWait(); w != nil {
			r.serveGuard(ctx, conn, w)
			continue
		}
		r.mu.Lock()
		stale := r.stale
		r.stale = false
		r.mu.Unlock()
		if stale {
			if p, err := r.fetchPeer(ctx, conn); err == nil {
				r.mu.Lock()
				r.peer = p
				r.mu.Unlock()
			}
		}
		p := r.currentPeer()
		if !samePeer(aimed, p) {
			aimed = p
			r.claimUnwatched(p, reported)
		}
		reported = ""
		if p == nil {
			select {
			case <-r.changed:
			case <-ctx.Done():
			}
			continue
		}
		r.cancelled.Store(false)
		r.waiting.Store(&peerWait{peer: *p})
		if r.hasWaits() { // arrived after nextWait looked: serve it first
			r.waiting.Store(nil)
			continue
		}
		free, err := await(ctx, conn, p.beacon, peerWaitSlice)
		r.waiting.Store(nil)
		switch {
		case err != nil && isCancel(err):
			continue // interrupted: a guard wait, or a new peer
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			failures++
			e.log.Warn("watching a peer failed", "node", e.cfg.NodeID, "peer", p.node, "err", err)
			if c := r.conn.Swap(nil); c != nil {
				c.Close(context.Background())
			}
			sleepCtx(ctx, backoff(failures))
			continue
		}
		failures = 0
		if !free {
			continue
		}
		// The peer's leadership session is gone: its backend is releasing its
		// scope locks (some may still be held for a moment: retryEnded).
		e.log.Info("peer lost", "node", e.cfg.NodeID, "peer", p.node)
		if sess := e.currentSession(); sess != nil {
			sess.ended.noteEnded(p.node)
		}
		e.claimScopesOf(p.node, true)
		reported = p.node
		next, err := r.fetchPeer(ctx, conn)
		r.mu.Lock()
		if r.peer != nil && *r.peer == *p {
			r.peer = nil
			if err == nil {
				r.peer = next
			}
		}
		r.mu.Unlock()
	}
}

func samePeer(a, b *ringPeer) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// claimUnwatched claims, whenever the loop aims at a new peer p (nil: this node
// is alone), the scopes whose holder as this node last saw it lies between this
// node and p on the ring. The ring skips a node whose beacon is free, so such a
// holder is dead, and it died while nobody watched it: the watch passes from a
// node's old successor to a node joining between them, and a holder that dies
// after the old watcher turned to the newcomer and before the newcomer aimed at
// it is reported by no watch. Without this its scopes waited for the next
// heartbeat (the crash benchmark's first kill, right after the nodes start,
// took ≈460 ms about one run in three). A holder that is alive after all (it
// joined after the ring was read) costs one claim that finds it. reported is
// skipped: this loop has just announced its loss and claimed its scopes, whose
// outcomes may not have reached the scopes yet.
func (r *ring) claimUnwatched(p *ringPeer, reported string) {
	e := r.e
	peer := ""
	if p != nil {
		peer = p.node
	}
	observed := make([]string, 0, len(e.order))
	for _, sc := range e.order {
		observed = append(observed, sc.observed())
	}
	for _, h := range unwatchedHolders(e.cfg.NodeID, peer, observed) {
		if h == reported {
			continue
		}
		e.log.Info("holder died unwatched", "node", e.cfg.NodeID, "holder", h, "peer", peer)
		e.claimScopesOf(h, true)
	}
}

// unwatchedHolders returns, once each, the holders in observed that lie strictly
// between me and peer on the ring ("" peer: anywhere but me).
func unwatchedHolders(me, peer string, observed []string) []string {
	end := cmp.Or(peer, me)
	var out []string
	for _, h := range observed {
		if h == "" || h == me || h == peer || slices.Contains(out, h) || !between(me, h, end) {
			continue
		}
		out = append(out, h)
	}
	return out
}

func (r *ring) hasWaits() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waits) > 0
}

// serveGuard waits for a guard on conn; a cancel aimed at a peer wait is retried.
func (r *ring) serveGuard(ctx context.Context, conn *pgx.Conn, w *guardWait) {
	defer close(w.done)
	for {
		r.mu.Lock()
		deadline := w.deadline
		r.mu.Unlock()
		left := time.Duration(deadline - monotime.Now())
		if left <= 0 {
			return
		}
		free, err := await(ctx, conn, w.key, left)
		switch {
		case err != nil && isCancel(err):
			continue
		case err != nil:
			if c := r.conn.Swap(nil); c != nil {
				c.Close(context.Background())
			}
			return
		case !free && monotime.Now() < deadline:
			continue // one await is at most maxAwait: wait again until the deadline
		}
		w.free = free
		return
	}
}

// serveExpired answers guard waits while there is no connection: each caller
// waits out its deadline itself.
func (r *ring) serveExpired() {
	for w := r.nextWait(); w != nil; w = r.nextWait() {
		close(w.done)
	}
}

func (r *ring) fetchPeer(ctx context.Context, conn *pgx.Conn) (*ringPeer, error) {
	r.mu.Lock()
	r.read = monotime.Now()
	r.mu.Unlock()
	var p ringPeer
	err := conn.QueryRow(ctx, "SELECT node_id, beacon_key FROM pgleader.ring_next($1)", r.e.cfg.NodeID).Scan(&p.node, &p.beacon)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// maxAwait is the longest wait one call of pgleader.await_release may ask for
// (the function refuses more: PLF11).
const maxAwait = time.Minute

// await waits on conn until no session holds key exclusively (true) or timeout
// passes (false). The wait is at least a millisecond and at most maxAwait: a
// caller that must wait longer calls again.
func await(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key int64, timeout time.Duration) (bool, error) {
	// Whole milliseconds, rounded up: a wait that bounds a predecessor's trust must
	// never end early.
	ms := int64((min(max(timeout, time.Millisecond), maxAwait) + time.Millisecond - 1) / time.Millisecond)
	var free bool
	if err := conn.QueryRow(ctx, "SELECT pgleader.await_release($1, $2)", key, ms).Scan(&free); err != nil {
		return false, fmt.Errorf("await release of %d: %w", key, err)
	}
	return free, nil
}

func isCancel(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// claimScopesOf claims every scope this node follows whose holder was node (or is
// unknown), or that a handover reserved for node, in one round trip; announce adds
// the node_lost notification that tells the other nodes (the ring watcher of node
// announces, the others only claim).
func (e *Elector) claimScopesOf(node string, announce bool) {
	sess := e.currentSession()
	if sess == nil {
		return
	}
	var scopes []*Scope
	for _, sc := range e.order {
		if h := sc.observed(); h == node || h == "" || sc.reservedFor() == node {
			scopes = append(scopes, sc)
		}
	}
	ann := ""
	if announce {
		ann = node
	}
	sess.requestClaims(scopes, ann)
}
