// Package dbcheck holds the start-up probes of a database: reachable,
// PostgreSQL 14 or newer, the pgleader schema at the version this build needs,
// the role's privileges, and the lock table's room for a node's scopes. The
// engine runs them before it campaigns (election.Elector.Check, Run) and the
// CLI before it reads a database; their errors wrap the sentinels below, which
// the election package exports under the same names.
package dbcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/retry"
)

// The probes' errors; election exports each under the same name.
var (
	// ErrUnreachable: the database could not be reached.
	ErrUnreachable = errors.New("pgleader: database unreachable")
	// ErrUnsupportedServer: the server is older than PostgreSQL 14.
	ErrUnsupportedServer = errors.New("pgleader: unsupported PostgreSQL version")
	// ErrSchemaMissing: the pgleader schema is absent or older than this build needs.
	ErrSchemaMissing = errors.New("pgleader: schema missing or outdated")
	// ErrPermission: the connecting role lacks the privileges it needs on the
	// pgleader schema (a node needs the pgleader_node role; see docs/security.md).
	ErrPermission = errors.New("pgleader: permission denied")
	// ErrTooManyScopes: more scopes than the server's lock table can hold safely
	// (see LockTableCapacity).
	ErrTooManyScopes = errors.New("pgleader: too many scopes for this server")
	// ErrPooler: a connection pooler sits where the leadership session needs a
	// session of its own.
	ErrPooler = errors.New("pgleader: connection pooler in the way")
)

// PoolerFix is what an ErrPooler message tells the reader to do.
const PoolerFix = "point the leadership DSN at PostgreSQL itself (Config.DSN, pgleader node --leader-dsn; your application may keep writing, and fencing, through the pooler), or use a session pooler, or run in lease mode (Config.Mode = ModeLease, --mode lease): see docs/poolers.md"

// NodeRole reports, wrapping ErrPermission, a role that may not run the
// engine's functions (it is not in pgleader_node, nor the owner).
func NodeRole(ctx context.Context, cfg *pgx.ConnConfig) error {
	return WithConn(ctx, cfg, func(ctx context.Context, conn *pgx.Conn) error {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.has_function_privilege(
		        'pgleader.register_node(text, text, integer, text, text[], integer, integer, integer, bigint, bigint)', 'EXECUTE')
		    AND pg_catalog.has_function_privilege('pgleader.claim_scopes(text, text, bigint, integer, integer, integer, integer, text[], bigint[], text)', 'EXECUTE')`).Scan(&ok); err != nil {
			return fmt.Errorf("%w: read the role's privileges: %w", ErrUnreachable, err)
		}
		if !ok {
			return fmt.Errorf("%w: role %q may not run the engine's functions: GRANT pgleader_node TO %q (docs/security.md)", ErrPermission, cfg.User, cfg.User)
		}
		return nil
	})
}

// Bindings reports, wrapping ErrPermission, the first of scopes that is
// bound to roles the connecting login is not a member of (pgleader scope bind):
// the database would refuse its registration and every claim of it.
func Bindings(ctx context.Context, cfg *pgx.ConnConfig, scopes []string) error {
	return WithConn(ctx, cfg, func(ctx context.Context, conn *pgx.Conn) error {
		var scope string
		var roles []string
		err := conn.QueryRow(ctx, `SELECT scope, roles FROM pgleader.campaign_refusals($1) LIMIT 1`, scopes).Scan(&scope, &roles)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("%w: read the scopes' bindings: %w", ErrUnreachable, err)
		}
		return fmt.Errorf("%w: role %q may not campaign for scope %q: it is bound to %s; run this node under a login of one of those roles, or have the schema owner change the binding (pgleader scope bind; docs/security.md)",
			ErrPermission, cfg.User, scope, strings.Join(roles, ", "))
	})
}

// WithConn runs fn on a connection of its own, bounded by 10 s: the start-up
// checks.
func WithConn(ctx context.Context, cfg *pgx.ConnConfig, fn func(context.Context, *pgx.Conn) error) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsession.Connect(cctx, checkConfig(cfg))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, UnwrapConnectErr(err))
	}
	defer conn.Close(context.Background())
	return PoolerError(fn(cctx, conn))
}

// checkConfig is cfg for a start-up check: unnamed statements only, so that the
// checks also run through a transaction pooler (where a named prepared statement
// may meet another client's on a shared server connection) and can say what is
// wrong there. A check connection is opened by pgsession.Connect, and its
// statements name every function they call in pg_catalog or pgleader: they resolve
// no name through the session's search_path, which a transaction pooler may not
// keep.
func checkConfig(cfg *pgx.ConnConfig) *pgx.ConnConfig {
	c := cfg.Copy()
	c.DefaultQueryExecMode = pgx.QueryExecModeExec
	return c
}

// PoolerError turns the errors a transaction pooler causes in a client that uses
// named prepared statements (42P05 "already exists", 26000 "does not exist": two
// clients' statements on one server connection) into ErrPooler.
func PoolerError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P05" || pe.Code == "26000") && strings.Contains(pe.Message, "prepared statement") {
		return fmt.Errorf("%w: a transaction pooler shares server connections between clients (%s): %s", ErrPooler, pe.Message, PoolerFix)
	}
	return err
}

// LockTableCapacity is the size of PostgreSQL's shared lock table:
// max_locks_per_transaction × (max_connections + max_prepared_transactions)
// entries, shared by every session of the server. Exhausting it fails every
// session ("out of shared memory"), so pgleader allows the scopes of one node to
// use at most half of it (the collector's lock_pressure alert fires at half too).
type LockTableCapacity struct {
	MaxLocksPerTransaction  int
	MaxConnections          int
	MaxPreparedTransactions int
}

// Entries is the table's size.
func (c LockTableCapacity) Entries() int {
	return c.MaxLocksPerTransaction * (c.MaxConnections + c.MaxPreparedTransactions)
}

// MaxScopes is the most scopes one node may campaign for on this server.
func (c LockTableCapacity) MaxScopes() int { return c.Entries() / 2 }

// Check reports why n scopes are too many for this server, or nil.
func (c LockTableCapacity) Check(n int) error {
	if n <= c.MaxScopes() {
		return nil
	}
	return fmt.Errorf("%w: %d scopes exceed what this server's lock table can hold for pgleader: max_locks_per_transaction (%d) × (max_connections (%d) + max_prepared_transactions (%d)) = %d entries, shared by every session of the server, of which pgleader may use half (%d scopes, one lock each while led); raise max_locks_per_transaction (needs a restart) or campaign for fewer scopes per node",
		ErrTooManyScopes, n, c.MaxLocksPerTransaction, c.MaxConnections, c.MaxPreparedTransactions, c.Entries(), c.MaxScopes())
}

// LockTable reads the server's lock table settings and reports, wrapping
// ErrTooManyScopes, when a node campaigning for n scopes could fill more than half
// of it (see LockTableCapacity).
func LockTable(ctx context.Context, cfg *pgx.ConnConfig, n int) error {
	return WithConn(ctx, cfg, func(ctx context.Context, conn *pgx.Conn) error {
		var c LockTableCapacity
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('max_locks_per_transaction')::int,
		        pg_catalog.current_setting('max_connections')::int, pg_catalog.current_setting('max_prepared_transactions')::int`).
			Scan(&c.MaxLocksPerTransaction, &c.MaxConnections, &c.MaxPreparedTransactions); err != nil {
			return fmt.Errorf("%w: read lock table settings: %w", ErrUnreachable, err)
		}
		return c.Check(n)
	})
}

// Database connects once and verifies what a node or a watcher needs: the
// server is reachable, PostgreSQL 14 or newer, the role may use the schema, and
// the pgleader schema is at the version this build requires. Its errors wrap
// ErrUnreachable, ErrUnsupportedServer, ErrPermission or ErrSchemaMissing and
// say how to fix the problem. schema is the version this build needs
// (migrations.Latest: the callers pass it, so that this package stays a leaf).
func Database(ctx context.Context, cfg *pgx.ConnConfig, schema int) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsession.Connect(cctx, checkConfig(cfg))
	if err != nil {
		return fmt.Errorf("%w: cannot connect to %s:%d: %w", ErrUnreachable, cfg.Host, cfg.Port, UnwrapConnectErr(err))
	}
	defer conn.Close(context.Background())
	var num int
	if err := conn.QueryRow(cctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&num); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if err := checkServerVersion(num); err != nil {
		return err
	}
	var exists, usable bool
	if err := conn.QueryRow(cctx, `SELECT pg_catalog.to_regnamespace('pgleader') IS NOT NULL,
	        coalesce(pg_catalog.has_schema_privilege(pg_catalog.to_regnamespace('pgleader'), 'USAGE'), false)`).Scan(&exists, &usable); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if exists && !usable {
		return fmt.Errorf("%w: role %q may not use schema pgleader: grant it pgleader_node (nodes), pgleader_reader (status, history, top, exporter) or pgleader_operator (resign), e.g. GRANT pgleader_node TO %q (docs/security.md)",
			ErrPermission, cfg.User, cfg.User)
	}
	var v int
	if err := conn.QueryRow(cctx, "SELECT pgleader.schema_version()").Scan(&v); err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "3F000" && pe.Code != "42883") { // a missing schema or function: version 0
			return fmt.Errorf("%w: read schema version: %w", ErrUnreachable, err)
		}
	}
	switch {
	case v == 0:
		return fmt.Errorf("%w: database %q has no pgleader schema: run `pgleader migrate`", ErrSchemaMissing, cfg.Database)
	case v < schema:
		return fmt.Errorf("%w: database %q has pgleader schema version %d, this build needs %d: run `pgleader migrate`", ErrSchemaMissing, cfg.Database, v, schema)
	}
	return nil
}

// Await runs the checks a node needs (Database for schema, NodeRole, then
// LockTable for n scopes, then each of more that is not nil, in order) and, while
// they fail only because the database is in the middle of a restart or a
// failover, runs them all again with backoff (at most a second apart) until they
// pass or ctx ends, logging each failure. In transition means: a server answered
// that it is starting up, shutting down or in recovery (SQLSTATE 57P03); a host
// of a multi-host DSN with target_session_attrs answered that it is read-only (a
// standby, none promoted yet); with several hosts, one refused the connection; or
// a server that accepted the connection dropped it. Anything else (a wrong host,
// password, certificate or database, a missing schema, what a check of more
// refuses) is returned at once: it will not heal by itself. A node's Run calls
// it, with its own start-up checks as more: a database that crashes or fails over
// while a node starts must not end the node in any of them.
func Await(ctx context.Context, cfg *pgx.ConnConfig, n, schema int, log *slog.Logger, more ...func(context.Context) error) error {
	checks := append([]func(context.Context) error{
		func(ctx context.Context) error { return Database(ctx, cfg, schema) },
		func(ctx context.Context) error { return NodeRole(ctx, cfg) },
		func(ctx context.Context) error { return LockTable(ctx, cfg, n) },
	}, more...)
	return await(ctx, cfg, log, checks)
}

// await runs checks in order (skipping nil ones) until one fails or all pass,
// and all of them again after a failure that inTransition accepts (see Await).
func await(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger, checks []func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		var err error
		for _, check := range checks {
			if check == nil {
				continue
			}
			if err = check(ctx); err != nil {
				break
			}
		}
		if err == nil || ctx.Err() != nil || !inTransition(err, cfg) {
			return err
		}
		if log != nil {
			log.Warn("database in transition (restart or failover); waiting for a writable server", "err", err, "attempt", attempt)
		}
		retry.Sleep(ctx, Backoff.Delay(attempt))
	}
}

// inTransition reports whether a connection error says the database is restarting
// or failing over rather than misconfigured (see AwaitDatabase).
func inTransition(err error, cfg *pgx.ConnConfig) bool {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "57P03": // cannot_connect_now
		return true
	case errors.Is(err, pgconn.ErrReadOnlyConnection):
		return true
	case errors.Is(err, syscall.ECONNREFUSED):
		return severalHosts(cfg)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return true // a server that accepted the connection went away during the check
	}
	return false
}

// severalHosts reports whether cfg lists more than one server (a multi-host DSN;
// pgx's fallbacks also repeat one host for sslmode=prefer).
func severalHosts(cfg *pgx.ConnConfig) bool {
	for _, f := range cfg.Fallbacks {
		if f.Host != cfg.Host || f.Port != cfg.Port {
			return true
		}
	}
	return false
}

// checkServerVersion refuses servers older than PostgreSQL 14 (server_version_num).
func checkServerVersion(num int) error {
	if num < 140000 {
		return fmt.Errorf("%w: server is %d.%d, pgleader needs PostgreSQL 14 or newer (idle_session_timeout bounds failover): upgrade the server",
			ErrUnsupportedServer, num/10000, num%10000/100)
	}
	return nil
}

// UnwrapConnectErr shortens pgx's connect errors to their cause.
func UnwrapConnectErr(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

// Backoff is the engine's reconnection backoff: at most a second, because a
// database that fails over is back within seconds and leadership should resume
// within a second of it (each retry is a connection attempt, cheap for the
// server).
var Backoff = retry.Backoff{Base: 25 * time.Millisecond, Max: time.Second}
