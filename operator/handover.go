package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgdial"
	"github.com/pgleader/pgleader/protocol"
)

// Application names of the sessions of a handover and of a retirement.
const (
	appHandover = "pgleader-collector handover"
	appRetire   = "pgleader-collector retire"
)

var (
	// ErrHandoverRefused: the database refused the handover before anything
	// changed (the target is unknown, not running, not a candidate of the scope,
	// of priority 0, or the leader already; without a target, no candidate that
	// does not cool down after resigning the scope; the scope is unknown or
	// retired). The message says which. A named target that cools down is
	// accepted: it ends its cooldown to take the scope.
	ErrHandoverRefused = errors.New("collector: handover refused")
	// ErrHandoverTimeout: the target did not lead the scope before the timeout;
	// the request was withdrawn (the scope stays with whoever leads it, or goes
	// to the next claimant).
	ErrHandoverTimeout = errors.New("collector: handover timed out")
	// ErrHandoverLost: another node than the target leads the scope now: the
	// target died, or the leader was lost, during the handover; an ordinary
	// failover took over.
	ErrHandoverLost = errors.New("collector: another node took over")
	// ErrRetireRefused: pgleader.retire_scope refused (a running node still
	// campaigns for the scope, or the scope is unknown).
	ErrRetireRefused = errors.New("collector: retire refused")
)

// HandoverResult is what Handover achieved.
type HandoverResult struct {
	Scope     string
	From      string // the leader when asked ("" when the scope had none)
	FromEpoch int64  // its epoch (0 when none)
	To        string // the target (chosen by the database when Handover's to was "")
	Epoch     int64  // the target's new epoch
	// Took is the time from the request to the new term in the database.
	Took time.Duration
}

// sqlHandoverState is the scope's term as the waiting Handover reads it.
const sqlHandoverState = `
SELECT s.epoch, coalesce(s.holder, ''), s.holder IS NOT NULL AND s.released_at IS NULL
  FROM pgleader.leader_state s WHERE s.scope = $1`

// Handover asks the leader of scope to hand it over to the node to ("" for the
// best live candidate: highest priority, then most recently seen), through
// pgleader.request_handover (schema version 8), and waits until that node leads
// the scope: the leader closes its gate, drains its in-flight work (up to its
// drain timeout), releases the term as handed_over, and the scope, reserved for
// the target, goes to it alone. Errors:
//
//   - ErrHandoverRefused: nothing changed (the message names the reason);
//   - ErrHandoverTimeout: the target did not lead within timeout; the request
//     was withdrawn (pgleader.cancel_handover), so the scope is not left
//     reserved: it stays with its leader, or followers claim it at once;
//   - ErrHandoverLost: another node leads now (the target died mid-handover
//     and an ordinary failover followed).
//
// The request is audited (handover_requested: who, from where); via is what the
// caller says it is (a tool name).
func (o *Operator) Handover(ctx context.Context, scope, to, via string, timeout time.Duration) (HandoverResult, error) {
	res := HandoverResult{Scope: scope}
	if timeout <= 0 {
		return res, fmt.Errorf("%w: timeout %v must be positive", ErrHandoverRefused, timeout)
	}
	conn, err := o.connect(ctx, appHandover, statementTimeout)
	if err != nil {
		return res, fmt.Errorf("collector: handover %s: connect: %w", scope, err)
	}
	defer pgdial.Close(conn)
	// LISTEN first: the new term is announced (elected); the notification is a
	// hint to read again, and the read is also repeated every 50 ms (the only
	// way through a pooler, which notifications do not cross).
	if !o.dial.Pooled() {
		if _, err := conn.Exec(ctx, "LISTEN "+protocol.NotifyChannel); err != nil {
			return res, fmt.Errorf("collector: handover %s: listen: %w", scope, err)
		}
	}
	var target *string
	if to != "" {
		target = &to
	}
	began := time.Now()
	var holder *string
	if err := conn.QueryRow(ctx, "SELECT epoch, holder, target FROM pgleader.request_handover($1, $2, $3, $4)",
		scope, target, timeout.Milliseconds(), via).Scan(&res.FromEpoch, &holder, &res.To); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == protocol.SQLStateRefused {
			return res, fmt.Errorf("%w: %s", ErrHandoverRefused, strings.TrimPrefix(pe.Message, "pgleader: "))
		}
		return res, fmt.Errorf("collector: handover %s: %w", scope, err)
	}
	if holder != nil {
		res.From = *holder
	}
	o.log.Debug("asked for a handover", "scope", scope, "from", res.From, "epoch", res.FromEpoch, "to", res.To, "via", via)

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		var epoch int64
		var leader string
		var open bool
		if err := conn.QueryRow(ctx, sqlHandoverState, scope).Scan(&epoch, &leader, &open); err != nil {
			return res, fmt.Errorf("collector: handover %s: read its term: %w", scope, err)
		}
		switch {
		case open && epoch > res.FromEpoch && leader == res.To:
			res.Epoch, res.Took = epoch, time.Since(began)
			return res, nil
		case open && epoch > res.FromEpoch:
			return res, fmt.Errorf("%w: %s leads %s at epoch %d, not %s", ErrHandoverLost, leader, scope, epoch, res.To)
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, werr := conn.WaitForNotification(wctx)
		cancel()
		select {
		case <-deadline.C:
			return res, o.withdrawHandover(conn, scope, res.To, via, timeout)
		default:
		}
		if ctx.Err() != nil {
			err := o.withdrawHandover(conn, scope, res.To, via, timeout)
			return res, errors.Join(ctx.Err(), err)
		}
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) && conn.IsClosed() {
			return res, fmt.Errorf("collector: handover %s: %w", scope, werr)
		}
	}
}

// withdrawHandover cancels a handover that did not complete in time.
func (o *Operator) withdrawHandover(conn *pgx.Conn, scope, to, via string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var withdrawn bool
	if err := conn.QueryRow(ctx, "SELECT pgleader.cancel_handover($1, $2, $3)", scope, to, via).Scan(&withdrawn); err != nil {
		return fmt.Errorf("%w after %v, and withdrawing the request failed: %w", ErrHandoverTimeout, timeout, err)
	}
	o.log.Warn("handover timed out; request withdrawn", "scope", scope, "to", to, "withdrawn", withdrawn)
	return fmt.Errorf("%w: %s did not lead %s within %v; the request was withdrawn", ErrHandoverTimeout, to, scope, timeout)
}

// Retire takes a scope no running node campaigns for out of the views and the
// alerts (pgleader.retire_scope, schema version 8): the collector leaves it out
// of snapshots (collector.Snapshot.Retired counts it); its history stays. A node that
// campaigns for it again revives it. ErrRetireRefused names why it was refused
// (running nodes campaign for it, or the scope is unknown). It returns false
// when the scope was retired already.
func (o *Operator) Retire(ctx context.Context, scope, via string) (bool, error) {
	var done bool
	err := o.withConn(ctx, appRetire, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT pgleader.retire_scope($1, $2)", scope, via).Scan(&done)
	})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == protocol.SQLStateRetireRefused {
			return false, fmt.Errorf("%w: %s", ErrRetireRefused, strings.TrimPrefix(pe.Message, "pgleader: "))
		}
		return false, fmt.Errorf("collector: retire %s: %w", scope, err)
	}
	return done, nil
}
