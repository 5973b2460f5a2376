package election

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

// lockMode is the default mode (Config.Mode = ModeLock): a scope is held by a
// session advisory lock on the leadership connection. A session is two
// connections: leadership (scope locks, the beacon; claims, heartbeats,
// releases) and guard (the guard lock, leased while the node leads); beside it
// the ring's watch connection, the node's doorbell. A new term's gate waits for
// its predecessors' guards (or trust); followers learn of a release from their
// doorbell and of a crash from the ring.
// Where each rule lives:
//
//	open               openLockSession (session.go), warm
//	heartbeat          lockHeartbeat (heartbeat.go), guardBeat (guard.go)
//	claim              claimBatch, retryEnded, reconcileLocked (claims.go)
//	armGuard           guardDo, setGuardLease (guard.go)
//	awaitPredecessors  lockAwaitPredecessors (campaign.go), the ring (ring.go)
//	release, stop      release_batch, node_stopped
type lockMode struct{ database }

var _ sessionMode = lockMode{}

func (m lockMode) start(ctx context.Context) error {
	return m.startChecks(ctx, m.e.checkSessionPath) // a transaction pooler would break the locks
}

// run campaigns beside the leadership session loop and the ring watch.
func (m lockMode) run(ctx context.Context) error { return m.e.campaignAll(ctx, m, m.e.ring.loop) }

func (m lockMode) open(ctx context.Context) (*session, error) { return m.e.openLockSession(ctx) }

func (lockMode) heartbeat(s *session) { s.lockHeartbeat() }

// beforeClaim arms the guard's lease alongside the claim of a node that leads
// nothing, so that a won claim does not wait for it (lead waits for it).
func (lockMode) beforeClaim(s *session) {
	c := s.e.cfg
	s.termsMu.Lock()
	leading := len(s.terms) > 0
	s.termsMu.Unlock()
	if !leading {
		go func() { // lead() waits for it if the claim is won
			actx, cancel := s.stmtCtx(c.HeartbeatTimeout)
			defer cancel()
			_ = s.armGuard(actx, monotime.Now()) // a guard statement that broke the connection lost the session
		}()
	}
}

func (lockMode) claim(ctx context.Context, s *session, names []string, keys []int64, scopes []*Scope, ann *string) ([]claimResult, error) {
	got, err := s.claimBatch(ctx, s.lead, names, keys, ann)
	if err == nil {
		got, err = s.retryEnded(ctx, got, scopes)
	}
	if err != nil {
		s.reconcileLocked(keys, err)
	}
	return got, err
}

func (lockMode) armGuard(ctx context.Context, s *session, since int64) error {
	return s.armGuard(ctx, since)
}

func (lockMode) awaitPredecessors(ctx context.Context, sc *Scope, t *term, s *session, r claimResult) {
	sc.lockAwaitPredecessors(ctx, t, s, r)
}

func (lockMode) releaseQuery(ctx context.Context, s *session, q querier, names []string, epochs []int64, reasons []string) (pgx.Rows, error) {
	return q.Query(ctx, releaseBatchSQL, s.e.cfg.NodeID, names, epochs, reasons)
}

func (lockMode) stopped(ctx context.Context, s *session) error {
	_, err := s.lead.Exec(ctx, "SELECT pgleader.node_stopped($1)", s.e.cfg.NodeID)
	return err
}
