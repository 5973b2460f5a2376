package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/pooler"
)

// checkModeConflict makes sure that no live node of the other mode campaigns
// for one of this node's scopes (a start-up check of both database modes).
func (e *Elector) checkModeConflict(ctx context.Context) error {
	return dbcheck.WithConn(ctx, e.base, func(ctx context.Context, conn *pgx.Conn) error {
		var scope, mode, nodes *string
		err := conn.QueryRow(ctx, "SELECT scope, mode, nodes FROM pgleader.mode_conflict($1, $2, $3)",
			e.cfg.NodeID, string(e.cfg.Mode), e.cfg.Scopes).Scan(&scope, &mode, &nodes)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("%w: read the other nodes' modes: %w", ErrUnreachable, err)
		}
		return fmt.Errorf("%w: scope %q runs in %s mode (live candidates: %s), this node in %s mode: run every candidate of a scope in one mode (--mode %s), or stop those nodes first",
			ErrModeConflict, *scope, *mode, *nodes, e.cfg.Mode, *mode)
	})
}

// poolerFix is how an ErrPooler message ends: what to do about it.
const poolerFix = dbcheck.PoolerFix

// checkSessionPath makes sure the leadership session's connection is a session
// of its own on the server, with the settings that bound failover. A pooler
// shows itself by handing out a cancellation key whose pid is not the backend's
// (pgx's PgConn.PID against pg_backend_pid()). Then: a pooler that refuses the
// session settings (PgBouncer: "unsupported startup parameter") or drops them
// (ignore_startup_parameters) is refused; and one that moves the client between
// server connections between transactions (transaction or statement pooling) is
// refused too, found by holding a transaction open on a second client (which
// takes the server connection the first client last used) and asking the first
// for its backend again. A session pooler passes: the session is pinned.
func (e *Elector) checkSessionPath(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want := e.connConfig("check", true).RuntimeParams["idle_session_timeout"]
	a, err := e.dial(cctx, "check", true, pgx.QueryExecModeExec) // a prepared statement would not survive a transaction pooler
	if err != nil {
		return fmt.Errorf("%w: leadership session: %w", ErrUnreachable, dbcheck.UnwrapConnectErr(err))
	}
	defer a.Close(context.Background())
	pooled, backend, err := pooler.Between(cctx, a)
	if err != nil {
		return fmt.Errorf("%w: leadership session: %w", ErrUnreachable, err)
	}
	if !pooled {
		return nil // a direct connection: the cancellation key is the backend's own
	}
	var lease, path string
	if err := a.QueryRow(cctx, `SELECT setting, pg_catalog.current_setting('search_path') FROM pg_catalog.pg_settings
	        WHERE name OPERATOR(pg_catalog.=) 'idle_session_timeout'`).Scan(&lease, &path); err != nil {
		return fmt.Errorf("%w: leadership session: %w", ErrUnreachable, err)
	}
	if lease != want { // pg_settings.setting is in milliseconds, like the parameter sent
		return fmt.Errorf("%w: the leadership session goes through a connection pooler that drops its session settings (idle_session_timeout is %s, not %sms): %s",
			ErrPooler, lease, want, poolerFix)
	}
	if path != pgsession.SearchPath {
		return fmt.Errorf("%w: the leadership session goes through a connection pooler that drops its session settings (search_path is %q, not %q): %s",
			ErrPooler, path, pgsession.SearchPath, poolerFix)
	}
	b, err := e.dial(cctx, "check", false, pgx.QueryExecModeExec)
	if err != nil {
		return fmt.Errorf("%w: probe the pooler: %w", ErrUnreachable, dbcheck.UnwrapConnectErr(err))
	}
	defer b.Close(context.Background())
	tx, err := b.Begin(cctx)
	if err != nil {
		if pooler.StatementPooling(err) {
			return fmt.Errorf("%w: the leadership session goes through a statement pooler (%v), which moves every statement to any server connection: a session advisory lock would stay behind on one other clients use; %s",
				ErrPooler, err, poolerFix)
		}
		return fmt.Errorf("%w: probe the pooler: %w", ErrUnreachable, err)
	}
	defer tx.Rollback(context.Background())
	var other, again uint32
	if err := tx.QueryRow(cctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&other); err != nil {
		return fmt.Errorf("%w: probe the pooler: %w", ErrUnreachable, err)
	}
	if err := a.QueryRow(cctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&again); err != nil {
		return fmt.Errorf("%w: probe the pooler: %w", ErrUnreachable, err)
	}
	if again != backend {
		return fmt.Errorf("%w: the leadership session goes through a transaction (or statement) pooler: its backend changed from %d to %d between two statements, so a session advisory lock would stay behind on a server connection other clients use; %s",
			ErrPooler, backend, again, poolerFix)
	}
	e.log.Info("the leadership session goes through a session pooler: each session is pinned to one server connection", "node", e.cfg.NodeID)
	return nil
}

// dial opens one of the engine's dedicated connections (role: leadership, guard,
// watch, listen) with the session settings of connConfig. mode overrides the
// query exec mode when not zero.
func (e *Elector) dial(ctx context.Context, role string, leased bool, mode pgx.QueryExecMode) (*pgx.Conn, error) {
	cfg := e.connConfig(role, leased)
	if mode != 0 {
		cfg.DefaultQueryExecMode = mode
	}
	return e.connect(ctx, cfg)
}

// connect opens a connection of cfg (from connConfig). A pooler that refuses its
// session settings in the startup packet (PgBouncer accepts only a few there) gets
// them as SETs on the session once connected instead: only a session pooler keeps
// them, and checkSessionPath refuses any other at start.
func (e *Elector) connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil || !pooler.StartupRefused(err) {
		return conn, err
	}
	var names, values []string
	for k, v := range cfg.RuntimeParams {
		if k != "application_name" {
			names, values = append(names, k), append(values, v)
			delete(cfg.RuntimeParams, k)
		}
	}
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config(n, v, false) FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS s(n, v)", names, values); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("apply the session settings on a pooled connection: %w", err)
	}
	return conn, nil
}
