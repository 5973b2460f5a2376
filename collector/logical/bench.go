package logical

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
)

// MeasureCommitToDecode measures the latency of this source: it opens a stream
// on a temporary slot of the database dsn points at, then n times commits one
// insert into pgleader.audit on another connection and measures from the moment
// the commit returned to the client until Next returned the Tx holding that row
// (same process, so one clock). It returns the n durations in order.
//
// The walsender is woken when the commit record is flushed, before the backend
// answers the client, so the Tx is often decoded by the time the commit returns:
// most figures are then the cost of Next taking it from the stream's buffer.
//
// It writes n rows of kind 'bench_commit_to_decode' (scope 'pgleader-bench') into
// pgleader.audit, which is append-only: use a throwaway database. Other traffic
// on the published tables is skipped.
func MeasureCommitToDecode(ctx context.Context, dsn string, n int) ([]time.Duration, error) {
	pcfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("logical: bench: %w", err)
	}
	s, err := Open(ctx, Config{ConnConfig: pcfg})
	if err != nil {
		return nil, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	ccfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("logical: bench: %w", err)
	}
	conn, err := pgsession.Connect(ctx, ccfg)
	if err != nil {
		return nil, fmt.Errorf("logical: bench: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	out := make([]time.Duration, 0, n)
	for i := range n {
		var id int64
		err := conn.QueryRow(ctx, `INSERT INTO pgleader.audit (scope, node_id, kind, detail)
			VALUES ('pgleader-bench', 'bench', 'bench_commit_to_decode', jsonb_build_object('i', $1::int))
			RETURNING id`, i).Scan(&id)
		committed := time.Now()
		if err != nil {
			return out, fmt.Errorf("logical: bench: insert %d: %w", i, err)
		}
		want := fmt.Sprint(id)
		for found := false; !found; {
			tx, err := s.Next(ctx)
			if err != nil {
				return out, fmt.Errorf("logical: bench: waiting for audit row %d: %w", id, err)
			}
			for _, c := range tx.Changes {
				if v := c.Row["id"]; c.Table == "audit" && c.Op == "insert" && v != nil && *v == want {
					found = true
				}
			}
			s.Ack(tx.EndLSN)
		}
		out = append(out, time.Since(committed))
	}
	return out, nil
}
