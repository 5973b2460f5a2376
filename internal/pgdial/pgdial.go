// Package pgdial opens the connections of the tools that watch or act on a
// pgleader database from the outside (the collector, the operator actions): every
// one with client keepalives, its role in application_name, pgsession's
// search_path, and, for a multi-host DSN, the primary as its target.
//
// A connection pooler in the way (one that refuses session settings in the
// startup packet, PgBouncer, or whose cancellation key is not the backend's) is
// noticed at the first connection that meets it, and remembered by the Dialer:
// from then on it connects without session settings and with unnamed statements
// only (a named one would not survive a transaction pooler); its callers then set
// their settings inside their own transactions, or run schema-qualified
// statements only, and poll instead of listening (a notification does not cross
// a transaction pooler).
package pgdial

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/pooler"
)

// ConnectTimeout bounds each attempt to open a connection.
const ConnectTimeout = 10 * time.Second

// Dialer opens connections to one database for one component. Its methods are
// safe for concurrent use.
type Dialer struct {
	cfg      *pgx.ConnConfig
	onPooler func()
	pooled   atomic.Bool
}

// New returns a Dialer for cfg, which it copies for every connection and never
// modifies. onPooler, if not nil, is called once, when a connection first finds
// a pooler in the way.
func New(cfg *pgx.ConnConfig, onPooler func()) *Dialer {
	return &Dialer{cfg: cfg, onPooler: onPooler}
}

// Pooled reports whether a connection pooler is between the Dialer and
// PostgreSQL, as its connections found so far.
func (d *Dialer) Pooled() bool { return d.pooled.Load() }

// MarkPooled records a pooler its caller found otherwise (a refused replication
// connection), without calling onPooler.
func (d *Dialer) MarkPooled() { d.pooled.Store(true) }

// Config returns a copy of the connection settings for one connection: app is
// its application_name, params are added to its session settings.
func (d *Dialer) Config(app string, params map[string]string) *pgx.ConnConfig {
	cc := d.cfg.Copy()
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

// Connect opens a connection, bounded by ConnectTimeout. Through a pooler (see
// the package doc) it drops params and the search_path: the caller sets what it
// needs per transaction.
func (d *Dialer) Connect(ctx context.Context, app string, params map[string]string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if !d.pooled.Load() {
		conn, err := pgx.ConnectConfig(ctx, d.Config(app, params))
		if err != nil && !pooler.StartupRefused(err) {
			return nil, err
		}
		if err == nil {
			between, _, perr := pooler.Between(ctx, conn)
			if perr != nil || !between {
				if perr != nil {
					Close(conn)
					return nil, perr
				}
				return conn, nil
			}
			Close(conn)
		}
		if d.pooled.CompareAndSwap(false, true) && d.onPooler != nil {
			d.onPooler()
		}
	}
	cc := d.Config(app, nil)
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	delete(cc.RuntimeParams, "search_path") // set per transaction by the caller
	return pgx.ConnectConfig(ctx, cc)
}

// Close closes conn, waiting at most a second for the server to take the
// termination message.
func Close(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
