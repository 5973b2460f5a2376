package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/migrations/migrate"
)

func (a *app) migrateCommand() *cobra.Command {
	var rolesFlag string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the pgleader schema in the database",
		Long: `migrate applies the pending migrations of the pgleader schema (schema
"pgleader": leader_state, nodes, terms, audit, demo_actions and the claim,
heartbeat, release and fence functions). It is idempotent, and several processes
may run it at once: one applies, the others find nothing left to do.

The SQL files are plain SQL with goose annotations; a host application may apply
them with its own migration tool instead.

From schema version 7 the schema belongs to a NOLOGIN owner role, and three more
NOLOGIN roles carry the least privileges each part needs: pgleader_node (nodes:
EXECUTE on the engine's functions), pgleader_reader (collector, exporter, status,
history, top) and pgleader_operator (a reader that may also resign a leader).
migrate creates them when it may (CREATEROLE); otherwise a DBA creates them first
(docs/security.md). Grant them to login roles:

  GRANT pgleader_node TO billing_service;

migrate refuses a pgleader schema that it did not create (owned by another role,
or holding another role's objects).`,
		Example: `  pgleader migrate --dsn postgres://app@db:5432/app
  DATABASE_URL=postgres://app@db:5432/app pgleader migrate
  pgleader migrate --roles node=billing_leader,reader=billing_watch`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			roles, err := parseRoles(rolesFlag)
			if err != nil {
				return err
			}
			t, err := a.resolve()
			if err != nil {
				return err
			}
			// Reachable, PostgreSQL 14+; a missing or older schema is what we fix.
			if err := dbcheck.Database(ctx, t.Config, migrations.Latest); err != nil && !errors.Is(err, election.ErrSchemaMissing) {
				return err
			}
			res, err := migrate.Up(ctx, t.Config, a.log, migrate.WithRoles(roles))
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			if len(res.Applied) == 0 {
				fmt.Fprintf(a.stdout, "pgleader schema: already at version %d\n", res.To)
			} else {
				fmt.Fprintf(a.stdout, "pgleader schema: version %d → %d (applied %s)\n", res.From, res.To, strings.Join(res.Applied, ", "))
			}
			if len(res.Changed) > 0 {
				fmt.Fprintf(a.stdout, "functions and views: %s applied (new or changed)\n", plural(len(res.Changed), "file"))
			}
			r := res.Roles
			fmt.Fprintf(a.stdout, "roles: owner %s · node %s · reader %s · operator %s (grant them to login roles: docs/security.md)\n",
				r.Owner, r.Node, r.Reader, r.Operator)
			return nil
		}),
	}
	cmd.Flags().StringVar(&rolesFlag, "roles", "", "role names other than the defaults, as `KIND=NAME,…` (kinds: owner, node, reader, operator); fixed at the first migration to version 7")
	return cmd
}

// parseRoles reads --roles.
func parseRoles(s string) (migrate.Roles, error) {
	var r migrate.Roles
	if s == "" {
		return r, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return r, cli.BadInput("--roles %q: each entry must be KIND=NAME (kinds: owner, node, reader, operator)", kv)
		}
		switch k {
		case "owner":
			r.Owner = v
		case "node":
			r.Node = v
		case "reader":
			r.Reader = v
		case "operator":
			r.Operator = v
		default:
			return r, cli.BadInput("--roles: unknown role kind %q (kinds: owner, node, reader, operator)", k)
		}
	}
	if err := r.Validate(); err != nil {
		return r, cli.BadInput("--roles: %v", err)
	}
	return r, nil
}
