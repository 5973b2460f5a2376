package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/pooler"
	"github.com/pgleader/pgleader/internal/retry"
)

// Connection roles, the suffix of each connection's application_name.
const (
	appListener = "pgleader-collector listen"
	appReader   = "pgleader-collector read"
	appEvict    = "pgleader-collector evict"
	appResign   = "pgleader-collector resign"
	appHandover = "pgleader-collector handover"
	appRetire   = "pgleader-collector retire"
)

const (
	// connectTimeout bounds each attempt to open a connection.
	connectTimeout = 10 * time.Second
	// backoffMin and backoffMax bound the delay between reconnection attempts.
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// connConfig returns a copy of the configured connection settings for one of the
// collector's connections.
func (c *Collector) connConfig(app string, params map[string]string) *pgx.ConnConfig {
	cc := c.cfg.ConnConfig.Copy()
	// Client-side keepalives: a listener blocked in WaitForNotification must fail,
	// not hang, when the path to the server goes silent.
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true,
		Idle: 5 * time.Second, Interval: time.Second, Count: 3}}
	cc.DialFunc = dialer.DialContext
	cc.RuntimeParams["application_name"] = app
	pgsession.Apply(&cc.Config)
	if cc.ValidateConnect != nil {
		// A multi-host DSN with target_session_attrs (read-write, primary, …) is
		// how a collector follows a failover. Its reader sessions are read-only by
		// default_transaction_read_only, which read-write would reject on every
		// host; and it needs the primary in any case (LISTEN, logical decoding and
		// the lock table of the nodes are there): so the primary it is.
		cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsPrimary
	}
	for k, v := range params {
		cc.RuntimeParams[k] = v
	}
	return cc
}

// connect opens one of the collector's connections, bounded by connectTimeout.
//
// Through a connection pooler — one that refuses session settings in the startup
// packet (PgBouncer), or whose cancellation key is not the backend's — it
// connects without session settings and with unnamed statements only (a named
// one would not survive a transaction pooler), and remembers that a pooler is in
// the way: reads then set their settings inside their own transaction
// (readSettings), the listener polls instead of LISTENing (a notification cannot
// cross a transaction pooler), and handovers poll.
func (c *Collector) connect(ctx context.Context, app string, params map[string]string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if !c.pooled.Load() {
		conn, err := pgx.ConnectConfig(ctx, c.connConfig(app, params))
		if err != nil && !pooler.StartupRefused(err) {
			return nil, err
		}
		if err == nil {
			between, _, perr := pooler.Between(ctx, conn)
			if perr != nil || !between {
				if perr != nil {
					closeConn(conn)
					return nil, perr
				}
				return conn, nil
			}
			closeConn(conn)
		}
		if c.pooled.CompareAndSwap(false, true) {
			c.log.Info("a connection pooler is between the collector and PostgreSQL: reading with unnamed statements and per-transaction settings, and polling every poll interval instead of listening (notifications do not cross a transaction pooler)",
				"database", c.database, "poll_interval", c.PollInterval())
		}
	}
	cc := c.connConfig(app, nil)
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	delete(cc.RuntimeParams, "search_path") // set per transaction (readSettings)
	return pgx.ConnectConfig(ctx, cc)
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
	var loginRole, supervisor bool
	if err := conn.QueryRow(ctx, sqlNodesColumns).Scan(&loginRole, &supervisor); err != nil {
		closeConn(conn)
		return nil, "", fmt.Errorf("read the nodes view's columns: %w", err)
	}
	c.nodesLoginRole.Store(loginRole)
	c.nodesSupervisor.Store(supervisor)
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

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// reconnect is the collector's backoff between reconnection attempts.
var reconnect = retry.Backoff{Base: backoffMin, Max: backoffMax}

// backoff is the delay before the n-th consecutive reconnection attempt.
func backoff(n int) time.Duration { return reconnect.Delay(n) }

func sleepCtx(ctx context.Context, d time.Duration) { retry.Sleep(ctx, d) }
