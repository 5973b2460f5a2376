package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/pgdial"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/retry"
)

// Connection roles, the suffix of each connection's application_name.
const (
	appListener = "pgleader-collector listen"
	appReader   = "pgleader-collector read"
)

const (
	// backoffMin and backoffMax bound the delay between reconnection attempts.
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// connect opens one of the collector's connections through its dialer (package
// pgdial): through a connection pooler, reads set their settings inside their
// own transaction (readSettings) and the listener polls instead of LISTENing.
func (c *Collector) connect(ctx context.Context, app string, params map[string]string) (*pgx.Conn, error) {
	return c.dial.Connect(ctx, app, params)
}

// poolerFound logs, once, that a pooler is between the collector and PostgreSQL.
func (c *Collector) poolerFound() {
	c.log.Info("a connection pooler is between the collector and PostgreSQL: reading with unnamed statements and per-transaction settings, and polling every poll interval instead of listening (notifications do not cross a transaction pooler)",
		"database", c.database, "poll_interval", c.PollInterval())
}

// readSettings is what a read through a pooler sets in its own transaction: what
// connectReader sets for the session on a direct connection.
const readSettings = `SELECT pg_catalog.set_config('search_path', '` + pgsession.SearchPath + `', true),
       pg_catalog.set_config('statement_timeout', $1, true),
       pg_catalog.set_config('idle_in_transaction_session_timeout', $2, true)`

// connectReader opens a reader connection: read-only by default, statements
// bounded on the server.
func (c *Collector) connectReader(ctx context.Context) (*pgx.Conn, string, error) {
	conn, err := c.connect(ctx, appReader, map[string]string{
		"statement_timeout":                   fmt.Sprint(readStatementTimeout.Milliseconds()),
		"idle_in_transaction_session_timeout": fmt.Sprint(readTimeout.Milliseconds()),
		"default_transaction_read_only":       "on",
	})
	if err != nil {
		return nil, "", err
	}
	var schema int
	if err := conn.QueryRow(ctx, sqlSchemaVersion).Scan(&schema); err != nil {
		closeConn(conn)
		return nil, "", fmt.Errorf("read the schema's version: %w", err)
	}
	if schema < readSchema {
		closeConn(conn)
		if schema == 0 {
			return nil, "", fmt.Errorf("database has no pgleader schema: run `pgleader migrate`")
		}
		return nil, "", fmt.Errorf("database has pgleader schema version %d; this build reads version %d or newer (its watch_*_v1 read contract): run `pgleader migrate`", schema, readSchema)
	}
	var loginRole, supervisor, doorbell bool
	if err := conn.QueryRow(ctx, sqlNodesColumns).Scan(&loginRole, &supervisor, &doorbell); err != nil {
		closeConn(conn)
		return nil, "", fmt.Errorf("read the nodes view's columns: %w", err)
	}
	c.nodesLoginRole.Store(loginRole)
	c.nodesSupervisor.Store(supervisor)
	c.nodesDoorbell.Store(doorbell)
	c.guards.Store(schema >= guardsSchema)
	c.truth.Store(schema >= truthSchema)
	version := conn.PgConn().ParameterStatus("server_version")
	if version == "" {
		ctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	}
	return conn, version, nil
}

// isConnErr reports whether err means the connection is gone (as opposed to a
// statement that failed on a healthy connection).
func isConnErr(conn *pgx.Conn, err error) bool {
	return err != nil && (conn == nil || conn.IsClosed() || errors.Is(err, net.ErrClosed))
}

func closeConn(conn *pgx.Conn) { pgdial.Close(conn) }

// reconnect is the collector's backoff between reconnection attempts.
var reconnect = retry.Backoff{Base: backoffMin, Max: backoffMax}

// backoff is the delay before the n-th consecutive reconnection attempt.
func backoff(n int) time.Duration { return reconnect.Delay(n) }

func sleepCtx(ctx context.Context, d time.Duration) { retry.Sleep(ctx, d) }
