// Package operator is the write path of the tools that watch pgleader: the
// actions an operator takes on a cluster from the outside, each through the
// database, each audited. The watching side (collector, exporter, tui) only
// reads; whatever changes a leadership or a scope's record is here.
//
//	op, err := operator.New(operator.Config{ConnConfig: cc, Latest: col.Snapshot})
//	err = op.Resign(ctx, "billing", "deploy")                            // graceful, at the next heartbeat
//	res, err := op.Handover(ctx, "billing", "node-2", "deploy", 30*time.Second)
//
// Two actions end a leadership, each re-checked against the latest snapshot
// (Config.Latest) so that it never hits a holder the operator did not see.
// Resign asks the holder through the database (pgleader.request_resign) to hand
// over gracefully (at once: the request rings its doorbell; else at its next
// heartbeat): it drains in-flight work and releases
// as resigned; it needs only the pgleader tables, and a live holder. Evict
// terminates the holder's leadership backend: the lock is freed at once,
// in-flight work is cut off, and it needs the right to signal that backend; it
// is the action for a zombie that no longer heartbeats, and what a collector
// with Config.EvictStale calls (Operator is a collector.Evictor). Handover
// moves a scope to a chosen node and waits until it leads.
//
// The others change a scope's record: Retire takes a scope nobody campaigns
// for out of the views, Bind restricts which logins may campaign for a scope,
// SetLockKey records a lock key other than the derived one; Bindings lists the
// last two.
//
// Every action opens a short-lived connection of its own (application_name
// "pgleader-collector …" or "pgleader scope", as the audit rows and
// pg_stat_activity have always shown them), with statements bounded on the
// server; through a connection pooler it runs schema-qualified calls only and
// polls instead of listening (internal/pgdial).
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/pgdial"
)

// statementTimeout bounds every statement of an action on the server (the
// collector's reads have the same bound).
const statementTimeout = 5 * time.Second

// Config configures an Operator. Only ConnConfig is required.
type Config struct {
	// ConnConfig is the parsed DSN (pgx.ParseConfig); the Operator copies it
	// for each action's connection and never modifies it.
	ConnConfig *pgx.ConnConfig
	// Latest returns the snapshot the caller acts on (the Snapshot method of
	// the database's collector.Collector); nil, or a nil snapshot, lets Evict
	// and Resign act on whichever holder the database shows.
	Latest func() *collector.Snapshot
	// Logger receives one line per action. Default slog.Default().
	Logger *slog.Logger
}

// ErrInvalidConfig: New was given a Config it cannot work with.
var ErrInvalidConfig = errors.New("operator: invalid configuration")

// Operator takes the operator actions on one database. Its methods are safe for
// concurrent use; each action uses a connection of its own.
type Operator struct {
	log    *slog.Logger
	latest func() *collector.Snapshot
	dial   *pgdial.Dialer
}

// New returns an Operator for cfg. It does not connect: every action does.
func New(cfg Config) (*Operator, error) {
	if cfg.ConnConfig == nil {
		return nil, fmt.Errorf("%w: ConnConfig is required (parse the DSN with pgx.ParseConfig)", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Operator{log: cfg.Logger, latest: cfg.Latest, dial: pgdial.New(cfg.ConnConfig, nil)}, nil
}

// snapshot is the latest snapshot the caller sees, nil when none.
func (o *Operator) snapshot() *collector.Snapshot {
	if o.latest == nil {
		return nil
	}
	return o.latest()
}

// withConn runs fn on a short-lived connection of its own, statements bounded
// by statementTimeout: one operator action (retire, bind, key).
func (o *Operator) withConn(ctx context.Context, app string, fn func(*pgx.Conn) error) error {
	conn, err := o.connect(ctx, app, statementTimeout)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pgdial.Close(conn)
	return fn(conn)
}

// connect opens an action's connection, its statements bounded by timeout.
func (o *Operator) connect(ctx context.Context, app string, timeout time.Duration) (*pgx.Conn, error) {
	return o.dial.Connect(ctx, app, map[string]string{"statement_timeout": fmt.Sprint(timeout.Milliseconds())})
}

// Sentinel errors of the actions on a holder (Evict, Resign). Their text is
// what the CLI and the dashboard print, unchanged since the actions lived in
// the collector.
var (
	// ErrUnknownScope: Evict or Resign names a scope the database does not know.
	ErrUnknownScope = errors.New("collector: unknown scope")
	// ErrNoHolder: the scope has no holder to evict (whose backend holds its
	// lock) or to ask to resign (an open term).
	ErrNoHolder = errors.New("collector: scope has no holder")
	// ErrHolderChanged: the holder or epoch is no longer the one the caller saw;
	// nothing was terminated (Evict) or marked (Resign).
	ErrHolderChanged = errors.New("collector: holder changed")
	// ErrEvictForbidden: the operator's role may not terminate the holder's
	// backend.
	ErrEvictForbidden = errors.New("collector: not allowed to terminate the holder's backend")
)

// latestHolder is the holder of scope in the latest snapshot: ok false when
// there is no snapshot or it does not show the scope (act on whichever holder
// the database shows), an ErrNoHolder error when it shows the scope without an
// open term.
func (o *Operator) latestHolder(scope string) (h collector.Holder, ok bool, err error) {
	s := o.snapshot()
	if s == nil {
		return collector.Holder{}, false, nil
	}
	sc, found := s.Scope(scope)
	if !found {
		return collector.Holder{}, false, nil
	}
	if sc.Leader == "" {
		return collector.Holder{}, false, fmt.Errorf("%w: %s had no open term in the latest snapshot (seq %d)", ErrNoHolder, scope, s.Seq)
	}
	return collector.Holder{Scope: scope, Node: sc.Leader, Epoch: sc.Epoch, PID: sc.HolderPID}, true, nil
}
