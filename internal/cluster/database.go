package cluster

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

// Database gives a harness (bench, chaos, demo) its database: the one dsn names,
// or, when dsn is empty, a throwaway PostgreSQL server with a database "pgleader"
// (internal/pgtest). Either way the schema is migrated. close stops the throwaway
// server; the server is returned so a harness can restart it (nil for a given dsn).
func Database(ctx context.Context, dsn string, logf func(string, ...any)) (string, *pgtest.Server, func(), error) {
	var srv *pgtest.Server
	closeFn := func() {}
	if dsn == "" {
		var err error
		srv, err = pgtest.Start(ctx, pgtest.Options{Log: logf})
		if err != nil {
			return "", nil, nil, err
		}
		closeFn = func() { _ = srv.Close() }
		if err := srv.CreateDatabase(ctx, "pgleader"); err != nil {
			closeFn()
			return "", nil, nil, err
		}
		dsn = srv.DSN("pgleader")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		closeFn()
		return "", nil, nil, err
	}
	if _, err := migrations.Up(ctx, cfg, nil); err != nil {
		closeFn()
		return "", nil, nil, fmt.Errorf("migrate: %w", err)
	}
	return dsn, srv, closeFn, nil
}
