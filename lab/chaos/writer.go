package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/protocol"
)

// Writer is the workload of a supervised chaos run: the child of `pgleader run`
// (`pgleader lab-writer`, a lab build). It knows its leadership only from its
// environment (PGLEADER_SCOPE, PGLEADER_EPOCH, PGLEADER_NODE_ID), as a program
// in any language would, and fences every write with SELECT pgleader.fence in
// its own transaction. It appends its outcomes, as the node's workload does
// (action_ok, action_rejected, action_unknown), to PGLEADER_EVENTS, so the
// checker holds the child's writes to H1–H5. It writes until killed; a refused
// write ends it (ErrStale): its epoch is stale.
func Writer(ctx context.Context, dsn string, interval time.Duration) error {
	scope, node := os.Getenv("PGLEADER_SCOPE"), os.Getenv("PGLEADER_NODE_ID")
	epoch, err := strconv.ParseInt(os.Getenv("PGLEADER_EPOCH"), 10, 64)
	if scope == "" || node == "" || err != nil {
		return errors.New("lab-writer runs under pgleader run: PGLEADER_SCOPE, PGLEADER_EPOCH and PGLEADER_NODE_ID must be set")
	}
	events, err := eventlog.Open(os.Getenv("PGLEADER_EVENTS"), node)
	if err != nil {
		return err
	}
	defer events.Close()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	pgsession.Apply(&cfg.Config)
	cfg.RuntimeParams["application_name"] = "pgleader lab-writer " + node
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	run := strconv.FormatInt(time.Now().UnixNano()%0xffffff, 16)
	for seq := 1; ; seq++ {
		id := fmt.Sprintf("%s:%s:%s-%d", node, scope, run, seq)
		inserted := false
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pgleader.fence($1, $2)", scope, epoch); err != nil {
				return err
			}
			inserted = true
			_, err := tx.Exec(ctx, "INSERT INTO pgleader.demo_actions (scope, epoch, node_id, request_id) VALUES ($1, $2, $3, $4)", scope, epoch, node, id)
			return err
		})
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			events.Action(eventlog.ActionOK, scope, epoch, id, "")
		case errors.As(err, &pgErr) && pgErr.Code == protocol.SQLStateFenced:
			events.Action(eventlog.ActionRejected, scope, epoch, id, pgErr.Message)
			return ErrStale
		case inserted:
			events.Action(eventlog.ActionUnknown, scope, epoch, id, err.Error())
			return err
		default:
			return err // nothing was written: the next term's child carries on
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// ErrStale: the database refused a write of the Writer's epoch.
var ErrStale = errors.New("lab-writer: fenced: this epoch is stale")
