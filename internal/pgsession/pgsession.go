// Package pgsession defines the SQL session every connection pgleader opens runs
// in: its search_path, SearchPath, which resolves names in pg_catalog first, then
// in the pgleader schema (owned by the owner role alone, which pgleader migrate
// checks before it creates anything there), then in the session's own temporary
// schema. A neighbour's public or "$user" schema never takes part, so an
// exact-type overload planted there (has_schema_privilege(regnamespace, text),
// cardinality(text[]), =(bigint, bigint), …, which would beat pg_catalog's
// implicit-cast version) never runs inside a statement of ours, whoever runs it.
//
// The path reaches the server in one of two forms, by connection kind:
//
//   - Session form, for every connection that reaches PostgreSQL or a session
//     pooler: Apply puts search_path in the startup packet (RuntimeParams), so it
//     holds from the first statement on. Connect uses it, and falls back to the
//     transaction form when a pooler refuses the parameter.
//   - Transaction form, for a connection through a transaction pooler, which
//     refuses session settings in the startup packet (PgBouncer) or drops them
//     silently (ignore_startup_parameters), and whose server connection changes
//     between transactions: every statement is either the first of a transaction
//     that begins with SetLocalSQL (InTx); or a single call of a schema-qualified
//     pgleader function with parameters only as arguments (a qualified name is
//     resolved among pgleader's functions alone, and each of those pins its own
//     search_path: SET search_path = pg_catalog, pgleader, pg_temp); or a
//     statement that names every function and operator it calls in pg_catalog
//     (the start-up checks).
//
// Which connection uses which:
//
//	election, lock mode (leadership, guard, watch)  session form; through a session
//	                                                pooler that refused it, set on
//	                                                the session after connecting and
//	                                                checked at start (checkSessionPath)
//	election, lease mode                            Connect; statements are single
//	                                                pgleader.fn($1, …) calls
//	start-up checks (election.CheckDatabase, …)     Connect; statements qualified
//	collector (exporter, status, top, handover,     session form; through a pooler,
//	scope retire)                                   reads set it per transaction
//	                                                (readSettings), actions are
//	                                                pgleader.fn calls or qualified
//	history, resign (CLI)                           Connect, then InTx
//	slots (CLI), collector/logical                  session form (replication needs
//	                                                PostgreSQL itself); statements
//	                                                qualified
//	migrate                                         session form, MigrationSearchPath,
//	                                                read back (direct or session
//	                                                pooler only)
//	workload fenced writes                          session form; through a pooler,
//	                                                pgleader.fence and an INSERT
//	                                                into pgleader.demo_actions
//
// Two connections read the path back after connecting (ShowSQL): a pooled
// lock-mode session (checkSessionPath), whose statements rely on it, and
// migrate's, the most privileged, opened once a run. PostgreSQL itself applies
// a startup parameter or refuses the connection, and on every other connection a
// pooler that drops it silently (ignore_startup_parameters) is harmless, because
// those statements are written in the transaction form.
package pgsession

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SearchPath is the search_path of every session pgleader opens: pg_catalog first
// and explicit (an unlisted pg_catalog is searched first too, but functions of
// other schemas still compete with it by argument types), then pgleader, then the
// session's temporary schema last (unlisted, it is searched first for relations,
// and a temporary relation left on a pooled server connection by another client
// could shadow a catalog name).
const SearchPath = "pg_catalog, pgleader, pg_temp"

// MigrationSearchPath is the search_path of a migration's session: SearchPath
// without pgleader. A migration runs before it has checked that the pgleader
// schema is its own (a role with CREATE on the database may have created it and
// planted objects in it), so no name may resolve there; its statements name
// pgleader's objects in full.
const MigrationSearchPath = "pg_catalog, pg_temp"

// SetLocalSQL sets SearchPath until the end of the current transaction: the first
// statement of each transaction on a connection in the transaction form.
const SetLocalSQL = "SELECT pg_catalog.set_config('search_path', '" + SearchPath + "', true)"

// ShowSQL reads the session's search_path.
const ShowSQL = "SELECT pg_catalog.current_setting('search_path')"

// Apply sets SearchPath in c's startup packet (the session form). A
// *pgx.ConnConfig passes &cfg.Config.
func Apply(c *pgconn.Config) {
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	c.RuntimeParams["search_path"] = SearchPath
}

// ApplyMigration sets MigrationSearchPath in c's startup packet.
func ApplyMigration(c *pgconn.Config) {
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	c.RuntimeParams["search_path"] = MigrationSearchPath
}

// Connect opens a connection with a copy of cfg in the session form, or, when a
// pooler refuses search_path in the startup packet, without it (the transaction
// form: run statements through InTx, or only statements that do not depend on the
// session's path).
func Connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	c := cfg.Copy()
	Apply(&c.Config)
	conn, err := pgx.ConnectConfig(ctx, c)
	if err == nil || !startupRefused(err) {
		return conn, err
	}
	delete(c.RuntimeParams, "search_path")
	return pgx.ConnectConfig(ctx, c)
}

// startupRefused reports a pooler's refusal of a startup parameter (PgBouncer:
// 08P01 "unsupported startup parameter"); internal/pooler.StartupRefused is the
// same test for the settings of the leadership session.
func startupRefused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "startup parameter")
}

// Beginner begins a transaction: *pgx.Conn, pgx.Tx and *pgxpool.Pool satisfy it.
type Beginner interface {
	Begin(context.Context) (pgx.Tx, error)
}

// InTx runs fn in a transaction of db whose first statement sets SearchPath
// (SetLocalSQL), and commits it when fn returns nil (rolls it back otherwise).
// Every statement fn runs on tx resolves names through SearchPath, also through a
// transaction pooler.
func InTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, SetLocalSQL); err != nil {
		return fmt.Errorf("set search_path: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
