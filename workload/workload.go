// Package workload is the fenced demo workload of `pgleader node --work-interval D`
// (docs/design.md, "The CLI contract"), the workload of the demo and of every safety check.
// It is a contract of the product, not part of the lab: outside checks run
// `pgleader node --work-interval D` and read its rows and its action_* events
// (DESIGN §5), so it ships with the node and imports nothing from lab/
// (TestNodeImportsNoLab in cmd/pgleader holds it to that).
//
// While the node leads a scope, every Interval it performs one action: inside
// Scope.Do, a transaction on its own pool that calls election.Fence and inserts one
// row into pgleader.demo_actions (scope, epoch, node_id, request_id). Each action has
// a request id unique across the node's scopes and runs,
// <node>:<scope>:<run>-<seq> (run: 6 random hex digits per Workload, so a node
// restarted under the same --id never reuses an id; seq counts from 1), so a
// checker can match acknowledgements with rows. Its outcome is reported:
//
//	action_ok        the commit succeeded: the row exists, written under its epoch
//	action_rejected  the database fenced the write (election.ErrFenced): no row
//	action_unknown   the INSERT was sent, then something failed (commit error, lost
//	                 connection): the row may or may not exist
//
// Nothing is reported when no action was attempted: the node does not lead the
// scope (ErrNotLeader), or the transaction failed before its INSERT was sent.
//
// The pool is separate from the engine's connections: the leadership session must
// never run work (docs/design.md, "Things that are easy to get wrong").
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/protocol"
)

// Recorder receives the outcome of every attempted action; *eventlog.Writer is one.
type Recorder interface {
	Action(kind eventlog.ActionKind, scope string, epoch int64, requestID, reason string)
}

// Workload performs fenced writes for the scopes this node leads. Set the fields,
// then call Run once.
type Workload struct {
	Pool     *pgxpool.Pool
	Scopes   []*election.Scope
	Node     string        // node_id written with every row
	Interval time.Duration // time between actions of one scope; must be positive

	// Recorder receives action outcomes (optional).
	Recorder Recorder
	// Log receives one debug line per outcome. Default slog.Default().
	Log *slog.Logger

	// BeforeWrite, if set, is called inside Scope.Do after the gate check and
	// before the transaction begins: a test hook to stretch the window between the
	// gate check and the write (a process pause, Kleppmann's window), where only
	// the database's fence protects.
	BeforeWrite func(tok election.Token)

	// PauseBeforeWrite, if positive, is a fault-test hook modelling a process that
	// stalls between its gate check and its write and does not notice: each action
	// reports action_paused, sleeps this long, then writes on a context detached
	// from the gate's (bounded by writeTimeout), so only the database's fence can
	// stop a stale write.
	PauseBeforeWrite time.Duration

	// UnsafeSkipFence, a test hook, writes without election.Fence: it exists so
	// that the chaos harness can show it catches a workload that forgets to fence
	// (stale writes accepted, H3). Never set it otherwise.
	UnsafeSkipFence bool
}

// writeTimeout bounds a write detached from the gate by PauseBeforeWrite.
const writeTimeout = 10 * time.Second

// NewPool opens the workload's pool: at most maxConns connections (one per scope is
// enough, the actions of a scope run one at a time), labelled for pg_stat_activity.
// It connects lazily.
//
// idleTx becomes the connections' idle_in_transaction_session_timeout; pass the
// session lease L. A fenced transaction holds FOR KEY SHARE on the scope's
// leader_state row until it ends, and a successor's claim waits for it: if this
// process freezes or is cut off between Fence and Commit, only this timeout lets
// the server end the transaction, at about the time it expires the leadership
// session. Without it, failover waits for the process to resume or for TCP
// keepalives (hours by default). (The fence sets the same limit for the rest of
// its transaction, FencedTxIdleTimeout, so this also covers the statements before it.)
// pooled: the connection goes through a transaction pooler (see below).
func NewPool(conn *pgx.ConnConfig, node string, maxConns int32, idleTx time.Duration, pooled bool) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = conn.Copy()
	name := "pgleader workload " + node
	if len(name) > 63 {
		name = name[:63]
	}
	pc.ConnConfig.RuntimeParams["application_name"] = name
	if pooled {
		// Through a transaction pooler: unnamed statements only (a prepared
		// statement would not survive the transaction), and no session setting in
		// the startup packet (PgBouncer refuses them; the fence bounds the
		// transaction anyway).
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		idleTx = 0
	} else {
		pgsession.Apply(&pc.ConnConfig.Config)
	}
	if idleTx > 0 {
		pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(max(idleTx.Milliseconds(), 1), 10)
	}
	pc.MaxConns = max(maxConns, 1)
	pc.MinConns = 0
	return pgxpool.NewWithConfig(context.Background(), pc)
}

// Run performs actions until ctx ends, one goroutine per scope, and returns after
// they have all stopped. An action in flight when ctx ends is cancelled; to let it
// finish, cancel ctx only after the Elector has drained (Run returned).
func (w *Workload) Run(ctx context.Context) error {
	if w.Interval <= 0 {
		return fmt.Errorf("workload: interval must be positive, got %v", w.Interval)
	}
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	var wg sync.WaitGroup
	for _, s := range w.Scopes {
		a := &actor{w: w, log: log, scope: s, prefix: fmt.Sprintf("%s:%s:%s-", w.Node, s.Name(), run)}
		wg.Go(func() { a.loop(ctx) })
	}
	wg.Wait()
	return nil
}

// actor performs the actions of one scope.
type actor struct {
	w       *Workload
	log     *slog.Logger
	scope   *election.Scope
	prefix  string
	seq     int64
	lastErr string // the last "not attempted" error warned about
}

func (a *actor) loop(ctx context.Context) {
	tick := time.NewTicker(a.w.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.act(ctx)
		}
	}
}

// act performs one action if this node leads the scope, and reports its outcome.
func (a *actor) act(ctx context.Context) {
	var (
		tok       election.Token
		requestID string
		sent      bool // the INSERT may have reached the server: from here on, failure is "unknown"
	)
	err := a.scope.Do(ctx, func(ctx context.Context, t election.Token) error {
		tok = t
		a.seq++
		requestID = fmt.Sprintf("%s%d", a.prefix, a.seq)
		if a.w.BeforeWrite != nil {
			a.w.BeforeWrite(t)
		}
		if p := a.w.PauseBeforeWrite; p > 0 {
			a.report(eventlog.ActionPaused, t, requestID, p.String())
			time.Sleep(p)
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
			defer cancel()
			return a.write(wctx, t, requestID, &sent)
		}
		return a.write(ctx, t, requestID, &sent)
	})
	switch {
	case errors.Is(err, election.ErrNotLeader) && requestID == "":
		return // not attempted: not leading, or the gate is closed
	case err == nil:
		a.report(eventlog.ActionOK, tok, requestID, "")
	case isFenced(err):
		a.report(eventlog.ActionRejected, tok, requestID, err.Error())
		// Audited so operators see the zombie: the collector alerts on it.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := election.ReportFenced(actx, a.w.Pool, tok, requestID); err != nil {
			a.log.Warn("could not audit a refused write", "scope", tok.Scope, "epoch", tok.Epoch, "err", err)
		}
	case sent:
		a.report(eventlog.ActionUnknown, tok, requestID, err.Error())
	default:
		// Never sent (a closed gate mid-way, a connection that failed, a pooler
		// that refuses transactions): a warning the first time an error says
		// something new, so a workload that cannot write at all is not silent.
		level := slog.LevelDebug
		if msg := err.Error(); msg != a.lastErr {
			level, a.lastErr = slog.LevelWarn, msg
		}
		a.log.Log(ctx, level, "action not attempted", "scope", tok.Scope, "node", a.w.Node, "epoch", tok.Epoch,
			"request_id", requestID, "err", err)
	}
}

func (a *actor) write(ctx context.Context, tok election.Token, requestID string, sent *bool) error {
	tx, err := a.w.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// No-op after Commit. pgx closes a connection whose query was cancelled, so
		// this never waits on a broken one for long; the bound is for safety.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if !a.w.UnsafeSkipFence {
		if err := election.Fence(ctx, tx, tok); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx,
		"INSERT INTO pgleader.demo_actions (scope, epoch, node_id, request_id) VALUES ($1, $2, $3, $4)",
		tok.Scope, tok.Epoch, a.w.Node, requestID); err != nil {
		// SafeToRetry: pgx failed before sending anything (e.g. the gate had
		// closed and cancelled ctx), so no row can exist.
		*sent = !pgconn.SafeToRetry(err)
		return err
	}
	*sent = true
	return tx.Commit(ctx)
}

func (a *actor) report(kind eventlog.ActionKind, tok election.Token, requestID, reason string) {
	a.log.Debug(string(kind), "scope", tok.Scope, "node", a.w.Node, "epoch", tok.Epoch,
		"request_id", requestID, "reason", reason)
	if a.w.Recorder != nil {
		a.w.Recorder.Action(kind, tok.Scope, tok.Epoch, requestID, reason)
	}
}

// isFenced reports the database refusing a stale epoch, through Fence or through
// the fence's SQLSTATE surfacing from another statement of the transaction.
func isFenced(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, election.ErrFenced) ||
		errors.As(err, &pe) && pe.Code == protocol.SQLStateFenced
}
