package checker

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/pgsession"
)

// ReadHistory assembles what the checker judges: the nodes' events, the faults applied,
// and the terms and fenced writes (pgleader.demo_actions) the database holds for
// scopes. end is when the run proper ended (mono ns): later transitions are
// teardown.
func ReadHistory(ctx context.Context, dsn string, scopes []string, events []eventlog.Record, faults []Fault, end int64) (History, error) {
	h := History{Scopes: scopes, Events: events, Faults: faults, EndMono: end}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return h, err
	}
	conn, err := pgsession.Connect(ctx, cfg)
	if err != nil {
		return h, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT scope, epoch, holder, acquired_at, released_at, release_reason
		FROM pgleader.terms WHERE scope = ANY ($1) ORDER BY scope, acquired_at`, scopes)
	if err != nil {
		return h, err
	}
	for rows.Next() {
		var t Term
		if err := rows.Scan(&t.Scope, &t.Epoch, &t.Holder, &t.AcquiredAt, &t.ReleasedAt, &t.Reason); err != nil {
			return h, err
		}
		h.Terms = append(h.Terms, t)
	}
	if err := rows.Err(); err != nil {
		return h, err
	}
	rows, err = conn.Query(ctx, `SELECT scope, epoch, node_id, coalesce(request_id, ''), at
		FROM pgleader.demo_actions WHERE scope = ANY ($1)`, scopes)
	if err != nil {
		return h, err
	}
	for rows.Next() {
		var w Write
		if err := rows.Scan(&w.Scope, &w.Epoch, &w.Node, &w.RequestID, &w.At); err != nil {
			return h, err
		}
		h.Writes = append(h.Writes, w)
	}
	return h, rows.Err()
}
