package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/migrations"
)

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the pgleader schema in the database",
		Long: `migrate applies the pending migrations of the pgleader schema (schema
"pgleader": leader_state, nodes, terms, audit, demo_actions and the claim,
heartbeat, release and fence functions). It is idempotent, and several processes
may run it at once: one applies, the others find nothing left to do.

The SQL files are plain SQL with goose annotations; a host application may apply
them with its own migration tool instead.`,
		Example: `  pgleader migrate --dsn postgres://app@db:5432/app
  DATABASE_URL=postgres://app@db:5432/app pgleader migrate`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			t, err := a.resolve()
			if err != nil {
				return err
			}
			// Reachable, PostgreSQL 14+; a missing or older schema is what we fix.
			if err := election.CheckDatabase(ctx, t.Config); err != nil && !errors.Is(err, election.ErrSchemaMissing) {
				return err
			}
			res, err := migrations.Up(ctx, t.Config, a.log)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			if len(res.Applied) == 0 {
				fmt.Fprintf(a.stdout, "pgleader schema: already at version %d\n", res.To)
				return nil
			}
			fmt.Fprintf(a.stdout, "pgleader schema: version %d → %d (applied %s)\n", res.From, res.To, strings.Join(res.Applied, ", "))
			return nil
		}),
	}
}
