package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/pgdial"
)

// appResign is the application_name of a resign request's session.
const appResign = "pgleader-collector resign"

// sqlResign asks the holder of a scope's open term to resign
// (pgleader.request_resign, schema version 4). $1 scope, $2 epoch (NULL: any
// open term), $3 by.
const sqlResign = `SELECT pgleader.request_resign($1, $2, $3)`

// sqlResignState reads what became of a scope whose request was refused, to
// say why. $1 scope.
const sqlResignState = `
SELECT s.epoch, coalesce(s.holder, ''), s.holder IS NOT NULL AND s.released_at IS NULL
  FROM pgleader.leader_state s WHERE s.scope = $1`

// Resign asks the leader of scope to hand it over gracefully, through the
// database: pgleader.request_resign marks the open term and rings the holder's
// doorbell, and the holder's engine sees the mark at once (at its next
// heartbeat, within one heartbeat interval, in lease mode or when its doorbell
// cannot ring), closes its gate to new work, drains in-flight work (up to its drain timeout),
// releases the term with reason resigned, and a follower takes over under a
// new epoch. The function writes an audit row of kind resign_requested (detail
// by = "collector: " + reason), which the collector reports as
// collector.EventResignRequested, and notifies leader_change.
//
// Resign marks only the term the latest snapshot (Config.Latest) showed, when
// there is one: it returns ErrNoHolder if that snapshot showed no open term of
// scope, and ErrHolderChanged if that term ended or another began before the
// mark was written (nothing is marked then). Without a snapshot it marks
// whichever term is open (ErrNoHolder when none is). ErrUnknownScope: the
// database does not know scope.
//
// Resign returns once the mark is committed; it does not wait for the handover,
// which the collector's events show (released with reason resigned, then
// elected). Unlike Evict it needs no privilege to signal backends, only the
// pgleader tables, but it relies on a live holder: a zombie that no longer
// heartbeats never sees the mark, and Evict is the action for it.
func (o *Operator) Resign(ctx context.Context, scope, reason string) error {
	var want *int64 // nil: whichever term is open
	h, ok, err := o.latestHolder(scope)
	if err != nil {
		return err
	}
	if ok {
		want = &h.Epoch
	}
	conn, err := o.connect(ctx, appResign, statementTimeout)
	if err != nil {
		return fmt.Errorf("collector: resign %s: connect: %w", scope, err)
	}
	defer pgdial.Close(conn)

	by := "collector: " + reason
	var marked bool
	if err := conn.QueryRow(ctx, sqlResign, scope, want, by).Scan(&marked); err != nil {
		return fmt.Errorf("collector: resign %s: %w", scope, err)
	}
	if marked {
		o.log.Info("asked the leader to resign", "scope", scope, "epoch", epochAttr(want), "by", by)
		return nil
	}
	return resignRefused(ctx, conn, scope, want)
}

// resignRefused explains why request_resign marked nothing: the scope is
// unknown, has no open term, or its open term is not the expected one.
func resignRefused(ctx context.Context, conn *pgx.Conn, scope string, want *int64) error {
	var (
		epoch  int64
		holder string
		open   bool
	)
	err := conn.QueryRow(ctx, sqlResignState, scope).Scan(&epoch, &holder, &open)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %q", ErrUnknownScope, scope)
	case err != nil:
		return fmt.Errorf("%w: the open term of %s was not marked (and reading it again failed: %v)", ErrHolderChanged, scope, err)
	case want == nil && !open:
		return fmt.Errorf("%w: %s has no open term", ErrNoHolder, scope)
	case want == nil:
		return fmt.Errorf("%w: %s had no open term when asked, and is now held by %s at epoch %d; nothing marked", ErrHolderChanged, scope, holder, epoch)
	case !open:
		return fmt.Errorf("%w: the term of epoch %d of %s ended meanwhile and no term is open; nothing marked", ErrHolderChanged, *want, scope)
	default:
		return fmt.Errorf("%w: %s is now held by %s at epoch %d, not epoch %d; nothing marked", ErrHolderChanged, scope, holder, epoch, *want)
	}
}

// epochAttr is the expected epoch for a log line ("any" when none).
func epochAttr(want *int64) any {
	if want == nil {
		return "any"
	}
	return *want
}
