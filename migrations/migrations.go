// Package migrations holds pgleader's schema as versioned, plain SQL files
// (NNN_name.sql): the schema contract (docs/design.md). The collector, the
// dashboard and external checks rely on their names.
//
// The files carry goose annotations, which are ordinary SQL comments, so a host
// application may apply FS with its own migration tool or psql. This package has no
// dependency beyond pgx: the engine (election) imports it for Latest and Version
// only. Package migrate applies the files with goose (what `pgleader migrate` runs).
package migrations

import (
	"context"
	"embed"
	"errors"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// Latest is the schema version this build of pgleader requires; it equals the
// number of the newest migration file and what pgleader.schema_version() returns
// once that file is applied.
const Latest = 12

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

// isUndefined reports a missing schema (3F000) or function (42883).
func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "3F000" || pe.Code == "42883")
}
