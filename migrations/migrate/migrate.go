// Package migrate applies pgleader's schema (package migrations) to a database:
// what `pgleader migrate` runs, and what a service may call at start-up.
//
// Up uses github.com/pressly/goose/v3 for versioning and bookkeeping (its table is
// pgleader.goose_db_version, so it never collides with a host application's own goose
// table). Several nodes may run Up at once: each holds a pgleader-specific advisory
// lock on a dedicated session for the whole run, so exactly one applies pending
// versions and the others find nothing left to do. It lives apart from package
// migrations so that embedding the engine does not link goose.
package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/pooler"
	"github.com/pgleader/pgleader/migrations"
)

// lockKey serialises concurrent Up calls: the ASCII bytes "pgleadmg" as a bigint
// (8099561637530594663), out of the way of scope keys (sha256-derived).
const lockKey int64 = 0x7067_6c65_6164_6d67

const versionTable = "pgleader.goose_db_version"

// Roles names the four roles of the schema (version 7 on; docs/security.md). An
// empty field keeps the default (DefaultRoles). The names are recorded in
// pgleader.roles by the migration that creates them and are fixed from then on;
// pass the same owner name to every later Up (it decides which existing schema
// Up accepts as its own).
type Roles struct {
	Owner    string // owns the schema and everything in it
	Node     string // EXECUTE on the engine's functions
	Reader   string // SELECT and the read-only functions (collector, exporter, status)
	Operator string // a reader that may also ask a leader to resign, and record evictions
}

// DefaultRoles are the role names a migration uses unless told otherwise.
var DefaultRoles = Roles{Owner: "pgleader_owner", Node: "pgleader_node", Reader: "pgleader_reader", Operator: "pgleader_operator"}

// withDefaults fills the empty fields from DefaultRoles.
func (r Roles) withDefaults() Roles {
	return Roles{Owner: cmp.Or(r.Owner, DefaultRoles.Owner), Node: cmp.Or(r.Node, DefaultRoles.Node),
		Reader: cmp.Or(r.Reader, DefaultRoles.Reader), Operator: cmp.Or(r.Operator, DefaultRoles.Operator)}
}

// Validate checks that each name is a usable role name: at most 63 bytes, no
// control characters, and the four distinct.
func (r Roles) Validate() error {
	r = r.withDefaults()
	seen := map[string]string{}
	for _, f := range []struct{ kind, name string }{{"owner", r.Owner}, {"node", r.Node}, {"reader", r.Reader}, {"operator", r.Operator}} {
		if len(f.name) > 63 {
			return fmt.Errorf("%s role name %q is %d bytes, longer than PostgreSQL's 63", f.kind, f.name, len(f.name))
		}
		if i := strings.IndexFunc(f.name, func(c rune) bool { return c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) }); i >= 0 {
			return fmt.Errorf("%s role name %q contains a control character at byte %d", f.kind, f.name, i)
		}
		if other, dup := seen[f.name]; dup {
			return fmt.Errorf("%s and %s roles are both named %q: the four roles must differ", other, f.kind, f.name)
		}
		seen[f.name] = f.kind
	}
	return nil
}

// Option changes what Up does.
type Option func(*options)

type options struct {
	roles Roles
}

// WithRoles makes Up use these role names instead of DefaultRoles.
func WithRoles(r Roles) Option { return func(o *options) { o.roles = r } }

// ErrForeignSchema: a schema named pgleader exists that pgleader's migrations did
// not create (another role owns it, or objects in it): Up refuses to use it.
var ErrForeignSchema = errors.New("foreign pgleader schema")

// ErrTooOld: the database's schema predates migrations.Baseline, the oldest
// version this build upgrades from.
var ErrTooOld = errors.New("schema too old to upgrade in one step")

// ErrPooler: the DSN goes through a connection pooler that will not give the
// migration a session of its own.
var ErrPooler = errors.New("connection pooler in the way")

// Result reports what Up did.
type Result struct {
	From, To int64    // schema version before and after
	Applied  []string // numbered files applied by this call, in order
	Changed  []string // repeatable files (functions/, views/) applied by this call
	Roles    Roles    // the schema's roles, as recorded in pgleader.roles
}

// Up applies every pending migration to the database cfg points at. It is idempotent
// and safe to run concurrently from several processes.
//
// From version 7 on the schema belongs to an owner role (Roles), which the
// migrating role must be able to create or be a member of. A pgleader schema that
// exists already must belong to the migrating role or to the owner role, and hold
// no object of any other role: else Up fails with ErrForeignSchema and changes
// nothing (a schema planted before the first migration could, for instance,
// hold a fence that accepts every write).
func Up(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger, opts ...Option) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	roles := o.roles.withDefaults()
	if err := roles.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.Copy()
	// The migration to version 7 reads the role names from these settings.
	cfg.RuntimeParams["pgleader.role_owner"] = roles.Owner
	cfg.RuntimeParams["pgleader.role_node"] = roles.Node
	cfg.RuntimeParams["pgleader.role_reader"] = roles.Reader
	cfg.RuntimeParams["pgleader.role_operator"] = roles.Operator
	// The migrating role is often a superuser: nothing in public, "$user" or a
	// pgleader schema not yet checked (checkOwnership) may run in its session.
	pgsession.ApplyMigration(&cfg.Config)
	db := stdlib.OpenDB(*cfg)
	defer db.Close()

	conn, err := db.Conn(ctx)
	if err != nil {
		if pooler.StartupRefused(err) {
			return Result{}, fmt.Errorf("%w: the DSN goes through a connection pooler that refuses session settings (%v); migrations need a session of their own (a lock for the whole run, the role names as settings): point the DSN at PostgreSQL itself or a session pooler",
				ErrPooler, err)
		}
		return Result{}, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	// A pooler may drop a startup parameter silently (ignore_startup_parameters):
	// the path must be the one sent before anything else runs.
	var path string
	if err := conn.QueryRowContext(ctx, pgsession.ShowSQL).Scan(&path); err != nil {
		return Result{}, fmt.Errorf("read search_path: %w", err)
	}
	if path != pgsession.MigrationSearchPath {
		return Result{}, fmt.Errorf("%w: the session's search_path is %q, not the %q pgleader migrate sent: a connection pooler dropped the session settings; point the DSN at PostgreSQL itself or a session pooler that passes them",
			ErrPooler, path, pgsession.MigrationSearchPath)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock($1)", lockKey); err != nil {
		return Result{}, fmt.Errorf("take migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_catalog.pg_advisory_unlock($1)", lockKey)

	if err := checkOwnership(ctx, conn, roles.Owner); err != nil {
		return Result{}, err
	}
	// goose keeps its table inside the pgleader schema, which must exist first.
	if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS pgleader"); err != nil {
		return Result{}, fmt.Errorf("create schema pgleader: %w", err)
	}
	store, err := database.NewStore(database.DialectPostgres, versionTable)
	if err != nil {
		return Result{}, err
	}
	p, err := goose.NewProvider("", db, migrations.FS(), goose.WithStore(store),
		goose.WithDisableGlobalRegistry(true), goose.WithSlog(log))
	if err != nil {
		return Result{}, fmt.Errorf("load migrations: %w", err)
	}
	from, err := p.GetDBVersion(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("read schema version: %w", err)
	}
	if from > 0 && from < migrations.Baseline {
		return Result{From: from, To: from}, fmt.Errorf("%w: database %q has pgleader schema version %d; this release upgrades from version %d on: run `pgleader migrate` of a release with schema %d first (README, Upgrades)",
			ErrTooOld, cfg.Database, from, migrations.Baseline, migrations.Baseline)
	}
	results, err := p.Up(ctx)
	res := Result{From: from, To: from}
	for _, r := range results {
		if r.Error == nil {
			res.Applied = append(res.Applied, r.Source.Path)
			res.To = r.Source.Version
		}
	}
	if err != nil {
		var pe *goose.PartialError
		if errors.As(err, &pe) && pe.Failed != nil {
			return res, fmt.Errorf("apply %s: %w", pe.Failed.Source.Path, pe.Err)
		}
		return res, err
	}
	if res.Changed, err = applyRepeatables(ctx, conn, len(res.Applied) > 0, log); err != nil {
		return res, err
	}
	res.Roles = roles
	rows, err := conn.QueryContext(ctx, "SELECT kind, role_name FROM pgleader.roles")
	if err != nil {
		return res, fmt.Errorf("read pgleader.roles: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, name string
		if err := rows.Scan(&kind, &name); err != nil {
			return res, err
		}
		switch kind {
		case "owner":
			res.Roles.Owner = name
		case "node":
			res.Roles.Node = name
		case "reader":
			res.Roles.Reader = name
		case "operator":
			res.Roles.Operator = name
		}
	}
	return res, rows.Err()
}

// sqlOwnership reads, for an existing pgleader schema, its owner, whether that is
// a role the migration accepts ($1 the owner role, or the migrating role, or —
// for a migrating role that is not a superuser — a role it is a member of), and
// the first objects in it that belong to anyone else. It reads catalogs only:
// nothing in a foreign schema runs.
const sqlOwnership = `
WITH ns AS (SELECT n.oid, n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'pgleader'),
allowed AS (
  SELECT u.oid FROM pg_catalog.pg_roles u WHERE u.rolname = current_user OR u.rolname = $1
), objs AS (
  SELECT 'relation ' || c.oid::regclass::text AS obj, c.relowner AS owner
    FROM pg_catalog.pg_class c, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure::text, p.proowner
    FROM pg_catalog.pg_proc p, ns WHERE p.pronamespace = ns.oid
  UNION ALL
  SELECT 'type ' || t.oid::regtype::text, t.typowner
    FROM pg_catalog.pg_type t, ns WHERE t.typnamespace = ns.oid
  UNION ALL
  SELECT 'operator ' || o.oid::regoperator::text, o.oprowner
    FROM pg_catalog.pg_operator o, ns WHERE o.oprnamespace = ns.oid
)
SELECT ns.nspowner::regrole::text,
       ns.nspowner IN (SELECT oid FROM allowed)
         OR (NOT (SELECT u.rolsuper FROM pg_catalog.pg_roles u WHERE u.rolname = current_user)
             AND pg_catalog.pg_has_role(current_user, ns.nspowner, 'MEMBER')),
       pg_catalog.array_to_string(ARRAY(SELECT objs.obj || ' (owner ' || objs.owner::regrole::text || ')' FROM objs
              WHERE objs.owner <> ns.nspowner AND objs.owner NOT IN (SELECT oid FROM allowed)
              ORDER BY 1 LIMIT 5), ', ')
  FROM ns`

// checkOwnership refuses a pgleader schema that pgleader's migrations did not
// create (see Up); owner is the owner role's name.
func checkOwnership(ctx context.Context, conn *sql.Conn, owner string) error {
	var (
		schemaOwner string
		ok          bool
		foreign     string
	)
	err := conn.QueryRowContext(ctx, sqlOwnership, owner).Scan(&schemaOwner, &ok, &foreign)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no schema yet
	}
	if err != nil {
		return fmt.Errorf("check who owns schema pgleader: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: schema pgleader exists and belongs to role %s, neither the migrating role nor the owner role %s, so pgleader migrate did not create it; inspect it (\\dn+ pgleader, \\df pgleader.*), then drop it (DROP SCHEMA pgleader CASCADE), or if you trust every object in it ALTER SCHEMA pgleader OWNER TO %s (if its owner role has another name, pass --roles owner=NAME)",
			ErrForeignSchema, schemaOwner, owner, owner)
	}
	if foreign != "" {
		return fmt.Errorf("%w: schema pgleader holds objects of other roles, which pgleader migrate did not create: %s; inspect and drop them (or, if you trust them, ALTER … OWNER TO %s)",
			ErrForeignSchema, foreign, owner)
	}
	return nil
}

// applyRepeatables applies, in one transaction, every repeatable file
// (migrations.Repeatables) whose checksum differs from the one recorded in
// pgleader.applied_files, records the new checksums, and then — when it
// applied any, or numbered is set (Up applied numbered files) — runs
// pgleader.apply_privileges(). It returns the files applied.
//
// check_function_bodies is off for the transaction (as in a pg_dump restore):
// a SQL-language function may name a function of a later file.
func applyRepeatables(ctx context.Context, conn *sql.Conn, numbered bool, log *slog.Logger) ([]string, error) {
	files, err := migrations.Repeatables()
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
		return nil, err
	}
	recorded := map[string]string{}
	rows, err := tx.QueryContext(ctx, "SELECT file, checksum FROM pgleader.applied_files")
	if err != nil {
		return nil, fmt.Errorf("read pgleader.applied_files: %w", err)
	}
	for rows.Next() {
		var f, sum string
		if err := rows.Scan(&f, &sum); err != nil {
			rows.Close()
			return nil, err
		}
		recorded[f] = sum
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var changed []string
	for _, f := range files {
		if recorded[f.Name] == f.Checksum {
			continue
		}
		if _, err := tx.ExecContext(ctx, f.SQL); err != nil {
			return nil, fmt.Errorf("apply %s: %w", f.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pgleader.applied_files (file, checksum) VALUES ($1, $2)
			ON CONFLICT (file) DO UPDATE SET checksum = excluded.checksum, applied_at = clock_timestamp(), applied_by = session_user`,
			f.Name, f.Checksum); err != nil {
			return nil, fmt.Errorf("record %s: %w", f.Name, err)
		}
		log.Debug("applied", "file", f.Name)
		changed = append(changed, f.Name)
	}
	if len(changed) == 0 && !numbered {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, "SELECT pgleader.apply_privileges()"); err != nil {
		return nil, fmt.Errorf("apply privileges: %w", err)
	}
	return changed, tx.Commit()
}
