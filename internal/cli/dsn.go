package cli

import (
	"os"

	"github.com/jackc/pgx/v5"
)

// Target is the database a command talks to.
type Target struct {
	// DSN is the connection string as resolved, for APIs that take a string
	// (election.Config.DSN). Empty when only the PG* variables apply.
	DSN string
	// Source names where DSN came from, for error messages: "--dsn",
	// "DATABASE_URL" or "PG* environment variables".
	Source string
	// Config is DSN parsed by pgx (which also applies PG* variables and
	// ~/.pgpass).
	Config *pgx.ConnConfig
}

// ResolveDSN returns the database a command connects to: the --dsn value when it
// is set, else the DATABASE_URL environment variable, else what the standard PG*
// variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, …) say. A
// string pgx cannot parse is bad input; nothing is connected here.
func ResolveDSN(flag string) (Target, error) {
	t := Target{DSN: flag, Source: "--dsn"}
	if t.DSN == "" {
		if env := os.Getenv("DATABASE_URL"); env != "" {
			t.DSN, t.Source = env, "DATABASE_URL"
		} else {
			t.Source = "PG* environment variables"
		}
	}
	cfg, err := pgx.ParseConfig(t.DSN)
	if err != nil {
		// pgx masks the password in its parse errors (best effort; Message masks
		// again).
		return Target{}, BadInput("invalid connection string from %s: %v; fix it (URL form postgres://user@host:5432/dbname?sslmode=require, or host=… port=… user=… dbname=…)", t.Source, err)
	}
	t.Config = cfg
	return t, nil
}
