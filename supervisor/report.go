package supervisor

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ReportTo returns a Report function that records the supervisor's state in
// pgleader.nodes.supervisor (pgleader.node_supervisor) for status, top and the
// exporter, and a function that writes the last state and stops. Writes happen
// on a goroutine of their own, latest state first: a slow database delays the
// dashboard's view, never the supervisor.
func ReportTo(pool *pgxpool.Pool, node string, log *slog.Logger) (report func(Status), stop func()) {
	latest := make(chan Status, 1)
	done := make(chan struct{})
	finished := make(chan struct{})
	write := func(st Status) {
		b, _ := json.Marshal(st)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT pgleader.node_supervisor($1, $2::jsonb)", node, string(b)).Scan(&ok); err != nil {
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
