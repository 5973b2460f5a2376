// Package pooler recognises a connection pooler between a client and PostgreSQL
// (PgBouncer, Supavisor, pgcat, RDS Proxy) from what it does to a connection: it
// refuses session settings in the startup packet, refuses transaction blocks in
// statement pooling, or hands out a cancellation key whose process id is not the
// backend's. The engine and the collector both need to know.
package pooler

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StartupRefused reports a pooler's refusal of a startup parameter (PgBouncer:
// FATAL 08P01 "unsupported startup parameter: …"): the session settings must be
// applied once connected, or per transaction.
func StartupRefused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "startup parameter")
}

// StatementPooling reports PgBouncer's refusal of a transaction block in
// statement pooling (08P01 "transaction blocks not allowed in statement pooling
// mode").
func StatementPooling(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "statement pooling")
}

// Between reports whether a pooler stands between conn and its backend: the
// process id of the cancellation key the server sent at connect is not the
// backend's (pg_backend_pid). It also returns that backend's pid.
func Between(ctx context.Context, conn *pgx.Conn) (pooled bool, backend uint32, err error) {
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&pid); err != nil {
		return false, 0, err
	}
	return uint32(pid) != conn.PgConn().PID(), uint32(pid), nil
}
