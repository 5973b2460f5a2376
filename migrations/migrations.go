// Package migrations holds pgleader's schema as plain SQL files: the schema
// contract (docs/design.md). The collector, the dashboard and external checks
// rely on its names.
//
// Two kinds of file:
//   - numbered files (NNN_name.sql, goose annotations) hold tables and data, each
//     applied once, in order;
//   - repeatable files (functions/NAME.sql, views/NAME.sql: Repeatables) hold one
//     function (with its overloads and its trigger) or one view each, and are
//     applied after the numbered files whenever their checksum changes, then
//     pgleader.apply_privileges() makes ownership and grants what
//     docs/security.md says.
//
// A function or view whose signature or meaning changes gets a new name: release
// N adds it and keeps the old one for nodes of release N−1; release N+1 drops the
// old one in a numbered file (the upgrade policy, README).
//
// A host application may apply the files with its own tool or psql: the numbered
// files in order, then every repeatable file in the order Repeatables lists them
// (with check_function_bodies off), then SELECT pgleader.apply_privileges(). This
// package has no dependency beyond pgx: the engine (election) imports it for
// Latest and Version only. Package migrate applies the files (what `pgleader
// migrate` runs).
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.sql functions/*.sql views/*.sql
var files embed.FS

// FS returns the embedded migration files: the numbered files at its root, the
// repeatable files under functions/ and views/.
func FS() fs.FS { return files }

// Baseline is the oldest schema version this build upgrades from: its numbered
// files start with a squash of versions 1 to Baseline. A database at an earlier
// version upgrades through the release that introduced Baseline first.
const Baseline = 12

// Repeatable is a file applied whenever its content changes.
type Repeatable struct {
	Name     string // functions/NAME.sql or views/NAME.sql
	SQL      string
	Checksum string // hex sha256 of SQL
}

// Repeatables returns the repeatable files in the order they are applied: the
// functions, then the views (a view may call a function), each by name.
func Repeatables() ([]Repeatable, error) {
	var out []Repeatable
	for _, dir := range []string{"functions", "views"} {
		names, err := fs.Glob(files, dir+"/*.sql")
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		for _, n := range names {
			b, err := files.ReadFile(n)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			out = append(out, Repeatable{Name: n, SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
		}
	}
	return out, nil
}

// Latest is the schema version this build of pgleader requires; it equals the
// number of the newest numbered file and what pgleader.schema_version()
// (functions/schema_version.sql) returns once the files are applied.
const Latest = 17

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
