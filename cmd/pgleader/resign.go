package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/termsafe"
)

func (a *app) resignCommand() *cobra.Command {
	var epoch int64
	cmd := &cobra.Command{
		Use:   "resign SCOPE",
		Short: "Ask the leader of a scope to hand it over gracefully, through the database",
		Long: `resign marks the scope's open term in pgleader.leader_state (pgleader.request_resign).
The leader sees the mark at once (the request rings its doorbell; at its next
heartbeat in lease mode, or when its doorbell cannot ring: pgleader status says
so) and resigns as if its service had
called Scope.Resign: its gate closes to new work, in-flight work drains (up to its
drain timeout), the term is released as "resigned" and a follower takes over under
a new epoch at once. The leader then sits out one resign cooldown before it
campaigns again. The request is audited (kind resign_requested).

With --epoch, only that term is asked (a script that read the epoch earlier does
not ask a successor by mistake). Exit code 3 when no such term is open. Unlike
evicting (pgleader top --allow-actions, x), it needs no privilege beyond writing
the pgleader tables, and nothing is cut off mid-write.`,
		Example: `  pgleader resign billing
  pgleader resign billing --epoch 42`,
		Args: cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			scope := args[0]
			if err := checkScopes([]string{scope}); err != nil {
				return err
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				by := operatorVia("pgleader resign")
				var want *int64
				if cmd.Flags().Changed("epoch") {
					want = &epoch
				}
				var ok bool
				var holder *string
				var current *int64
				if err := operatorTx(ctx, t, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT pgleader.request_resign($1, $2, $3),
					(SELECT holder FROM pgleader.leader_state WHERE scope = $1),
					(SELECT epoch FROM pgleader.leader_state WHERE scope = $1)`, scope, want, by).Scan(&ok, &holder, &current)
				}); err != nil {
					return err
				}
				if !ok {
					msg := fmt.Sprintf("%s has no open term to resign", scope)
					if want != nil && current != nil {
						msg = fmt.Sprintf("%s: epoch %d is not the open term (current epoch %d)", scope, *want, *current)
					}
					return &cli.StatusError{Code: cli.ExitNoLeader, Msg: "pgleader: " + msg}
				}
				fmt.Fprintf(a.stdout, "asked %s to resign %s (epoch %d); a follower takes over within one heartbeat interval — watch it with `pgleader history --scope %s`\n",
					orUnknown(holder), scope, *current, scope)
				return nil
			})
		}),
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "resign only if `N` is the scope's open term")
	return cmd
}

// orUnknown is a holder read from the database, safe to print.
func orUnknown(s *string) string {
	if s == nil {
		return "(unknown)"
	}
	return termsafe.String(*s)
}

// operatorTx runs fn in one transaction on a short-lived connection to t, with
// unnamed statements (through any pooler): the shape of an operator's request
// (resign, node forget).
func operatorTx(ctx context.Context, t cli.Target, fn func(pgx.Tx) error) error {
	cfg := t.Config.Copy()
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgsession.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgsession.InTx(ctx, conn, fn)
}
