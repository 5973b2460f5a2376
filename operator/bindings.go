package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/protocol"
)

// ErrBindingRefused: the database refused a change of a scope's binding or lock
// key (the caller is not the schema owner or an operator, a role does not
// exist, the scope is held); the error says which.
var ErrBindingRefused = errors.New("refused")

// BindingConflict is a running node that campaigns for a scope of a new binding
// under a login the binding does not allow: the database refuses its claims of
// that scope from now on.
type BindingConflict struct {
	NodeID    string `json:"node_id"`
	LoginRole string `json:"login_role"`
	Scope     string `json:"scope"`
}

// Binding is a row of pgleader.scope_bindings.
type Binding struct {
	Prefix bool     `json:"prefix"` // binds every scope whose name starts with Name
	Name   string   `json:"name"`
	Roles  []string `json:"roles"`
	By     string   `json:"bound_by"`
}

// KeyOverride is a row of pgleader.scope_keys: a scope whose lock key is not
// the derived one.
type KeyOverride struct {
	Scope   string `json:"scope"`
	LockKey int64  `json:"lock_key"`
	By      string `json:"set_by"`
}

// Bind binds the scope name (or, with prefix, every scope whose name starts with
// name) to roles, the roles whose logins alone may campaign for it; no roles
// removes the binding (pgleader.bind_scope: the schema owner only, audited). It
// returns the running nodes the new binding refuses.
func (o *Operator) Bind(ctx context.Context, name string, prefix bool, roles []string) ([]BindingConflict, error) {
	kind := "scope"
	if prefix {
		kind = "prefix"
	}
	var out []BindingConflict
	err := o.withConn(ctx, appBind, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT node_id, coalesce(login_role, ''), scope FROM pgleader.bind_scope($1, $2, $3)`, kind, name, roles)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[BindingConflict])
		return err
	})
	return out, bindingError("bind "+name, err)
}

// SetLockKey records key as scope's lock key (nil: back to the derived key)
// through pgleader.set_lock_key (the owner or an operator; audited; refused
// while a session holds the scope). It returns the key now in force.
func (o *Operator) SetLockKey(ctx context.Context, scope string, key *int64) (int64, error) {
	var got int64
	err := o.withConn(ctx, appBind, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pgleader.set_lock_key($1, $2)`, scope, key).Scan(&got)
	})
	return got, bindingError("set the lock key of "+scope, err)
}

// Bindings lists the scope bindings and lock key overrides (schema 12).
func (o *Operator) Bindings(ctx context.Context) ([]Binding, []KeyOverride, error) {
	var bs []Binding
	var ks []KeyOverride
	err := o.withConn(ctx, appBind, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT b.kind = 'prefix', b.name, b.roles, b.bound_by FROM pgleader.scope_bindings b ORDER BY b.name, b.kind`)
		if err != nil {
			return err
		}
		if bs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Binding]); err != nil {
			return err
		}
		rows, err = conn.Query(ctx, `SELECT k.scope, k.lock_key, k.set_by FROM pgleader.scope_keys k ORDER BY k.scope`)
		if err != nil {
			return err
		}
		ks, err = pgx.CollectRows(rows, pgx.RowToStructByPos[KeyOverride])
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("collector: read bindings: %w", err)
	}
	return bs, ks, nil
}

// appBind is the application_name of the binding commands' sessions.
const appBind = "pgleader scope"

// bindingError turns the database's refusals into ErrBindingRefused with its
// message and the fix.
func bindingError(what string, err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		if err != nil {
			return fmt.Errorf("collector: %s: %w", what, err)
		}
		return nil
	}
	msg := strings.TrimPrefix(pe.Message, "pgleader: ")
	switch pe.Code {
	case "42501":
		return fmt.Errorf("%w: %s: %s: binding scopes is the schema owner's (run it as the migrating role, a member of pgleader_owner); setting a lock key needs pgleader_operator",
			ErrBindingRefused, what, msg)
	case "42704", "22023", "23505", protocol.SQLStateRefused:
		return fmt.Errorf("%w: %s: %s", ErrBindingRefused, what, msg)
	}
	return fmt.Errorf("collector: %s: %w", what, err)
}
