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

// peerWait identifies one peer wait statement (a new one per statement); peer
// is nil while the node is alone (the statement then sleeps).
type peerWait struct{ peer *ringPeer }

// peerWaitSlice bounds one peer wait statement; the loop re-issues it. A statement
// blocked on a lock holds its snapshot, and so the database's xmin horizon, for as
// long as it waits: a wait without end kept vacuum from removing any row version
// written since, and at a thousand scopes the heartbeats' updates bloated
// leader_state by 30 MB in a minute, until heartbeats missed their deadline. Each
// slice costs one short read-only transaction (no re-read: see loop): 0.25 per
// heartbeat interval at the defaults. A 5 s slice measured 88 % HOT updates and a
// table still growing (12 MB after a minute at 1,000 scopes); 2 s, 98 % and a
// steady 2.2 MB.
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

// ring owns the node's third connection, the watch connection: the node's
// doorbell and its ring watch (see "The doorbell" in the package doc). Every
// statement on it is pgleader.watch: a re-read, in order with every transaction
// that rang this node, of what the node should act on (returned when it holds
// something new; skipped after a wait that ran out with nothing new), then a
// wait on the beacon of one peer (the ring successor): the statement returns
// within a millisecond of that peer's leadership session ending, however it
// ended, and the node then claims the peer's scopes and rings the other
// candidates (node_lost). It also serves a new term's waits for its
// predecessors' guards, which take precedence: the peer wait is interrupted (a
// cancel request) and resumed after. A doorbell and an interruption end the
// statement alike (57014); the loop calls watch again, whose re-read is what
// the node acts on.
type ring struct {
	e *Elector

	mu    sync.Mutex
	peer  *ringPeer // from the last heartbeat (or watch); nil: alone, or unknown
	stale bool      // forget what the last re-read returned: the next returns everything
	read  int64     // monotonic time of the last watch re-read that returned rows
	bell  string    // why the doorbell cannot ring ("": it can; "?": not registered yet)

	conn      atomic.Pointer[pgx.Conn]
	waiting   atomic.Pointer[peerWait] // the peer wait in flight, if any
	cancelled atomic.Bool              // cancel requests are being sent for the wait in flight
	waits     map[int64]*guardWait     // under mu: guard waits not yet served
	changed   chan struct{}            // peer changed or a guard wait arrived
}

func newRing(e *Elector) *ring {
	return &ring{e: e, bell: "?", waits: map[int64]*guardWait{}, changed: make(chan struct{}, 1)}
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
	if w := r.waiting.Load(); w != nil && samePeer(w.peer, p) {
		return
	}
	r.interrupt()
}

// reread makes the next watch call return everything it reads, whether or not
// this loop has seen it, and cuts the wait in flight: a new leadership session
// registered the node again, and what changed while it had none (its ring
// peer, free scopes) is acted on now rather than at the next change.
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

// loop runs until ctx ends; it owns the watch connection. It opens the
// connection once the node has a leadership session (the doorbell registers for
// a live registered node), registers the doorbell, and then calls watch, again
// after every outcome: a call that follows a cancel (a ring) re-reads after the
// ringer's commit. A call that follows a wait that ran out with nothing new only
// waits, unless the doorbell row has had a locker since that wait began: a ring
// that found the session between the two statements, which the server ignored
// (pgleader.watch reads first then).
func (r *ring) loop(ctx context.Context) {
	e := r.e
	failures := 0
	aimed := &ringPeer{} // the peer the loop last aimed at (nil: alone); none yet
	reported := ""       // the peer whose loss this loop announced since it last aimed
	var seen []int32     // the hashes of the rows of the last re-read that returned
	readFirst := true    // the next watch re-reads first (false: a wait ran out, nothing rang)
	defer func() {
		if c := r.conn.Swap(nil); c != nil {
			c.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		conn := r.conn.Load()
		if conn == nil || conn.IsClosed() {
			if e.awaitSession(ctx) == nil {
				return
			}
			c, err := r.open(ctx)
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
			// Learn the peer at once, before aiming: a loop that aimed at
			// nobody would take every holder for unwatched.
			if seen, err = r.readNow(ctx, conn, ""); err != nil {
				continue // a cancel, or a broken connection (closed): again
			}
		}
		if w := r.nextWait(); w != nil {
			seen = r.serveGuard(ctx, conn, w, seen)
			readFirst = true
			continue
		}
		r.mu.Lock()
		if r.stale {
			r.stale, seen, readFirst = false, nil, true
		}
		r.mu.Unlock()
		p := r.currentPeer()
		if !samePeer(aimed, p) {
			aimed = p
			r.claimUnwatched(p, reported)
			reported = ""
		}
		r.cancelled.Store(false)
		r.waiting.Store(&peerWait{peer: p})
		if r.hasWaits() { // arrived after nextWait looked: serve it first
			r.waiting.Store(nil)
			continue
		}
		var key *int64
		if p != nil {
			key = &p.beacon
		}
		res, err := r.watch(ctx, conn, key, peerWaitSlice, seen, readFirst)
		r.waiting.Store(nil)
		// Only a wait that ran out with nothing to act on is followed by a bare
		// wait (a re-read per slice cost a transaction ID and a commit record);
		// the bare wait re-reads anyway if a ring came in between.
		readFirst = err != nil || res.rows || (p != nil && res.free)
		switch {
		case err != nil && isCancel(err):
			continue // a doorbell, or interrupted (a guard wait, a new peer): re-read
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			failures++
			e.log.Warn("watch failed", "node", e.cfg.NodeID, "err", err)
			if c := r.conn.Swap(nil); c != nil {
				c.Close(context.Background())
			}
			sleepCtx(ctx, backoff(failures))
			continue
		}
		failures = 0
		if res.rows {
			seen = res.seen
			r.act(res, "")
			continue
		}
		if p == nil || !res.free {
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
		// The next peer, now: the re-read names it (its claim rows for the lost
		// peer's scopes are left to the claim just queued).
		var err2 error
		if seen, err2 = r.readNow(ctx, conn, p.node); err2 != nil {
			r.mu.Lock()
			if r.peer != nil && *r.peer == *p {
				r.peer = nil
			}
			r.mu.Unlock()
		}
	}
}

// readNow re-reads at once, returning every row whatever this loop has seen,
// and acts on it (claim rows naming except are skipped); with no row at all the
// node is alone. It returns the rows' hashes. A cancel leaves the state as it
// was (the caller re-reads later); another error closes the connection.
func (r *ring) readNow(ctx context.Context, conn *pgx.Conn, except string) ([]int32, error) {
	res, err := r.watch(ctx, conn, nil, time.Millisecond, nil, true)
	if err != nil {
		r.mu.Lock()
		r.stale = true
		r.mu.Unlock()
		if !isCancel(err) {
			if c := r.conn.Swap(nil); c != nil {
				c.Close(context.Background())
			}
		}
		return nil, err
	}
	r.act(res, except)
	return res.seen, nil
}

// open dials the watch connection and registers it as the node's doorbell; it
// logs once, and again whenever the answer changes, when the doorbell cannot
// ring (the node then learns of changes from its heartbeats, within I).
func (r *ring) open(ctx context.Context) (*pgx.Conn, error) {
	e := r.e
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := e.dial(cctx, "watch", false, 0)
	if err != nil {
		return nil, err
	}
	var ringable bool
	var why *string
	if err := c.QueryRow(cctx, "SELECT ringable, why_not FROM pgleader.doorbell_register($1)", e.cfg.NodeID).Scan(&ringable, &why); err != nil {
		c.Close(context.Background())
		return nil, fmt.Errorf("register the doorbell: %w", err)
	}
	now := ""
	if !ringable {
		now = "the doorbell cannot ring"
		if why != nil {
			now = *why
		}
	}
	r.mu.Lock()
	was := r.bell
	r.bell = now
	r.mu.Unlock()
	switch {
	case now == was:
	case now != "" && c.PgConn().ParameterStatus("is_superuser") == "on":
		// A superuser login is the operator's choice (docs/security.md advises
		// against it); its cost here is latency, not safety, and a job run
		// under it (pgleader run from cron) must stay quiet on success. The
		// table says why (doorbells.why_not) for pgleader status.
		e.log.Info("doorbell unavailable: wake-ups come from heartbeats (within one interval)",
			"node", e.cfg.NodeID, "why", now, "interval", e.cfg.HeartbeatInterval)
	case now != "":
		e.log.Warn("doorbell unavailable: wake-ups come from heartbeats (within one interval)",
			"node", e.cfg.NodeID, "why", now, "interval", e.cfg.HeartbeatInterval)
	case was != "?":
		e.log.Info("doorbell available again", "node", e.cfg.NodeID)
	}
	return c, nil
}

// watchResult is one answer of pgleader.watch: rows to act on (rows), or the
// wait's outcome (free: the awaited key is free).
type watchResult struct {
	rows     bool
	free     bool
	seen     []int32 // the hashes of the rows
	peer     *ringPeer
	claim    []watchScope
	reserved []watchScope
	request  []watchScope
}

// watchScope is a scope a re-read named, with its epoch and node (the last
// holder of a claim row, the target of a reservation or a handover request).
type watchScope struct {
	scope string
	epoch int64
	node  string
}

// watch runs one pgleader.watch on conn: the ordered re-read (unless read is
// false), then, if it held nothing new, a wait for key (a sleep when key is nil)
// of at most timeout (whole milliseconds, rounded up, at least 1, at most
// maxAwait).
func (r *ring) watch(ctx context.Context, conn *pgx.Conn, key *int64, timeout time.Duration, seen []int32, read bool) (watchResult, error) {
	var res watchResult
	ms := int64((min(max(timeout, time.Millisecond), maxAwait) + time.Millisecond - 1) / time.Millisecond)
	rows, err := conn.Query(ctx, "SELECT kind, scope, epoch, node, key, free, hash FROM pgleader.watch($1, $2, $3, $4, $5)",
		r.e.cfg.NodeID, key, ms, seen, read)
	if err != nil {
		return res, err
	}
	var (
		kind        string
		scope, node *string
		epoch, k    *int64
		free        *bool
		hash        *int32
	)
	at := monotime.Now()
	_, err = pgx.ForEachRow(rows, []any{&kind, &scope, &epoch, &node, &k, &free, &hash}, func() error {
		if kind == "wait" {
			res.free = free != nil && *free
			return nil
		}
		res.rows = true
		if hash != nil {
			res.seen = append(res.seen, *hash)
		}
		var w watchScope
		if scope != nil {
			w.scope = *scope
		}
		if epoch != nil {
			w.epoch = *epoch
		}
		if node != nil {
			w.node = *node
		}
		switch kind {
		case "peer":
			if node != nil && k != nil {
				res.peer = &ringPeer{node: *node, beacon: *k}
			}
		case "claim":
			res.claim = append(res.claim, w)
		case "reserved":
			res.reserved = append(res.reserved, w)
		case "request":
			res.request = append(res.request, w)
		}
		return nil
	})
	if err != nil {
		return watchResult{}, fmt.Errorf("watch: %w", err)
	}
	if res.rows {
		r.mu.Lock()
		r.read = at
		r.mu.Unlock()
	}
	return res, nil
}

// act does what a re-read's rows say: aim at the peer it names (nobody: alone),
// claim the free scopes (those a handover reserves for this node too, ending
// its cooldown), and heartbeat now when an operator or a failback asked this
// node to give a scope up (the heartbeat reads the request and acts on it).
func (r *ring) act(res watchResult, except string) {
	e := r.e
	r.mu.Lock()
	if p := r.peer; !samePeer(p, res.peer) && res.peer != nil && (p == nil || p.node == res.peer.node) {
		// The same node with a new beacon is a new session of it (a restart
		// that kept its id): the lock it holds is that live session's.
		if sess := e.currentSession(); sess != nil {
			sess.ended.rejoined(res.peer.node)
		}
	}
	r.peer = res.peer
	r.mu.Unlock()
	sess := e.currentSession()
	if sess == nil {
		return
	}
	var claims []*Scope
	for _, w := range res.claim {
		if sc := e.scopes[w.scope]; sc != nil && (except == "" || w.node != except) {
			sc.reserve("", w.epoch)
			claims = append(claims, sc)
		}
	}
	for _, w := range res.reserved {
		if sc := e.scopes[w.scope]; sc != nil {
			sc.reserve(e.cfg.NodeID, w.epoch) // ends its cooldown (coolDown)
			claims = append(claims, sc)
		}
	}
	if len(claims) > 0 {
		sess.requestClaims(claims, "")
	}
	for _, w := range res.request {
		if sc := e.scopes[w.scope]; sc != nil && sc.term.Load() != nil {
			sess.kickHeartbeat()
			break
		}
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

// serveGuard waits for a guard on conn, through watch, so that the session
// stays a doorbell meanwhile: rows its re-read returns are acted on and the
// wait goes on; a cancel (a doorbell, or aimed at a peer wait) is retried. It
// returns the hashes of the last rows acted on.
func (r *ring) serveGuard(ctx context.Context, conn *pgx.Conn, w *guardWait, seen []int32) []int32 {
	defer close(w.done)
	for {
		r.mu.Lock()
		deadline := w.deadline
		r.mu.Unlock()
		left := time.Duration(deadline - monotime.Now())
		if left <= 0 {
			return seen
		}
		res, err := r.watch(ctx, conn, &w.key, left, seen, true)
		switch {
		case err != nil && isCancel(err):
			continue
		case err != nil:
			if c := r.conn.Swap(nil); c != nil {
				c.Close(context.Background())
			}
			return nil
		case res.rows:
			seen = res.seen
			r.act(res, "")
			continue
		case !res.free && monotime.Now() < deadline:
			continue // one wait is at most maxAwait: wait again until the deadline
		}
		w.free = res.free
		return seen
	}
}

// serveExpired answers guard waits while there is no connection: each caller
// waits out its deadline itself.
func (r *ring) serveExpired() {
	for w := r.nextWait(); w != nil; w = r.nextWait() {
		close(w.done)
	}
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
// unknown), or that a handover reserved for node, in one round trip; announce
// makes the claim ring the doorbells of the candidates of node's other scopes
// (node_lost; the ring watcher of node announces).
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
