package collector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors.
var (
	// ErrClosed: Run was called on a collector that has run already.
	ErrClosed = errors.New("collector: already run (a Collector runs once)")
	// ErrUnknownScope: Evict or Resign names a scope the database does not know.
	ErrUnknownScope = errors.New("collector: unknown scope")
	// ErrNoHolder: the scope has no holder to evict (whose backend holds its
	// lock) or to ask to resign (an open term).
	ErrNoHolder = errors.New("collector: scope has no holder")
	// ErrHolderChanged: the holder or epoch is no longer the one the caller saw;
	// nothing was terminated (Evict) or marked (Resign).
	ErrHolderChanged = errors.New("collector: holder changed")
	// ErrEvictForbidden: the collector's role may not terminate the holder's
	// backend.
	ErrEvictForbidden = errors.New("collector: not allowed to terminate the holder's backend")
)

// evictWait bounds how long Evict waits for the terminated backend to exit.
const evictWait = 5 * time.Second

// sqlEvictCheck reads the holder of a scope, whether its backend holds the lock,
// and whether the current role may signal that backend (PostgreSQL's rule: a
// superuser may; otherwise not a superuser's backend, and only with the
// privileges of the backend's role or of pg_signal_backend).
const sqlEvictCheck = `
SELECT s.epoch, s.holder, s.holder_pid, s.released_at IS NULL,
       s.holder_pid IS NOT NULL AND pgleader.lock_held(s.lock_key, s.holder_pid),
       current_user::text, coalesce(r.rolname::text, ''),
       coalesce((SELECT u.rolsuper FROM pg_catalog.pg_roles u WHERE u.rolname = current_user), false)
         OR (NOT coalesce(r.rolsuper, false)
             AND (pg_catalog.pg_has_role(current_user, 'pg_signal_backend', 'USAGE')
                  OR (r.oid IS NOT NULL AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))))
  FROM pgleader.leader_state s
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = s.holder_pid
  LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
 WHERE s.scope = $1`

// sqlEvictAudit writes the audit row (and a notification) if the holder is still
// the expected one, through pgleader.record_eviction (schema version 7), which
// attributes it to the session's login role. $1 scope, $2 epoch, $3 holder, $4
// pid, $5 reason. NULL: the holder changed.
const sqlEvictAudit = `SELECT pgleader.record_eviction($1, $2, $3, $4, $5, 'collector')`

// sqlEvictTerminate terminates the holder's backend if it is still the expected
// one, and waits for it to exit. $1 scope, $2 epoch, $3 pid, $4 wait in ms.
const sqlEvictTerminate = `
SELECT pg_catalog.pg_terminate_backend(st.holder_pid, $4) FROM pgleader.leader_state st
 WHERE st.scope = $1 AND st.epoch = $2 AND st.holder_pid = $3 AND st.released_at IS NULL`

// Evict ends the leadership of scope's holder by terminating its leadership
// backend (pg_terminate_backend(holder_pid)); the server frees the lock and a
// follower claims within milliseconds. It is meant for a zombie: a holder that
// keeps the lock without heartbeats (AlertStaleLeader).
//
// Evict first re-checks that the holder, its epoch and its pid are still those
// of the latest snapshot, when there is one (ErrHolderChanged otherwise, or
// ErrNoHolder if that snapshot showed no open term), that
// the holder's backend holds the lock (ErrNoHolder), and that the collector's role
// may signal it (ErrEvictForbidden: it needs to be superuser, a member of
// pg_signal_backend, or the holder's own role; only a superuser may terminate a
// superuser's backend). It then writes the audit row (kind evicted; detail:
// reason, pid, by=collector) and commits it before terminating, so that every
// termination is on record; if the holder changes between the two statements
// nothing is terminated and ErrHolderChanged is returned, with the audit row
// recording the attempt. Evict waits up to 5s for the backend to exit. It uses a
// short-lived connection of its own.
func (c *Collector) Evict(ctx context.Context, scope, reason string) error {
	var want holderID
	if s := c.Snapshot(); s != nil {
		if sc, ok := s.Scope(scope); ok {
			if sc.Leader == "" {
				return fmt.Errorf("%w: %s had no open term in the latest snapshot (seq %d)", ErrNoHolder, scope, s.Seq)
			}
			want = holderID{epoch: sc.Epoch, holder: sc.Leader, pid: sc.HolderPID}
		}
	}
	return c.evict(ctx, scope, want, reason)
}

// autoEvict evicts a stale holder (Config.EvictStale) and reports a failure as
// an event; a success is reported by the audit row's event.
func (c *Collector) autoEvict(ctx context.Context, o evictOrder) {
	c.log.Warn("evicting stale leader", "scope", o.scope, "node", o.expect.holder, "epoch", o.expect.epoch,
		"pid", o.expect.pid, "after", c.cfg.EvictAfter)
	err := c.evict(ctx, o.scope, o.expect, "stale leader")
	if err == nil || ctx.Err() != nil {
		return
	}
	c.log.Error("could not evict stale leader", "scope", o.scope, "node", o.expect.holder, "epoch", o.expect.epoch,
		"pid", o.expect.pid, "err", err)
	c.hub.publish(nil, []Event{{At: time.Now(), Kind: EventEvictFailed, Scope: o.scope, Node: o.expect.holder,
		Epoch: o.expect.epoch, Reason: err.Error()}})
}

// evict terminates the holder's backend; a zero want accepts the current holder.
func (c *Collector) evict(ctx context.Context, scope string, want holderID, reason string) error {
	conn, err := c.connect(ctx, appEvict, map[string]string{"statement_timeout": fmt.Sprint((evictWait + readStatementTimeout).Milliseconds())})
	if err != nil {
		return fmt.Errorf("collector: evict %s: connect: %w", scope, err)
	}
	defer closeConn(conn)

	var (
		got          holderID
		holder       *string
		pid          *int32
		open, held   bool
		me, theirs   string
		mayTerminate bool
	)
	err = conn.QueryRow(ctx, sqlEvictCheck, scope).Scan(&got.epoch, &holder, &pid, &open, &held, &me, &theirs, &mayTerminate)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrUnknownScope, scope)
	}
	if err != nil {
		return fmt.Errorf("collector: evict %s: %w", scope, err)
	}
	got.holder, got.pid = str(holder), num(pid)
	if got.holder == "" || !open {
		return fmt.Errorf("%w: %s has no open term", ErrNoHolder, scope)
	}
	if want != (holderID{}) && want != got {
		return fmt.Errorf("%w: %s is now held by %s (epoch %d, pid %d), not %s (epoch %d, pid %d); nothing terminated",
			ErrHolderChanged, scope, got.holder, got.epoch, got.pid, want.holder, want.epoch, want.pid)
	}
	if !held {
		return fmt.Errorf("%w: the backend %d of %s (epoch %d) does not hold the lock of %s", ErrNoHolder, got.pid, got.holder, got.epoch, scope)
	}
	if !mayTerminate {
		return forbidden(scope, me, theirs, got.pid, nil)
	}

	var audit *int64
	err = conn.QueryRow(ctx, sqlEvictAudit, scope, got.epoch, got.holder, got.pid, reason).Scan(&audit)
	if err != nil {
		return fmt.Errorf("collector: evict %s: write audit row: %w", scope, err)
	}
	if audit == nil {
		return fmt.Errorf("%w: %s changed holder while evicting; nothing terminated", ErrHolderChanged, scope)
	}
	auditID := *audit
	var exited bool
	err = conn.QueryRow(ctx, sqlEvictTerminate, scope, got.epoch, got.pid, evictWait.Milliseconds()).Scan(&exited)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s changed holder after audit row %d was written; nothing terminated", ErrHolderChanged, scope, auditID)
	case errors.As(err, &pe) && pe.Code == "42501":
		return forbidden(scope, me, theirs, got.pid, pe)
	case err != nil:
		return fmt.Errorf("collector: evict %s: terminate backend %d: %w", scope, got.pid, err)
	case !exited:
		return fmt.Errorf("collector: evict %s: backend %d of %s did not exit within %v (audit row %d)", scope, got.pid, got.holder, evictWait, auditID)
	}
	c.log.Warn("evicted leader", "scope", scope, "node", got.holder, "epoch", got.epoch, "pid", got.pid,
		"reason", reason, "audit_id", auditID)
	return nil
}

func forbidden(scope, me, theirs string, pid int, cause error) error {
	err := fmt.Errorf("%w: role %q may not terminate backend %d of %s (role %q): pg_terminate_backend needs a superuser, a member of pg_signal_backend, or the holder's own role %q (and only a superuser may terminate a superuser's backend)",
		ErrEvictForbidden, me, pid, scope, theirs, theirs)
	if cause != nil {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// holderID is the holder an eviction expects to find.
type holderID struct {
	epoch  int64
	holder string
	pid    int
}

// evictOrder asks for the eviction of a stale holder.
type evictOrder struct {
	scope  string
	expect holderID
}

// evictOrder decides the automatic eviction of a stale holder: once per term,
// EvictAfter after its stale-leader alert began, only while its own backend holds
// the lock.
func (st *state) evictOrder(cfg *Config, sc *Scope, now time.Time) (evictOrder, bool) {
	if !cfg.EvictStale || st.evicted[sc.Name] == sc.Epoch || !slices.Contains(sc.LockPIDs, sc.HolderPID) {
		return evictOrder{}, false
	}
	for _, a := range sc.Alerts {
		if a.Kind == AlertStaleLeader && now.Sub(a.Since) >= cfg.EvictAfter {
			st.evicted[sc.Name] = sc.Epoch
			return evictOrder{scope: sc.Name, expect: holderID{epoch: sc.Epoch, holder: sc.Leader, pid: sc.HolderPID}}, true
		}
	}
	return evictOrder{}, false
}
