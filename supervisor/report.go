package supervisor

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/pgsession"
)

// ReportTo returns a Report function that records the supervisor's state in
// pgleader.nodes.supervisor (pgleader.node_supervisor) for status, top and the
// exporter, and a function that writes the last state and stops. Writes happen
// on a goroutine of their own, latest state first: a slow database delays the
// dashboard's view, never the supervisor. Each write opens a connection and
// closes it: the state changes a few times per term, and an idle session held
// by a process costs its successors time when it dies (the server ends every
// backend of the dead process before the lock is free: ~1.5 ms each here).
func ReportTo(cfg *pgx.ConnConfig, node string, log *slog.Logger) (report func(Status), stop func()) {
	latest := make(chan Status, 1)
	done := make(chan struct{})
	finished := make(chan struct{})
	write := func(st Status) {
		b, _ := json.Marshal(st)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgsession.Connect(ctx, cfg)
		if err != nil {
			log.Debug("could not record the supervisor's state", "node", node, "err", err)
			return
		}
		defer conn.Close(context.Background())
		// One qualified call, its value as a parameter: safe on either form of
		// the session's path (pgsession), a transaction pooler's included.
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pgleader.node_supervisor($1::text, $2::jsonb)", node, string(b)).Scan(&ok); err != nil {
			log.Debug("could not record the supervisor's state", "node", node, "err", err)
		}
	}
	go func() {
		defer close(finished)
		for {
			select {
			case st := <-latest:
				write(st)
			case <-done:
				select {
				case st := <-latest:
					write(st)
				default:
				}
				return
			}
		}
	}()
	report = func(st Status) {
		for {
			select {
			case latest <- st:
				return
			default:
			}
			select {
			case <-latest: // drop the older state: only the newest matters
			default:
			}
		}
	}
	stop = func() {
		close(done)
		<-finished
	}
	return report, stop
}

// ExitRecorderTo returns a Config.RecordExit that records a child's exit in its
// term's row (pgleader.term_child_exit) on a connection of its own, opened for
// the call and closed after it: a child's exit is rare, and a session held for
// it would cost every successor time when this process dies (see ReportTo).
// The database accepts it only from the login of the term's holder while the
// term is current.
func ExitRecorderTo(cfg *pgx.ConnConfig) func(ctx context.Context, tok election.Token, code int, cause string) error {
	return func(ctx context.Context, tok election.Token, code int, cause string) error {
		conn, err := pgsession.Connect(ctx, cfg)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "SELECT pgleader.term_child_exit($1::text, $2::bigint, $3::int, $4::text)", tok.Scope, tok.Epoch, code, cause)
		return err
	}
}
