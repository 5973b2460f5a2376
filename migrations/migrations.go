// Package migrations holds pgleader's schema as versioned, plain SQL files
// (NNN_name.sql) and applies them.
//
// The files are the schema contract (docs/design.md): the collector, the dashboard and
// external checks rely on their names. They carry goose annotations, which are
// ordinary SQL comments, so a host application may apply them with its own migration
// tool or psql instead of Up.
//
// Up uses github.com/pressly/goose/v3 for versioning and bookkeeping (its table is
// pgleader.goose_db_version, so it never collides with a host application's own goose
// table). Several nodes may run Up at once: each holds a pgleader-specific advisory
// lock on a dedicated session for the whole run, so exactly one applies pending
// versions and the others find nothing left to do.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// Latest is the schema version this build of pgleader requires; it equals the
// number of the newest migration file and what pgleader.schema_version() returns
// once that file is applied.
const Latest = 7

// lockKey serialises concurrent Up calls: the ASCII bytes "pgleadmg" as a bigint
// (8099561637530594663), out of the way of scope keys (sha256-derived).
const lockKey int64 = 0x7067_6c65_6164_6d67

const versionTable = "pgleader.goose_db_version"

// Result reports what Up did.
type Result struct {
	From, To int64    // schema version before and after
	Applied  []string // file names applied by this call, in order
}

// Up applies every pending migration to the database cfg points at. It is idempotent
// and safe to run concurrently from several processes.
func Up(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()

	conn, err := db.Conn(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return Result{}, fmt.Errorf("take migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)

	// goose keeps its table inside the pgleader schema, which must exist first.
	if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS pgleader"); err != nil {
		return Result{}, fmt.Errorf("create schema pgleader: %w", err)
	}
	store, err := database.NewStore(database.DialectPostgres, versionTable)
	if err != nil {
		return Result{}, err
	}
	p, err := goose.NewProvider("", db, files, goose.WithStore(store),
		goose.WithDisableGlobalRegistry(true), goose.WithSlog(log))
	if err != nil {
		return Result{}, fmt.Errorf("load migrations: %w", err)
	}
	from, err := p.GetDBVersion(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("read schema version: %w", err)
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
	return res, nil
}

// Version reads the schema version a database has (0 when pgleader was never
// migrated there) through pgleader.schema_version().
func Version(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	err := db.QueryRow(ctx, "SELECT pgleader.schema_version()").Scan(&v)
	if err != nil {
		if isUndefined(err) {
			return 0, nil
		}
		return 0, err
	}
	return v, nil
}
