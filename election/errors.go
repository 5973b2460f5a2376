package election

import (
	"errors"
	"fmt"

	"github.com/pgleader/pgleader/internal/dbcheck"
)

// Errors callers branch on. Errors returned by the package wrap one of these with
// context; test with errors.Is.
var (
	// ErrNotLeader: this node does not lead the scope, or its gate is closed (trust
	// window ended, leadership lost, draining).
	ErrNotLeader = errors.New("pgleader: not the leader")
	// ErrLeadershipLost: the gate this work ran under closed: the trust window ran
	// out, the term was lost, or it was released after a drain. It is the cause
	// (context.Cause) of the contexts that Do, Lead and Token.Context hand out,
	// wrapped in a *LostError that says why.
	ErrLeadershipLost = errors.New("pgleader: leadership lost")
	// ErrFenced: the database refused a fenced write because the token's epoch is no
	// longer the scope's current term.
	ErrFenced = errors.New("pgleader: fenced: epoch is no longer current")
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("pgleader: invalid configuration")
	// ErrUnreachable: the database could not be reached.
	ErrUnreachable = dbcheck.ErrUnreachable
	// ErrUnsupportedServer: the server is older than PostgreSQL 14.
	ErrUnsupportedServer = dbcheck.ErrUnsupportedServer
	// ErrSchemaMissing: the pgleader schema is absent or older than this build needs.
	ErrSchemaMissing = dbcheck.ErrSchemaMissing
	// ErrPermission: the connecting role lacks the privileges it needs on the
	// pgleader schema (a node needs the pgleader_node role; see docs/security.md).
	ErrPermission = dbcheck.ErrPermission
	// ErrTooManyScopes: more scopes than the server's lock table can hold safely:
	// a node may use at most half of the server's shared lock table,
	// max_locks_per_transaction × (max_connections + max_prepared_transactions).
	ErrTooManyScopes = dbcheck.ErrTooManyScopes
	// ErrPooler: a connection pooler sits where the leadership session needs a
	// session of its own: a transaction or statement pooler (PgBouncer's
	// pool_mode=transaction, Supavisor, RDS Proxy without pinning, pgcat), or one
	// that refuses or drops the session settings that bound failover. Session
	// advisory locks through it would outlive a crash or reach another client.
	// The message names the fixes: a direct DSN for leadership (a session pooler
	// works too), or Mode = ModeLease.
	ErrPooler = dbcheck.ErrPooler
	// ErrModeConflict: a scope already runs in the other mode (ModeLock,
	// ModeLease) with live candidates: every candidate of a scope must use the
	// same mode.
	ErrModeConflict = errors.New("pgleader: scope runs in the other mode")
	// ErrUnknownScope: the scope is not one of Config.Scopes.
	ErrUnknownScope = errors.New("pgleader: unknown scope")
	// ErrClosed: the Elector has stopped (or never started and cannot start
	// again): it cannot be used again.
	ErrClosed = errors.New("pgleader: elector stopped")
	// ErrFencedTxIdle: the server ended a fenced transaction that stayed idle
	// longer than Config.FencedTxIdleTimeout (SQLSTATE 25P03); nothing it did
	// was committed.
	ErrFencedTxIdle = errors.New("pgleader: fenced transaction idle too long")
)

// ConfigError names the field of Config that broke a rule.
type ConfigError struct {
	Field string // e.g. "TrustWindow"
	Rule  string // e.g. "heartbeat interval (1s) + heartbeat timeout (1s) must be shorter than trust window (1.5s)"
}

// Error returns "Field: rule".
func (e *ConfigError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Rule) }

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// LostError is the cause of a context cancelled because a gate closed: which
// scope and epoch, and why (protocol.ReasonTrustExpired, protocol.ReasonLostConnection, a clean
// release's protocol.ReasonShutdown or protocol.ReasonResigned, …). errors.Is(err,
// ErrLeadershipLost) is true for it.
type LostError struct {
	Scope  string
	Epoch  int64
	Reason Reason
}

// Error returns "pgleader: leadership lost: SCOPE epoch N: REASON".
func (e *LostError) Error() string {
	return fmt.Sprintf("%v: %s epoch %d: %s", ErrLeadershipLost, e.Scope, e.Epoch, e.Reason)
}

// Unwrap makes errors.Is(err, ErrLeadershipLost) true.
func (e *LostError) Unwrap() error { return ErrLeadershipLost }
