package election

import (
	"context"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"
)

// Check connects once and verifies what Run needs: the server is reachable,
// PostgreSQL 14 or newer, and the pgleader schema is at the version this build
// requires. Its errors wrap ErrUnreachable, ErrUnsupportedServer or
// ErrSchemaMissing and say how to fix the problem.
func (e *Elector) Check(ctx context.Context) error { return e.mode.check(ctx) }

// checkDatabase is Check in a database mode.
func (e *Elector) checkDatabase(ctx context.Context) error {
	if err := dbcheck.Database(ctx, e.base, migrations.Latest); err != nil {
		return err
	}
	if err := dbcheck.NodeRole(ctx, e.base); err != nil {
		return err
	}
	if err := dbcheck.Bindings(ctx, e.base, e.cfg.Scopes); err != nil {
		return err
	}
	return dbcheck.LockTable(ctx, e.base, len(e.cfg.Scopes))
}
