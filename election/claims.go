package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// claimResult is one row of pgleader.claim_scopes (lease_claim_scopes).
type claimResult struct {
	scope         string
	acquired      bool
	busy          bool // the row is locked by the previous term's fenced writers: retry soon
	epoch         *int64
	holder        *string
	prevHolder    *string
	prevEpoch     *int64
	prevClosed    *bool
	prevGuardKey  *int64
	prevGuardHeld *bool
	prevTrustMS   *int32
	prevReason    *string
	waitGuards    []int64 // guards whose holders may still trust a gate
	deferredTo    *string // not acquired: the scope waits for this node (a handover's target, a higher priority)
	start, done   int64   // monotonic, around the round trip
}

// claimOutcome is what a scope's campaign learns from a batch that included it.
type claimOutcome struct {
	sess *session
	r    claimResult
	err  error
}

const claimBatchSQL = `SELECT scope, acquired, busy, epoch, holder, prev_holder, prev_epoch, prev_closed,
	        prev_guard_key, prev_guard_held, prev_trust_ms, prev_reason, wait_guards, deferred_to
	   FROM pgleader.claim_scopes($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

func scanClaims(rows pgx.Rows) ([]claimResult, error) {
	var out []claimResult
	var r claimResult
	_, err := pgx.ForEachRow(rows, []any{&r.scope, &r.acquired, &r.busy, &r.epoch, &r.holder,
		&r.prevHolder, &r.prevEpoch, &r.prevClosed, &r.prevGuardKey, &r.prevGuardHeld,
		&r.prevTrustMS, &r.prevReason, &r.waitGuards, &r.deferredTo}, func() error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// requestClaims queues a claim of each scope whose campaign is waiting as a
// follower (others are skipped: they lead, cool down after a resignation, or have
// a claim queued already) and, when announce is not empty, a node_lost
// announcement for that node. The outcome reaches each scope's campaign.
func (s *session) requestClaims(scopes []*Scope, announce string) {
	q := &s.batch
	q.mu.Lock()
	if q.closed || s.isLost() {
		// Nobody would answer: a scope marked queued here would never be claimed
		// again, by this session or the next. The next session claims every scope
		// when it opens.
		q.mu.Unlock()
		return
	}
	for _, sc := range scopes {
		if sc.queueClaim(s) {
			q.claims = append(q.claims, sc)
		}
	}
	if announce != "" {
		q.announce = append(q.announce, announce)
	}
	q.mu.Unlock()
	q.poke()
}

func (s *session) runClaims(scopes []*Scope, announce string) {
	e := s.e
	c := e.cfg
	names := make([]string, len(scopes))
	keys := make([]int64, len(scopes))
	for i, sc := range scopes {
		names[i], keys[i] = sc.name, sc.key
	}
	var ann *string
	if announce != "" {
		ann = &announce
	}
	ctx, cancel := s.stmtCtx(s.batchTimeout())
	defer cancel()
	if len(scopes) > 0 {
		s.m.beforeClaim(s)
	}
	var got []claimResult
	var start, done int64
	var err error
	if lerr := s.leadDo(func() {
		start = monotime.Now()
		got, err = s.m.claim(ctx, s, names, keys, scopes, ann)
		done = monotime.Now()
	}); lerr != nil {
		err = lerr // not run: the session is lost
	}
	if err != nil {
		if !errors.Is(err, errSessionLost) {
			e.log.Warn("claim failed", "node", c.NodeID, "scopes", len(scopes), "err", err)
		}
		for _, sc := range scopes {
			sc.deliver(claimOutcome{sess: s, err: err})
		}
		return
	}
	e.log.Debug("claim batch", "node", c.NodeID, "scopes", len(scopes), "announce", announce,
		"start_mono_ns", start, "took", time.Duration(done-start))
	byName := make(map[string]claimResult, len(got))
	var blocked []string
	for _, r := range got {
		r.start, r.done = start, done
		byName[r.scope] = r
		if !r.acquired && !r.busy && r.holder == nil && r.deferredTo == nil {
			blocked = append(blocked, r.scope)
		}
	}
	defer s.nameBlockers(blocked)
	defer s.endStaleFenced(got)
	for _, sc := range scopes {
		r, ok := byName[sc.name]
		if !ok {
			sc.deliver(claimOutcome{sess: s, err: fmt.Errorf("claim of %s: no row returned", sc.name)})
			continue
		}
		if h := e.test.claimReturned; h != nil {
			h(sc, r)
		}
		sc.deliver(claimOutcome{sess: s, r: r})
	}
}

// retryEnded re-claims the scopes of got that are still locked by a node whose
// leadership session this node has just seen end, until they are free or
// retryEndedBudget has passed; it returns got with their newest rows. Runs in a
// leadDo request (leadLoop).
//
// The ring watch wakes when a dead leader's beacon is freed, but its backend
// releases its locks one lock-table partition at a time (LockReleaseAll), and
// can be preempted in between: the watcher's claim may find a scope lock not yet
// released (seen as that node still holding the scope), and without a retry the
// scope would wait for the next heartbeat (one interval: 304 and 441 ms in
// `bench failover`, twice in about ten 40-kill runs of a build that closed the
// leadership socket first). The dying backend frees the rest within
// milliseconds. Rather than poll, the retry waits for the first such lock on the
// leadership connection (await_release: a shared lock, given back at once), so it
// claims again the moment that backend lets go, not up to a doubled pause later.
func (s *session) retryEnded(ctx context.Context, got []claimResult, scopes []*Scope) ([]claimResult, error) {
	c := s.e.cfg
	byName := make(map[string]*Scope, len(scopes))
	for _, sc := range scopes {
		byName[sc.name] = sc
	}
	budget := min(retryEndedBudget, c.HeartbeatTimeout/4)
	start := monotime.Now()
	for {
		var names []string
		var keys []int64
		for _, r := range got {
			if r.acquired || r.busy || r.deferredTo != nil {
				continue
			}
			// The holder on record, or (its lock seen free by the time the claim
			// read the lock table: holder NULL) the holder this node last saw.
			if h := r.holder; (h != nil && s.ended.justEnded(*h)) || (h == nil && s.ended.justEnded(byName[r.scope].observed())) {
				names, keys = append(names, r.scope), append(keys, byName[r.scope].key)
			}
		}
		left := budget - time.Duration(monotime.Now()-start)
		if len(names) == 0 || left < time.Millisecond {
			return got, nil
		}
		if h := s.e.test.retryWait; h != nil {
			h(names)
		}
		free, err := await(ctx, s.lead, keys[0], left)
		if err != nil {
			return nil, err
		}
		if !free {
			return got, nil // still held when the budget ran out: the next heartbeat reports it
		}
		again, err := s.claimBatch(ctx, s.lead, names, keys, nil)
		if err != nil {
			return nil, err
		}
		s.e.log.Debug("claim retried: the lost holder's backend still held the lock", "node", c.NodeID,
			"scopes", names, "won", countAcquired(again))
		byRow := make(map[string]claimResult, len(again))
		for _, r := range again {
			byRow[r.scope] = r
		}
		for i := range got {
			if r, ok := byRow[got[i].scope]; ok {
				got[i] = r
			}
		}
	}
}

// claimBatch runs pgleader.claim_scopes for names (keys alongside) on q — the
// leadership connection, or the warm-up's transaction on it — announcing ann's
// loss if ann is not nil.
func (s *session) claimBatch(ctx context.Context, q querier, names []string, keys []int64, ann *string) ([]claimResult, error) {
	c := s.e.cfg
	rows, err := q.Query(ctx, claimBatchSQL, c.NodeID, c.Hostname, s.guardKey,
		c.HeartbeatInterval.Milliseconds(), c.HeartbeatTimeout.Milliseconds(),
		c.TrustWindow.Milliseconds(), c.SessionLease.Milliseconds(), names, keys, ann)
	if err != nil {
		return nil, err
	}
	return scanClaims(rows)
}

// retryEndedBudget bounds retryEnded (and a quarter of the heartbeat timeout).
const retryEndedBudget = 100 * time.Millisecond

func countAcquired(rs []claimResult) int {
	n := 0
	for _, r := range rs {
		if r.acquired {
			n++
		}
	}
	return n
}

// reconcileLocked makes sure a failed claim batch left no advisory lock behind:
// claim_scopes gives its locks back in its exception handler, but a cancelled
// statement or a commit-time error escapes that handler, and a lock kept that way
// would stack under the next claim and outlive its release. A connection that is
// gone took its locks with it. Runs in a leadDo request (leadLoop).
func (s *session) reconcileLocked(keys []int64, cause error) {
	if s.lead.IsClosed() {
		go s.lose(protocol.ReasonLostConnection, cause)
		return
	}
	var pe *pgconn.PgError
	if !errors.As(cause, &pe) {
		go s.lose(protocol.ReasonLostConnection, cause)
		return
	}
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	if _, err := s.lead.Exec(ctx, "SELECT pgleader.unlock_held_many($1)", keys); err != nil {
		s.e.log.Warn("cannot reconcile advisory locks after a failed claim; dropping the session",
			"node", s.e.cfg.NodeID, "keys", len(keys), "cause", cause, "err", err)
		go s.lose(protocol.ReasonLostConnection, err)
	}
}
