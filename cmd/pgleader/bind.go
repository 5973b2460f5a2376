package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/operator"
)

// bindingCommands are `pgleader scope bind|unbind|bindings|key`: which logins may
// campaign for a scope, and its lock key (schema version 12).
func (a *app) bindingCommands() []*cobra.Command {
	var roles []string
	var prefix, derived bool
	var output string
	bind := &cobra.Command{
		Use:   "bind SCOPE --role ROLE [--role ROLE…]",
		Short: "Let only the logins of these roles campaign for a scope (or, with --prefix, every scope under a prefix)",
		Long: `bind records that only members of the given roles may campaign for SCOPE
(pgleader.bind_scope): the database refuses, with SQLSTATE PLF10 naming the scope and
the login, every other login's registration, claim and failback of it, in lock and
lease mode. With --prefix, SCOPE is a name prefix and the binding covers every scope
that starts with it; a scope's own binding wins over a prefix's, a longer prefix over
a shorter one. Only the schema owner binds (run it as the migrating role); audited
(scope_bound). It lists the running nodes the binding now refuses: restart them
without the scope, under a login of one of the roles.`,
		Example: `  pgleader scope bind billing --role billing_svc
  pgleader scope bind --prefix billing/ --role billing_svc --role billing_batch`,
		Args: cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			if len(roles) == 0 {
				return cli.BadInput("bind %q: name at least one --role (pgleader scope unbind removes a binding)", args[0])
			}
			return a.bind(cmd, args[0], prefix, roles)
		}),
	}
	bind.Flags().StringArrayVar(&roles, "role", nil, "a `ROLE` whose member logins may campaign for the scope (repeatable)")
	bind.Flags().BoolVar(&prefix, "prefix", false, "SCOPE is a name prefix: bind every scope that starts with it")

	unbind := &cobra.Command{
		Use:     "unbind SCOPE",
		Short:   "Remove a scope's (or, with --prefix, a prefix's) binding: any node login may campaign for it again",
		Example: `  pgleader scope unbind billing`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			return a.bind(cmd, args[0], prefix, nil)
		}),
	}
	unbind.Flags().BoolVar(&prefix, "prefix", false, "SCOPE is a name prefix")

	list := &cobra.Command{
		Use:   "bindings",
		Short: "List the scope bindings and the scopes whose lock key is not the derived one",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(output); err != nil {
				return err
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				op, err := newOperator(t, nil, a.log)
				if err != nil {
					return err
				}
				bs, ks, err := op.Bindings(ctx)
				if err != nil {
					return err
				}
				return writeBindings(a, bs, ks, output)
			})
		}),
	}
	list.Flags().StringVarP(&output, "output", "o", cli.FormatTable, "output `FORMAT`: table, json or tsv")

	key := &cobra.Command{
		Use:   "key SCOPE [KEY]",
		Short: "Record the advisory-lock key of a scope whose nodes use another key than the derived one",
		Long: `key records KEY as SCOPE's advisory-lock key (pgleader.set_lock_key): the
database refuses a claim under any key but the derived one (the first 8 bytes of
sha256(SCOPE), pgleader.lock_key) or the one recorded here, so that a node cannot
plant a row under a key of its choice. --derived goes back to the derived key.
Refused while a session holds the scope under its current key (stop its nodes
first). Needs pgleader_operator or the owner; audited (lock_key_set).`,
		Example: `  pgleader scope key legacy-cron 4242
  pgleader scope key legacy-cron --derived`,
		Args: cobra.RangeArgs(1, 2),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			scope := args[0]
			if err := checkScopes([]string{scope}); err != nil {
				return err
			}
			var k *int64
			switch {
			case len(args) == 2 && derived:
				return cli.BadInput("key %q: give KEY or --derived, not both", scope)
			case len(args) == 2:
				v, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil {
					return cli.BadInput("key %q: KEY %q is not a 64-bit signed integer", scope, args[1])
				}
				k = &v
			case !derived:
				return cli.BadInput("key %q: give the KEY its nodes use, or --derived", scope)
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				op, err := newOperator(t, nil, a.log)
				if err != nil {
					return err
				}
				got, err := op.SetLockKey(ctx, scope, k)
				if errors.Is(err, operator.ErrBindingRefused) {
					return cli.BadInput("%v", err)
				} else if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s now uses lock key %d\n", termsafe.String(scope), got)
				return nil
			})
		}),
	}
	key.Flags().BoolVar(&derived, "derived", false, "go back to the derived key")
	return []*cobra.Command{bind, unbind, list, key}
}

// bind runs `scope bind` (roles) or `scope unbind` (no roles).
func (a *app) bind(cmd *cobra.Command, name string, prefix bool, roles []string) error {
	if !prefix {
		if err := checkScopes([]string{name}); err != nil {
			return err
		}
	} else if name == "" || termsafe.String(name) != name {
		return cli.BadInput("--prefix %q: a prefix must be non-empty printable text", name)
	}
	for _, r := range roles {
		if r == "" || termsafe.String(r) != r {
			return cli.BadInput("--role %q: a role name must be non-empty printable text", r)
		}
	}
	return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
		op, err := newOperator(t, nil, a.log)
		if err != nil {
			return err
		}
		conflicts, err := op.Bind(ctx, name, prefix, roles)
		if errors.Is(err, operator.ErrBindingRefused) {
			return cli.BadInput("%v", err)
		} else if err != nil {
			return err
		}
		what := termsafe.String(name)
		if prefix {
			what = "every scope under " + what
		}
		if len(roles) == 0 {
			fmt.Fprintf(a.stdout, "unbound %s: any node login may campaign for it\n", what)
			return nil
		}
		fmt.Fprintf(a.stdout, "bound %s to %s: only their logins may campaign for it\n", what, termsafe.String(strings.Join(roles, ", ")))
		for _, x := range conflicts {
			fmt.Fprintf(a.stdout, "refused from now on: node %s (login %s) campaigns for %s: restart it without the scope, or under a login of those roles\n",
				termsafe.String(x.NodeID), termsafe.String(x.LoginRole), termsafe.String(x.Scope))
		}
		return nil
	})
}

// bindingsJSON is `pgleader scope bindings -o json`: the bindings, then the
// lock keys that are not the derived ones (empty lists, never null).
type bindingsJSON struct {
	Bindings []operator.Binding     `json:"bindings"`
	Keys     []operator.KeyOverride `json:"lock_keys"`
}

// writeBindings prints `scope bindings`.
func writeBindings(a *app, bs []operator.Binding, ks []operator.KeyOverride, format string) error {
	w := a.stdout
	switch format {
	case cli.FormatJSON:
		return cli.WriteJSON(w, bindingsJSON{Bindings: orEmpty(bs), Keys: orEmpty(ks)})
	case cli.FormatTSV:
		fmt.Fprintln(w, "kind\tname\troles_or_key\tby")
		for _, b := range bs {
			kind := "scope"
			if b.Prefix {
				kind = "prefix"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", kind, termsafe.String(b.Name), termsafe.String(strings.Join(b.Roles, ",")), termsafe.String(b.By))
		}
		for _, k := range ks {
			fmt.Fprintf(w, "lock_key\t%s\t%d\t%s\n", termsafe.String(k.Scope), k.LockKey, termsafe.String(k.By))
		}
		return nil
	}
	if len(bs) == 0 {
		fmt.Fprintln(w, "no bindings: every node role may campaign for every scope (pgleader scope bind SCOPE --role ROLE)")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "BOUND\tROLES\tBY")
		for _, b := range bs {
			name := termsafe.String(b.Name)
			if b.Prefix {
				name += "…  (prefix)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", name, termsafe.String(strings.Join(b.Roles, ", ")), termsafe.String(b.By))
		}
		_ = tw.Flush()
	}
	if len(ks) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCOPE\tLOCK KEY (not derived)\tSET BY")
		for _, k := range ks {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", termsafe.String(k.Scope), k.LockKey, termsafe.String(k.By))
		}
		_ = tw.Flush()
	}
	return nil
}
