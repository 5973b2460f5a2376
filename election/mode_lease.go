package election

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/protocol"
)

// Lease mode (Config.Mode = ModeLease; schema version 9). A scope is held by its
// row, not by an advisory lock: the holder renews the lease with every heartbeat
// (lease_seq + 1), and a follower may claim a held scope only once it has watched
// the lease unchanged for a whole lease (SessionLease, L) on its own monotonic
// clock, with a compare-and-swap on the lease_seq it watched. The session is one
// connection, every statement its own transaction, so it works through a
// transaction pooler; there is no guard, beacon, ring or LISTEN.
//
// No overlap. The holder's heartbeat that produced lease_seq q started at s (its
// clock) and was committed at u ≥ s; its gate stays open until s + W. A follower
// saw q at a read that returned at o ≥ u, and claims no earlier than o + L on its
// clock, with q still current: by then the holder has not renewed, and its gate
// closed at s + W ≤ o + W < o + L, as long as L − W covers the difference between
// the two clocks' rates over L. A frozen or partitioned holder is the same case;
// a clean release (resign, drain) closes the gate before the release commits.
// Claims of a free scope (released, or never claimed) need no wait. So a new
// term's gate opens at once, without the lock mode's wait for predecessors.
//
// Liveness. Followers learn of a free lease only from their own heartbeats
// (notifications do not cross a transaction pooler), so a released scope is
// claimed within I. A follower that first saw lease_seq q at o claims at o + L
// (a timer, not the next heartbeat), and o is at most one interval after the
// holder's last renewal: a crashed holder is replaced within L + I of it.

// leaseMode is lease mode (see above). Where each rule lives:
//
//	open               openLeaseSession: one connection, lease_register
//	heartbeat          leaseHeartbeat (lease_heartbeat), armLeaseTimer, leaseRunsOut
//	claim              runLeaseClaims (lease_claim_scopes, expecting the watched lease_seq)
//	armGuard           nothing: there is no guard
//	awaitPredecessors  nothing: the claim waited out the predecessor's lease
//	release, stop      lease_release_batch, lease_stopped
type leaseMode struct{ database }

var _ sessionMode = leaseMode{}

// connConfig: through a transaction pooler a named prepared statement of one
// client may meet another's on a shared server connection: unnamed statements
// only.
func (m leaseMode) connConfig() (*pgx.ConnConfig, error) {
	base, err := m.database.connConfig()
	if err != nil {
		return nil, err
	}
	base.DefaultQueryExecMode = pgx.QueryExecModeExec
	return base, nil
}

// start: no check of the path to the server, which may be a transaction pooler.
func (m leaseMode) start(ctx context.Context) error { return m.startChecks(ctx, nil) }

// run campaigns beside the leadership session loop; there is no ring: followers
// poll with their heartbeats and lease timers.
func (m leaseMode) run(ctx context.Context) error { return m.e.campaignAll(ctx, m, nil) }

func (m leaseMode) open(ctx context.Context) (*session, error) { return m.e.openLeaseSession(ctx) }

func (leaseMode) heartbeat(s *session) { s.leaseHeartbeat() }

func (leaseMode) beforeClaim(*session) {}

func (leaseMode) claim(ctx context.Context, s *session, names []string, _ []int64, scopes []*Scope, _ *string) ([]claimResult, error) {
	got, err := s.runLeaseClaims(ctx, names, scopes)
	if err != nil && s.lead.IsClosed() {
		go s.lose(protocol.ReasonLostConnection, err)
	}
	return got, err
}

func (leaseMode) armGuard(context.Context, *session, int64) error { return nil }

func (leaseMode) awaitPredecessors(context.Context, *Scope, *term, *session, claimResult) {}

func (leaseMode) releaseQuery(ctx context.Context, s *session, q querier, names []string, epochs []int64, reasons []string) (pgx.Rows, error) {
	return q.Query(ctx, leaseReleaseBatchSQL, s.e.cfg.NodeID, s.leaseToken, names, epochs, reasons)
}

func (leaseMode) stopped(ctx context.Context, s *session) error {
	_, err := s.lead.Exec(ctx, "SELECT pgleader.lease_stopped($1, $2)", s.e.cfg.NodeID, s.leaseToken)
	return err
}

// leaseConnConfig is the configuration of a lease-mode connection: the caller's,
// with only what a transaction pooler passes on. No session settings (a pooler
// refuses or drops them, and they would not outlive the transaction), and the
// extended protocol with unnamed statements (QueryExecModeExec), which needs no
// prepared statement to survive between transactions. pgsession.Connect adds the
// search_path where the path to the server takes it; every statement of a lease
// session is one call of a schema-qualified pgleader function with parameters as
// arguments, which resolves no name through the session's search_path.
func (e *Elector) leaseConnConfig() *pgx.ConnConfig {
	c := e.base.Copy()
	c.DialFunc = withKeepalive(c.DialFunc, net.KeepAliveConfig{Enable: true,
		Idle: max(e.cfg.SessionLease, time.Second), Interval: time.Second, Count: 3})
	c.DefaultQueryExecMode = pgx.QueryExecModeExec
	// One application_name for every lease session, not one per node: PgBouncer
	// gives each transaction the client's application_name, with a SET of its own
	// (a transaction more) whenever the server connection last served a client
	// with another name. Through a pooler, a server connection is no node's.
	c.RuntimeParams["application_name"] = leaseApplicationName
	return c
}

// leaseApplicationName is the application_name of every lease-mode session.
const leaseApplicationName = "pgleader lease"

// openLeaseSession opens a lease-mode session: one connection, registered under
// a random token that binds its heartbeats, claims and releases.
func (e *Elector) openLeaseSession(ctx context.Context) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsession.Connect(cctx, e.leaseConnConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: lease session: %w", ErrUnreachable, err)
	}
	s := &session{e: e, m: leaseMode{database{e}}, lead: conn, leaseToken: randomKey(), terms: map[*term]struct{}{},
		lost: make(chan struct{}), leadReqs: make(chan leadReq), hbKick: make(chan struct{}, 1)}
	s.batch.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	c := e.cfg
	if _, err := conn.Exec(cctx, "SELECT pgleader.lease_register($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
		c.NodeID, c.Hostname, e.osPid, c.Version, c.Scopes,
		c.HeartbeatInterval.Milliseconds(), c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds(),
		s.leaseToken, c.priority(), c.ResignCooldown.Milliseconds(), c.failbackMS(), processStarted); err != nil {
		s.cancel()
		conn.Close(context.Background())
		return nil, fmt.Errorf("register node (lease mode): %w", err)
	}
	w := watchSocket(conn.PgConn().Conn(), func() {
		s.lose(protocol.ReasonLostConnection, errors.New("the server or pooler closed the connection"))
	})
	s.termsMu.Lock()
	s.watches = append(s.watches, w)
	s.termsMu.Unlock()
	if s.isLost() {
		w.stop()
	}
	s.loops.Go(s.leadLoop)
	return s, nil
}

// leaseWatch is what a follower saw of a held scope's lease: the lease_seq and
// when (monotonic) a heartbeat first returned it.
type leaseWatch struct {
	mu    sync.Mutex
	seq   int64
	since int64 // 0: not watched yet
	claim int64 // the lease_seq a queued claim expects (-1: none observed)
}

// observe records a heartbeat's view of the scope (returned at now) and reports
// whether the scope may be claimed: it is free, or its lease_seq has not changed
// for a whole lease. expect is the lease_seq the claim must find.
func (w *leaseWatch) observe(free bool, seq, now int64, lease time.Duration) (claim bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if free {
		w.claim = seq
		return true
	}
	if w.since == 0 || seq != w.seq {
		w.seq, w.since = seq, now
		return false
	}
	if now-w.since >= int64(lease) {
		w.claim = seq
		return true
	}
	return false
}

// expire reports, at now, whether the scope has been held at the same lease_seq
// for a whole lease since a heartbeat first saw it, and if so marks that
// lease_seq as the one a claim expects. A claim is then as safe as one made at a
// heartbeat: its compare-and-swap finds the lease_seq unchanged only if the
// holder renewed nothing since that first sight.
func (w *leaseWatch) expire(now int64, lease time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since == 0 || now-w.since < int64(lease) {
		return false
	}
	w.claim = w.seq
	return true
}

// runsOut returns when (monotonic) the watched lease runs out unless renewed
// (0: not watching a held scope).
func (w *leaseWatch) runsOut(lease time.Duration) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since == 0 {
		return 0
	}
	return w.since + int64(lease)
}

// expected returns the lease_seq a claim of the scope expects (-1: none, which
// matches only a free scope).
func (w *leaseWatch) expected() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claim
}

// reset forgets the watch (the scope was won).
func (w *leaseWatch) reset() {
	w.mu.Lock()
	w.since, w.claim = 0, -1
	w.mu.Unlock()
}

// leaseView is a heartbeat's row for a followed scope.
type leaseView struct {
	scope  string
	epoch  int64
	holder *string // nil: free
	seq    int64
	to     *string // free and reserved by a handover for this node (nil: not)
}

const leaseHeartbeatSQL = "SELECT kind, scope, ok, epoch, holder, seq, resign, handover FROM pgleader.lease_heartbeat($1, $2, $3, $4, $5)"

// leaseHeartbeat is the heartbeat of a lease-mode session: it renews the led
// scopes' leases and reads the followed ones, claiming those that are free or
// whose lease it has watched run out.
func (s *session) leaseHeartbeat() {
	e := s.e
	terms, scopes, epochs := s.termsSnapshot()
	led := map[*Scope]bool{}
	for _, t := range terms {
		led[t.scope] = true
	}
	var follow []string
	for _, sc := range e.order {
		if !led[sc] {
			follow = append(follow, sc.name)
		}
	}
	rt := s.hb.next()
	ok, resign, handover := rt.ok, rt.resign, rt.handover
	rt.ran = s.leadDo(func() {
		ctx, cancel := s.stmtCtx(e.cfg.HeartbeatTimeout)
		defer cancel()
		rt.start = monotime.Now()
		rows, err := s.lead.Query(ctx, leaseHeartbeatSQL, e.cfg.NodeID, s.leaseToken, scopes, epochs, follow)
		if err == nil {
			var kind string
			var scope, holder, to *string
			var good, wantResign bool
			var epoch, seq *int64
			_, err = pgx.ForEachRow(rows, []any{&kind, &scope, &good, &epoch, &holder, &seq, &wantResign, &to}, func() error {
				switch {
				case kind == "led" && scope != nil:
					ok[*scope] = good
					resign[*scope] = wantResign
					if to != nil {
						handover[*scope] = *to
					}
				case kind == "follow" && scope != nil && epoch != nil && seq != nil:
					var me *string
					if to != nil && *to == e.cfg.NodeID {
						me = to
					}
					rt.leases = append(rt.leases, leaseView{*scope, *epoch, holder, *seq, me})
				}
				return nil
			})
		}
		rt.err = err
	}) == nil // not run: the session is lost
	if !rt.ran {
		return
	}
	start, err, seen := rt.start, rt.err, rt.leases
	now := monotime.Now() // after the read returned: later than every renewal it saw
	latency := time.Duration(now - start)
	if err == nil && latency >= e.cfg.HeartbeatTimeout {
		err = fmt.Errorf("heartbeat took %v, timeout is %v", latency, e.cfg.HeartbeatTimeout)
	}
	if err != nil {
		s.heartbeatFailed(err, latency, terms)
		return
	}
	e.lastHeartbeat.Store(&heartbeatMark{mono: start, wall: time.Now()})
	var claim []*Scope
	for _, v := range seen {
		sc := e.scopes[v.scope]
		if sc == nil {
			continue
		}
		if v.holder != nil && *v.holder != e.cfg.NodeID {
			sc.observe(*v.holder, v.epoch)
		}
		if v.to != nil { // the database's word, not a hint: ends a cooldown (coolDown)
			sc.reserve(*v.to, v.epoch)
		}
		if sc.lease.observe(v.holder == nil, v.seq, now, e.cfg.SessionLease) {
			claim = append(claim, sc)
		}
	}
	if len(claim) > 0 {
		s.requestClaims(claim, "")
	}
	s.armLeaseTimer(heldByOthers(e, seen, claim))
	s.confirmTerms(terms, ok, resign, handover, start, latency)
}

// armLeaseTimer sets the session's lease timer to the moment the first of the
// watched leases runs out, so that a follower claims a dead holder's scope then,
// not at its next heartbeat after: a crashed holder is replaced within L plus a
// heartbeat interval of its last renewal, not L plus two.
func (s *session) armLeaseTimer(watched []*Scope) {
	lease := s.e.cfg.SessionLease
	var first int64
	for _, sc := range watched {
		if at := sc.lease.runsOut(lease); at != 0 && (first == 0 || at < first) {
			first = at
		}
	}
	s.termsMu.Lock()
	defer s.termsMu.Unlock()
	if s.leaseTimer != nil {
		s.leaseTimer.Stop()
	}
	if first == 0 || s.isLost() {
		return
	}
	s.leaseTimer = time.AfterFunc(time.Duration(first-monotime.Now()), func() { s.leaseRunsOut(watched) })
}

// leaseRunsOut claims those of the watched scopes whose lease ran out unrenewed.
func (s *session) leaseRunsOut(watched []*Scope) {
	if s.isLost() {
		return
	}
	now := monotime.Now()
	var claim []*Scope
	for _, sc := range watched {
		if sc.lease.expire(now, s.e.cfg.SessionLease) {
			claim = append(claim, sc)
		}
	}
	if len(claim) > 0 {
		s.requestClaims(claim, "")
	}
}

// heldByOthers returns the scopes a heartbeat saw held by another node, less
// those it queued claims for.
func heldByOthers(e *Elector, seen []leaseView, claimed []*Scope) []*Scope {
	var out []*Scope
	for _, v := range seen {
		sc := e.scopes[v.scope]
		if sc == nil || v.holder == nil || *v.holder == e.cfg.NodeID || slices.Contains(claimed, sc) {
			continue
		}
		out = append(out, sc)
	}
	return out
}

// runLeaseClaims is a lease-mode session's claim batch.
func (s *session) runLeaseClaims(ctx context.Context, names []string, scopes []*Scope) ([]claimResult, error) {
	c := s.e.cfg
	seqs := make([]int64, len(scopes))
	for i, sc := range scopes {
		seqs[i] = sc.lease.expected()
	}
	rows, err := s.lead.Query(ctx, leaseClaimBatchSQL, c.NodeID, s.leaseToken, c.Hostname,
		c.HeartbeatInterval.Milliseconds(), c.HeartbeatTimeout.Milliseconds(),
		c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds(), names, seqs)
	if err != nil {
		return nil, err
	}
	got, err := scanClaims(rows)
	for _, r := range got {
		if sc := s.e.scopes[r.scope]; sc != nil && r.acquired {
			sc.lease.reset() // won: its own lease from now on
		}
	}
	return got, err
}

const leaseClaimBatchSQL = `SELECT scope, acquired, busy, epoch, holder, prev_holder, prev_epoch, prev_closed,
	        prev_guard_key, prev_guard_held, prev_trust_ms, prev_reason, wait_guards, deferred_to
	   FROM pgleader.lease_claim_scopes($1, $2, $3, $4, $5, $6, $7, $8, $9)`

const leaseReleaseBatchSQL = "SELECT scope, ok, busy FROM pgleader.lease_release_batch($1, $2, $3, $4, $5)"
