package election

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgleader/pgleader/protocol"
)

// releaseReq is one term to release in a batch.
type releaseReq struct {
	scope  string
	epoch  int64
	reason Reason
	reply  chan releaseResult
}

// releaseResult is one row of pgleader.release_batch.
type releaseResult struct {
	ok, busy bool
	err      error
}

// releaseTerm releases one term through the next batch and waits for its result.
// busy: the term's own fenced writers still hold its row; the lock is kept and the
// caller retries.
func (s *session) releaseTerm(sc *Scope, epoch int64, reason Reason) (ok, busy bool, err error) {
	req := releaseReq{scope: sc.name, epoch: epoch, reason: reason, reply: make(chan releaseResult, 1)}
	q := &s.batch
	q.mu.Lock()
	if q.closed || s.isLost() {
		q.mu.Unlock()
		return false, false, errSessionLost
	}
	q.releases = append(q.releases, req)
	q.mu.Unlock()
	q.poke()
	select {
	case r := <-req.reply:
		return r.ok, r.busy, r.err
	case <-s.lost:
		return false, false, errSessionLost
	}
}

const releaseBatchSQL = "SELECT scope, ok, busy FROM pgleader.release_batch($1, $2, $3, $4)"

// releaseRows runs the mode's release batch for reqs on q (the leadership session or a
// transaction on it) and returns one result per request, in order.
func (s *session) releaseRows(ctx context.Context, q querier, reqs []releaseReq) ([]releaseResult, error) {
	names := make([]string, len(reqs))
	epochs := make([]int64, len(reqs))
	reasons := make([]string, len(reqs))
	for i, r := range reqs {
		names[i], epochs[i], reasons[i] = r.scope, r.epoch, string(r.reason)
	}
	rows, err := s.m.releaseQuery(ctx, s, q, names, epochs, reasons)
	if err != nil {
		return nil, err
	}
	byName := map[string]releaseResult{}
	var scope string
	var res releaseResult
	if _, err := pgx.ForEachRow(rows, []any{&scope, &res.ok, &res.busy}, func() error {
		byName[scope] = res
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]releaseResult, len(reqs))
	for i, r := range reqs {
		got, ok := byName[r.scope]
		if !ok {
			got.err = fmt.Errorf("release of %s: no row returned", r.scope)
		}
		out[i] = got
	}
	return out, nil
}

func (s *session) runReleases(reqs []releaseReq) {
	ctx, cancel := s.stmtCtx(s.batchTimeout())
	defer cancel()
	var res []releaseResult
	var err error
	if lerr := s.leadDo(func() {
		res, err = s.releaseRows(ctx, s.lead, reqs)
		if err != nil {
			// A failed release may have left locks on a session we can no longer
			// trust: drop it, which frees them now rather than after the lease.
			go s.lose(protocol.ReasonLostConnection, fmt.Errorf("release batch: %w", err))
		}
	}); lerr != nil {
		err = lerr // not run: the session is lost
	}
	for i, r := range reqs {
		if err != nil {
			r.reply <- releaseResult{err: err}
			continue
		}
		r.reply <- res[i]
	}
}
