package election

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is what Fence needs of a transaction: pgx.Tx, *pgx.Conn and pgxpool types
// satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// FenceSQL is the statement Fence runs, for callers on database/sql or other
// drivers: run it in the writing transaction with the token's scope, epoch and
// holder, and treat SQLSTATE FencedSQLState as ErrFenced.
const FenceSQL = "SELECT pgleader.fence($1, $2, $3)"

// FencedSQLState is the SQLSTATE pgleader.fence raises for a stale epoch.
const FencedSQLState = "PLF01"

// Fence makes the caller's transaction conditional on tok's epoch still being the
// scope's current term at commit (S3): call it inside the transaction, before or
// after the writes. It returns an error wrapping ErrFenced if a successor has taken
// over; the caller must then roll back. A successor's claim waits for the
// transaction to finish, so a write that commits after Fence succeeded is part of
// tok's term. Because that claim waits, the fence also bounds the transaction: it
// sets idle_in_transaction_session_timeout to the holder's session lease for the rest
// of the transaction, so a client that freezes mid-transaction cannot hold up a
// failover for longer than it would hold its own leadership session. In standalone
// mode Fence does nothing.
func Fence(ctx context.Context, tx Execer, tok Token) error {
	if tok.p == nil {
		return ErrNotLeader
	}
	if tok.p.term.standalone {
		return nil
	}
	if _, err := tx.Exec(ctx, FenceSQL, tok.Scope, tok.Epoch, tok.Holder); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == FencedSQLState {
			return fmt.Errorf("%w: %s", ErrFenced, strings.TrimPrefix(pe.Message, "pgleader: fenced: "))
		}
		return fmt.Errorf("fence %s epoch %d: %w", tok.Scope, tok.Epoch, err)
	}
	return nil
}

// ReportFencedSQL is the statement ReportFenced runs: pgleader.fence_rejected(scope,
// epoch, node, detail).
const ReportFencedSQL = "SELECT pgleader.fence_rejected($1, $2, $3, $4)"

// ReportFenced records in pgleader.audit (kind fence_rejected) that the database
// refused a write fenced with tok: a zombie leader tried to act. Call it after the
// refused transaction has rolled back, on a connection or pool outside that
// transaction (the refusal aborted it, and its rollback would take the audit row
// along). Operators are alerted by the collector's fenced-write check. detail is a
// short free-form note (the error text, a request id). ReportFenced does nothing
// for a zero token or in standalone mode.
func ReportFenced(ctx context.Context, db Execer, tok Token, detail string) error {
	if tok.p == nil || tok.p.term.standalone {
		return nil
	}
	if _, err := db.Exec(ctx, ReportFencedSQL, tok.Scope, tok.Epoch, tok.Holder, detail); err != nil {
		return fmt.Errorf("report fenced write on %s epoch %d: %w", tok.Scope, tok.Epoch, err)
	}
	return nil
}
