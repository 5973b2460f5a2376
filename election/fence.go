package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/protocol"
)

// fenceSQL is the statement Fence runs (docs/protocol.md: a client on another
// driver runs it in the writing transaction with the token's scope, epoch and
// holder, and treats SQLSTATE protocol.SQLStateFenced as a lost term).
const fenceSQL = "SELECT pgleader.fence($1, $2, $3)"

// Fence makes the caller's transaction conditional on tok's epoch still being the
// scope's current term at commit (S3): call it inside the transaction, before or
// after the writes. It returns an error wrapping ErrFenced if a successor has taken
// over; the caller must then roll back. A successor's claim waits for the
// transaction to finish, so a write that commits after Fence succeeded is part of
// tok's term. Because that claim waits, the fence also bounds the transaction: it
// sets idle_in_transaction_session_timeout to Config.FencedTxIdleTimeout (default:
// the session lease) for the rest of the transaction, so a client that freezes
// mid-transaction cannot hold up a failover for longer than that; a healthy
// transaction that idles longer fails with SQLSTATE 25P03 (FencedTx reports it as
// ErrFencedTxIdle). In standalone mode Fence does nothing. FencedTx does all of
// this (begin, fence, commit, error mapping) around a function.
func Fence(ctx context.Context, tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, tok Token) error {
	return fence(tok, func(query string, args ...any) error {
		_, err := tx.Exec(ctx, query, args...)
		return err
	})
}

// fence fences tok with exec, which runs the statement in the caller's
// transaction (pgx or database/sql).
func fence(tok Token, exec func(query string, args ...any) error) error {
	if tok.p == nil {
		return ErrNotLeader
	}
	return tok.p.term.scope.e.mode.fence(tok, exec)
}

// fenceStatement is the statement that fences tok, with the idle limit of the
// token's Elector: pgleader.fence sets the holder's session lease itself; another
// limit is set in the same statement (one round trip), after it.
func fenceStatement(tok Token) (string, []any) {
	c := tok.p.term.scope.e.cfg
	switch {
	case c.FencedTxIdleTimeout == c.SessionLease:
		return fenceSQL, []any{tok.Scope, tok.Epoch, tok.Holder}
	case c.FencedTxIdleTimeout < 0: // keep what the session had before the fence
		return `WITH prev AS MATERIALIZED (SELECT pg_catalog.current_setting('idle_in_transaction_session_timeout') AS v)
		        SELECT pgleader.fence($1, $2, $3), pg_catalog.set_config('idle_in_transaction_session_timeout', prev.v, true) FROM prev`,
			[]any{tok.Scope, tok.Epoch, tok.Holder}
	}
	return "SELECT pgleader.fence($1, $2, $3), pg_catalog.set_config('idle_in_transaction_session_timeout', $4, true)",
		[]any{tok.Scope, tok.Epoch, tok.Holder, strconv.FormatInt(c.FencedTxIdleTimeout.Milliseconds(), 10)}
}

// sqlStater is the SQLSTATE accessor of pgx's *pgconn.PgError and of other
// drivers' errors (lib/pq's *pq.Error).
type sqlStater interface{ SQLState() string }

// sqlState returns the SQLSTATE of err ("" when it carries none).
func sqlState(err error) string {
	var se sqlStater
	if errors.As(err, &se) {
		return se.SQLState()
	}
	return ""
}

// fenceError maps an error of a fenced transaction: a refused fence to ErrFenced,
// an idle transaction the server ended to ErrFencedTxIdle; other errors keep their
// cause (errors.As finds the driver's error).
func fenceError(tok Token, err error) error {
	switch sqlState(err) {
	case protocol.SQLStateFenced:
		msg := err.Error()
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		return fmt.Errorf("%w: %s", ErrFenced, strings.TrimPrefix(msg, "pgleader: fenced: "))
	case "25P03": // idle_in_transaction_session_timeout
		return fmt.Errorf("%w (%v, Config.FencedTxIdleTimeout): %w", ErrFencedTxIdle, tok.p.term.scope.e.cfg.FencedTxIdleTimeout, err)
	}
	return fmt.Errorf("fence %s epoch %d: %w", tok.Scope, tok.Epoch, err)
}

// FencedTx runs fn in a transaction fenced with tok and commits it: the whole
// pattern of a write made under leadership, in one call. It checks the token
// first (ErrNotLeader when its gate has closed), begins a transaction on db,
// fences it (Fence), runs fn, and commits; fn's error, or any other, rolls it
// back. The errors it returns:
//
//   - ErrNotLeader: the token was no longer valid; nothing was begun.
//   - ErrFenced: a successor leads; nothing was written. FencedTx records the
//     refusal in pgleader.audit (ReportFenced, outside the transaction) when db
//     can run statements (a pool or a connection), so the collector alerts on it.
//   - ErrFencedTxIdle: the transaction sat idle longer than
//     Config.FencedTxIdleTimeout and the server ended it (and its connection);
//     nothing was committed.
//   - ErrLeadershipLost (a *LostError): ctx, from Do or Lead, was cancelled because
//     the gate closed while the transaction ran; nothing was committed.
//   - fn's own error, as fn returned it, or the driver's (errors.As finds
//     *pgconn.PgError).
//
// A commit that fails for a lost connection leaves the outcome unknown, as with
// any transaction; the error says so through the driver's error.
func FencedTx(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, tok Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if !tok.Valid() {
		return fmt.Errorf("%w: %s epoch %d: the token's gate has closed", ErrNotLeader, tok.Scope, tok.Epoch)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return txError(ctx, tok, fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit, a no-op
	if err := Fence(ctx, tx, tok); err != nil {
		if errors.Is(err, ErrFenced) {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			if ex, ok := db.(interface {
				Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
			}); ok {
				if rerr := ReportFenced(context.WithoutCancel(ctx), ex, tok, err.Error()); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
			return err
		}
		return txError(ctx, tok, err)
	}
	if err := fn(ctx, tx); err != nil {
		return txError(ctx, tok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return txError(ctx, tok, fmt.Errorf("commit: %w", err))
	}
	return nil
}

// txError maps an error of FencedTx: the server's codes (fenceError), and a
// context cancelled because the gate closed (its *LostError cause).
func txError(ctx context.Context, tok Token, err error) error {
	if cause := context.Cause(ctx); ctx.Err() != nil && errors.Is(cause, ErrLeadershipLost) && !errors.Is(err, ErrLeadershipLost) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	if s := sqlState(err); (s == protocol.SQLStateFenced || s == "25P03") && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrFencedTxIdle) {
		return fenceError(tok, err)
	}
	return err
}

// FenceSQLTx is Fence for a database/sql transaction (any driver whose errors
// carry a SQLSTATE through a SQLState() method: pgx's stdlib, lib/pq): same
// statement, same idle limit, same errors (ErrFenced, ErrFencedTxIdle).
func FenceSQLTx(ctx context.Context, tx *sql.Tx, tok Token) error {
	return fence(tok, func(query string, args ...any) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}

// reportFencedSQL is the statement ReportFenced runs: pgleader.fence_rejected(scope,
// epoch, node, detail).
const reportFencedSQL = "SELECT pgleader.fence_rejected($1, $2, $3, $4)"

// ReportFenced records in pgleader.audit (kind fence_rejected) that the database
// refused a write fenced with tok: a zombie leader tried to act. Call it after the
// refused transaction has rolled back, on a connection or pool outside that
// transaction (the refusal aborted it, and its rollback would take the audit row
// along). Operators are alerted by the collector's fenced-write check. detail is a
// short free-form note (the error text, a request id). ReportFenced does nothing
// for a zero token or in standalone mode.
func ReportFenced(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, tok Token, detail string) error {
	if tok.p == nil || !tok.p.term.scope.e.mode.audited() {
		return nil
	}
	if _, err := db.Exec(ctx, reportFencedSQL, tok.Scope, tok.Epoch, tok.Holder, detail); err != nil {
		return fmt.Errorf("report fenced write on %s epoch %d: %w", tok.Scope, tok.Epoch, err)
	}
	return nil
}
