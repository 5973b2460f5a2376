package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/operator"
)

func (a *app) handoverCommand() *cobra.Command {
	var (
		to      string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "handover SCOPE [--to NODE]",
		Short: "Move leadership of a scope to a chosen node (or the best candidate), without a failover",
		Long: `handover asks the leader of SCOPE, through the database (pgleader.request_handover),
to hand the scope to NODE, and waits until NODE leads it. The leader closes its gate
to new work, drains in-flight work (up to its drain timeout), and releases the term
as "handed_over"; the scope stays reserved for NODE, which alone may claim it, and
its gate opens at once (a clean release leaves nothing to wait out). The command
prints the new epoch and exits 0.

Without --to, the best live candidate is chosen: the highest priority, then the
most recently seen, never a node cooling down after resigning or handing over
SCOPE. A node named with --to is taken even while it cools down (move a scope to
b and straight back to a: a takes it at once, its cooldown ends). Nothing changes,
and the command exits 2 naming the reason, when NODE is unknown, not running, not
a candidate of SCOPE, of priority 0 or the leader already, or when SCOPE is
unknown or retired. If NODE does not lead within --timeout, the request is withdrawn (the
scope stays with its leader, or followers claim it at once) and the command exits
1; if NODE dies mid-handover, an ordinary failover follows and the command exits 1
naming the node that took over. The request is audited (handover_requested, with
the login role and where it came from).`,
		Example: `  pgleader handover billing --to worker-2
  pgleader handover billing --timeout 30s`,
		Args: cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			scope := args[0]
			if err := checkScopes([]string{scope}); err != nil {
				return err
			}
			if cmd.Flags().Changed("to") {
				if err := checkNodeID("--to", to); err != nil {
					return err
				}
			}
			if timeout <= 0 {
				return cli.BadInput("--timeout %v: must be positive", timeout)
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				op, err := newOperator(t, nil, a.log)
				if err != nil {
					return err
				}
				res, err := op.Handover(ctx, scope, to, operatorVia("pgleader handover"), timeout)
				switch {
				case errors.Is(err, operator.ErrHandoverRefused):
					return cli.BadInput("%v", err)
				case err != nil:
					return err
				}
				from := "no leader"
				if res.From != "" {
					from = fmt.Sprintf("%s (epoch %d)", termsafe.String(res.From), res.FromEpoch)
				}
				fmt.Fprintf(a.stdout, "%s now leads %s at epoch %d (from %s, in %s)\n",
					termsafe.String(res.To), termsafe.String(scope), res.Epoch, from, human.Duration(res.Took))
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "the `NODE` that should lead (default: the best live candidate)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up, withdrawing the request, if the node does not lead within `D`")
	return cmd
}

func (a *app) scopeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scope",
		Short: "Manage scopes: which logins campaign for them (bind), their lock key, retire one no node campaigns for any more",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.bindingCommands()...)
	cmd.AddCommand(&cobra.Command{
		Use:   "retire SCOPE",
		Short: "Take a scope no running node campaigns for out of the views and alerts",
		Long: `retire marks SCOPE retired (pgleader.retire_scope): status, top and the exporter
stop showing it and its no_leader alert; its history stays (pgleader history). It is
refused, exit 2, while a running node campaigns for SCOPE. A node that campaigns for
it again revives it. Needs the operator role; audited (scope_retired).`,
		Example: `  pgleader scope retire old-billing`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			scope := args[0]
			if err := checkScopes([]string{scope}); err != nil {
				return err
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				op, err := newOperator(t, nil, a.log)
				if err != nil {
					return err
				}
				done, err := op.Retire(ctx, scope, operatorVia("pgleader scope retire"))
				switch {
				case errors.Is(err, operator.ErrRetireRefused):
					return cli.BadInput("%v", err)
				case err != nil:
					return err
				case !done:
					fmt.Fprintf(a.stdout, "%s was retired already\n", termsafe.String(scope))
				default:
					fmt.Fprintf(a.stdout, "retired %s: it is out of status, top and the alerts; a node that campaigns for it revives it\n", termsafe.String(scope))
				}
				return nil
			})
		}),
	})
	return cmd
}

// operatorVia names the tool and who ran it, for the audit's via field (the
// database records the login role itself).
func operatorVia(tool string) string {
	if u, err := user.Current(); err == nil {
		host, _ := os.Hostname()
		return tool + " by " + u.Username + "@" + host
	}
	return tool
}
