package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// forgetCommand is `pgleader node forget ID`: the command a stale_node alert's
// hint names, where it once suggested an UPDATE built from the node id.
func (a *app) forgetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "forget ID",
		Short: "Forget a node that is not running: it leaves status, top and the metrics",
		Long: `forget removes a node that is not running from pgleader.nodes
(pgleader.forget_node): a node that stopped, or whose process died and will not
come back under its id. It leaves pgleader status, top and the exporter's series;
its terms and audit rows stay, and the removal is audited (node_forgotten) with
the login that asked. A running node (its leadership session alive, or its lease
renewed) is refused: stop it first. Needs the operator role (pgleader_operator).

Exit 0 when the node was forgotten, 1 when no such node is registered or it is
running, 2 for a malformed id.`,
		Example: `  pgleader node forget worker-1
  pgleader node forget 'db-host-4121-5f0a2c'`,
		Args: cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if id == "" || len(id) > 200 || strings.IndexFunc(id, termsafe.Unsafe) >= 0 {
				return cli.BadInput("node id %s: 1 to 200 bytes of printable characters (as pgleader status shows it)", termsafe.String(id))
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				var forgot bool
				if err := operatorTx(ctx, t, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT pgleader.forget_node($1)`, id).Scan(&forgot)
				}); err != nil {
					return err
				}
				if !forgot {
					return &cli.StatusError{Code: cli.ExitFailure, Msg: fmt.Sprintf("pgleader: no node %s is registered: nothing to forget (pgleader status lists the nodes)", termsafe.String(id))}
				}
				fmt.Fprintf(a.stdout, "forgot node %s: it no longer shows in status, top or the metrics (audited as node_forgotten)\n", termsafe.String(id))
				return nil
			})
		}),
	}
}
