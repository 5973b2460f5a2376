package election

import (
	"errors"
	"fmt"
)

// Errors callers branch on. Errors returned by the package wrap one of these with
// context; test with errors.Is.
var (
	// ErrNotLeader: this node does not lead the scope, or its gate is closed (trust
	// window ended, leadership lost, draining).
	ErrNotLeader = errors.New("pgleader: not the leader")
	// ErrFenced: the database refused a fenced write because the token's epoch is no
	// longer the scope's current term.
	ErrFenced = errors.New("pgleader: fenced: epoch is no longer current")
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("pgleader: invalid configuration")
	// ErrUnreachable: the database could not be reached.
	ErrUnreachable = errors.New("pgleader: database unreachable")
	// ErrUnsupportedServer: the server is older than PostgreSQL 14.
	ErrUnsupportedServer = errors.New("pgleader: unsupported PostgreSQL version")
	// ErrSchemaMissing: the pgleader schema is absent or older than this build needs.
	ErrSchemaMissing = errors.New("pgleader: schema missing or outdated")
	// ErrPermission: the connecting role lacks the privileges it needs on the
	// pgleader schema (a node needs the pgleader_node role; see docs/security.md).
	ErrPermission = errors.New("pgleader: permission denied")
	// ErrTooManyScopes: more scopes than the server's lock table can hold safely
	// (see LockTableCapacity).
	ErrTooManyScopes = errors.New("pgleader: too many scopes for this server")
	// ErrUnknownScope: the scope is not one of Config.Scopes.
	ErrUnknownScope = errors.New("pgleader: unknown scope")
	// ErrClosed: Run has returned; the elector cannot be used again.
	ErrClosed = errors.New("pgleader: elector stopped")
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
