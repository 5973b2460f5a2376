package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/pgdial"
)

// appEvict is the application_name of an eviction's session.
const appEvict = "pgleader-collector evict"

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
// keeps the lock without heartbeats (collector.AlertStaleLeader).
//
// Evict first re-checks that the holder, its epoch and its pid are still those
// of the latest snapshot (Config.Latest), when there is one (ErrHolderChanged
// otherwise, or ErrNoHolder if that snapshot showed no open term), that the
// holder's backend holds the lock (ErrNoHolder), and that the operator's role
// may signal it (ErrEvictForbidden: it needs to be superuser, a member of
// pg_signal_backend, or the holder's own role; only a superuser may terminate a
// superuser's backend). It then writes the audit row (kind evicted; detail:
// reason, pid, by=collector) and commits it before terminating, so that every
// termination is on record; if the holder changes between the two statements
// nothing is terminated and ErrHolderChanged is returned, with the audit row
// recording the attempt. Evict waits up to 5s for the backend to exit.
func (o *Operator) Evict(ctx context.Context, scope, reason string) error {
	want, ok, err := o.latestHolder(scope)
	if err != nil {
		return err
	}
	if !ok {
		want = collector.Holder{Scope: scope}
	}
	return o.evict(ctx, want, reason)
}

// EvictHolder is Evict of h alone: it terminates nothing (ErrHolderChanged)
// unless h.Node still holds h.Scope at h.Epoch through backend h.PID. It makes
// the Operator a collector.Evictor.
func (o *Operator) EvictHolder(ctx context.Context, h collector.Holder, reason string) error {
	return o.evict(ctx, h, reason)
}

// evict terminates the holder's backend; a want without a Node accepts the
// current holder.
func (o *Operator) evict(ctx context.Context, want collector.Holder, reason string) error {
	scope := want.Scope
	conn, err := o.connect(ctx, appEvict, evictWait+statementTimeout)
	if err != nil {
		return fmt.Errorf("collector: evict %s: connect: %w", scope, err)
	}
	defer pgdial.Close(conn)

	var (
		got          = collector.Holder{Scope: scope}
		holder       *string
		pid          *int32
		open, held   bool
		me, theirs   string
		mayTerminate bool
	)
	err = conn.QueryRow(ctx, sqlEvictCheck, scope).Scan(&got.Epoch, &holder, &pid, &open, &held, &me, &theirs, &mayTerminate)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrUnknownScope, scope)
	}
	if err != nil {
		return fmt.Errorf("collector: evict %s: %w", scope, err)
	}
	if holder != nil {
		got.Node = *holder
	}
	if pid != nil {
		got.PID = int(*pid)
	}
	if got.Node == "" || !open {
		return fmt.Errorf("%w: %s has no open term", ErrNoHolder, scope)
	}
	if want != (collector.Holder{Scope: scope}) && want != got {
		return fmt.Errorf("%w: %s is now held by %s (epoch %d, pid %d), not %s (epoch %d, pid %d); nothing terminated",
			ErrHolderChanged, scope, got.Node, got.Epoch, got.PID, want.Node, want.Epoch, want.PID)
	}
	if !held {
		return fmt.Errorf("%w: the backend %d of %s (epoch %d) does not hold the lock of %s", ErrNoHolder, got.PID, got.Node, got.Epoch, scope)
	}
	if !mayTerminate {
		return forbidden(scope, me, theirs, got.PID, nil)
	}

	var audit *int64
	err = conn.QueryRow(ctx, sqlEvictAudit, scope, got.Epoch, got.Node, got.PID, reason).Scan(&audit)
	if err != nil {
		return fmt.Errorf("collector: evict %s: write audit row: %w", scope, err)
	}
	if audit == nil {
		return fmt.Errorf("%w: %s changed holder while evicting; nothing terminated", ErrHolderChanged, scope)
	}
	auditID := *audit
	var exited bool
	err = conn.QueryRow(ctx, sqlEvictTerminate, scope, got.Epoch, got.PID, evictWait.Milliseconds()).Scan(&exited)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s changed holder after audit row %d was written; nothing terminated", ErrHolderChanged, scope, auditID)
	case errors.As(err, &pe) && pe.Code == "42501":
		return forbidden(scope, me, theirs, got.PID, pe)
	case err != nil:
		return fmt.Errorf("collector: evict %s: terminate backend %d: %w", scope, got.PID, err)
	case !exited:
		return fmt.Errorf("collector: evict %s: backend %d of %s did not exit within %v (audit row %d)", scope, got.PID, got.Node, evictWait, auditID)
	}
	o.log.Warn("evicted leader", "scope", scope, "node", got.Node, "epoch", got.Epoch, "pid", got.PID,
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
