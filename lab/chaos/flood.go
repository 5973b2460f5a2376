package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

// notifyFlood is the fault of scenario "notify-flood": a role with nothing but
// CONNECT floods leader_change for the whole run — 7000-byte payloads from two
// connections, small forged ones (released, resign_requested, node_lost,
// node_joined of the scopes in play) from a third, as fast as the server takes
// them — while the leaders just lead. Nothing may move: no heartbeat failure, no
// gate closing, no term lost (and the checker's NoTransition: no new term).
func notifyFlood(ctx context.Context, e *env) error {
	holders := map[string]string{}
	for _, scope := range e.scopes {
		n, _, err := e.leader(ctx, scope)
		if err != nil {
			return err
		}
		holders[scope] = n.ID
	}
	cfg, dropRole, err := e.floodRole(ctx)
	if err != nil {
		return err
	}
	defer dropRole()
	var forged []string
	for _, s := range e.scopes {
		for _, ev := range []string{"released", "resign_requested", "node_lost", "node_joined"} {
			forged = append(forged, fmt.Sprintf("('%s', '%s', '%s')", ev, s, holders[s]))
		}
	}
	// Payloads differ within a statement: PostgreSQL folds identical ones of a
	// transaction into one.
	big := "SELECT pg_notify('leader_change', g::text || repeat('x', 7000)) FROM generate_series(1, 100) g"
	small := "SELECT pg_notify('leader_change', json_build_object('event', e, 'scope', s, 'holder', h, 'by', 'forged', 'n', g)::text) " +
		"FROM generate_series(1, 50) g, (VALUES " + strings.Join(forged, ", ") + ") v(e, s, h)"
	fctx, stop := context.WithDeadline(ctx, e.deadline)
	defer stop()
	t0 := monotime.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i, stmt := range []string{big, big, small} {
		wg.Go(func() {
			c, err := pgx.ConnectConfig(fctx, cfg.Copy())
			if err != nil {
				errs <- fmt.Errorf("flooder %d: %w", i, err)
				return
			}
			defer c.Close(context.Background())
			// Bounded in count too: at most 10 million notifications per flooder.
			for range 100_000 {
				if _, err := c.Exec(fctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
					if fctx.Err() == nil {
						errs <- fmt.Errorf("flooder %d: %w", i, err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	t1 := monotime.Now()
	e.fault("notify-flood", "", t0, t1)
	close(errs)
	for err := range errs {
		return err
	}
	// A heartbeat the flood's tail delayed would fail within a trust window.
	time.Sleep(time.Second)
	var moved []string
	for _, r := range e.c.Events() {
		if r.MonoNS < t0 {
			continue
		}
		switch r.Event {
		case "heartbeat_failed", "gate_closed", "lost":
			moved = append(moved, fmt.Sprintf("%s %s %s %s%s", r.Node, r.Event, r.Scope, r.Reason, r.Error))
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("the flood disturbed leadership (%d events): %s", len(moved), strings.Join(moved[:min(len(moved), 5)], "; "))
	}
	return nil
}

// floodRole creates a login role with nothing but CONNECT (PUBLIC's on the
// database) and returns a configuration that logs in as it and a function that
// drops it.
func (e *env) floodRole(ctx context.Context) (*pgx.ConnConfig, func(), error) {
	role := fmt.Sprintf("pgleader_chaos_flood_%d", e.o.Seed)
	ident := pgx.Identifier{role}.Sanitize()
	drop := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.admin.Exec(cctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_, _ = e.admin.Exec(cctx, "DROP ROLE IF EXISTS "+ident)
	}
	drop() // a run that was interrupted may have left it
	if _, err := e.admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN"); err != nil {
		return nil, nil, fmt.Errorf("create the flooding role (the chaos DSN's role must be allowed to CREATE ROLE): %w", err)
	}
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.User, cfg.Password = role, ""
	return cfg, drop, nil
}
