package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/cli"
)

// checkScopes validates --scope values.
func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if err := election.ValidateScopeName(s); err != nil {
			return cli.BadInput("--scope %q: %v", s, err)
		}
	}
	return nil
}

// checkedTarget resolves the database and checks it is reachable, PostgreSQL 14+ and
// migrated, so a command fails early with the fix in its message.
func (a *app) checkedTarget(ctx context.Context) (cli.Target, error) {
	t, err := a.resolve()
	if err != nil {
		return t, err
	}
	return t, election.CheckDatabase(ctx, t.Config)
}

// newCollector builds the collector of the commands that watch the database.
func newCollector(t cli.Target, interval time.Duration, evictStale bool, log *slog.Logger) (*collector.Collector, error) {
	cfg := collector.DefaultConfig()
	cfg.ConnConfig, cfg.PollInterval, cfg.Logger, cfg.EvictStale = t.Config, interval, log, evictStale
	return collector.New(cfg)
}
