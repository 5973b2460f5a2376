package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
)

// Ledger records runs of a scope in pgleader.runs, under the scope's fence, so
// that a run that completed in the current period is not run again by a host
// whose cron fires later (pgleader run --once-per).
type Ledger struct {
	Pool *pgxpool.Pool
}

// Completed is a run that completed (exit 0) for a run key.
type Completed struct {
	Holder string
	Epoch  int64
	At     time.Time
}

// Begin asks, in a transaction fenced by tok, whether a run of the key (or of
// the current period, aligned to the Unix epoch by the database's clock)
// completed; if none did, it records this term's run as started. It returns the
// completed run, if any, and the run key.
func (l *Ledger) Begin(ctx context.Context, tok election.Token, period time.Duration, key string) (*Completed, string, error) {
	var (
		runKey string
		at     *time.Time
		holder *string
		epoch  *int64
	)
	var keyArg any
	if key != "" {
		keyArg = key
	}
	err := election.FencedTx(ctx, l.Pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT run_key, completed_at, completed_by, completed_epoch
			FROM pgleader.run_begin($1::text, $2::bigint, make_interval(secs => $3::double precision), $4::text)`,
			tok.Scope, tok.Epoch, period.Seconds(), keyArg).Scan(&runKey, &at, &holder, &epoch)
	})
	if err != nil {
		return nil, "", fmt.Errorf("record the run's start: %w", err)
	}
	if at == nil {
		return nil, runKey, nil
	}
	return &Completed{Holder: *holder, Epoch: *epoch, At: *at}, runKey, nil
}

// End records the run's exit code, fenced by tok: a term that ended before its
// run did records nothing, and its run does not complete the period.
func (l *Ledger) End(ctx context.Context, tok election.Token, key string, code int) error {
	return election.FencedTx(ctx, l.Pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pgleader.run_end($1::text, $2::bigint, $3::text, $4::int)`, tok.Scope, tok.Epoch, key, code)
		return err
	})
}
