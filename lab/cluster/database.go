package cluster

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// Database gives a harness (bench, chaos, demo) its database: the one dsn names,
// or, when dsn is empty, a throwaway PostgreSQL server with a database "pgleader"
// (lab/pgtest). Either way the schema is migrated. close stops the throwaway
// server; the server is returned so a harness can restart it (nil for a given dsn).
func Database(ctx context.Context, dsn string, logf func(string, ...any)) (string, *pgserver.Server, func(), error) {
	var srv *pgserver.Server
	closeFn := func() {}
	if dsn == "" {
		var err error
		srv, err = pgserver.Start(ctx, pgserver.Options{Log: logf})
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
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		closeFn()
		return "", nil, nil, fmt.Errorf("migrate: %w", err)
	}
	return dsn, srv, closeFn, nil
}
