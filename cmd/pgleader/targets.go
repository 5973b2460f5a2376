package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
)

// targetFlags are --config, --target and --all-targets: the named databases of
// the config file, for the commands that watch (status, history, top, exporter).
type targetFlags struct {
	config string
	names  []string
	all    bool
}

// targetsHelp is the paragraph of the watching commands' help on named targets.
const targetsHelp = `--target NAME (repeatable) and --all-targets read the databases named in the
config file (--config, default $XDG_CONFIG_HOME/pgleader/config.yaml, else
~/.config/pgleader/config.yaml):

  targets:
    - name: billing
      dsn: postgres://ops@billing-db:5432/billing?sslmode=require
    - name: orders
      dsn: env:ORDERS_DSN        # the connection string in $ORDERS_DSN
    - name: search
      dsn: host=search-db user=ops dbname=search
      passfile: /etc/pgleader/search.pgpass

Keep passwords out of the file: ~/.pgpass, PGPASSFILE, a passfile: per target,
or dsn: env:VARIABLE. --dsn alone works as before, and excludes --target.`

func (f *targetFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config `FILE` naming the targets (default $XDG_CONFIG_HOME/pgleader/config.yaml)")
	fl.StringArrayVar(&f.names, "target", nil, "database `NAME` of the config file; repeat for several")
	fl.BoolVar(&f.all, "all-targets", false, "every database of the config file")
}

// named reports whether the databases come from the config file.
func (f *targetFlags) named() bool { return len(f.names) > 0 || f.all }

// targets resolves the databases of this invocation: the config file's, by
// name, with --target or --all-targets; else the lone database of --dsn (or
// DATABASE_URL, or PG*), named after its database name. Nothing is connected.
func (a *app) targets(f *targetFlags) ([]cli.NamedTarget, error) {
	if !f.named() {
		if f.config != "" {
			return nil, cli.BadInput("--config %s: say which of its databases: --target NAME (repeatable) or --all-targets", f.config)
		}
		t, err := a.resolve()
		if err != nil {
			return nil, err
		}
		name := t.Config.Database
		if name == "" {
			name = "postgres"
		}
		return []cli.NamedTarget{{Name: name, Target: t}}, nil
	}
	if a.dsn != "" {
		return nil, cli.BadInput("--dsn and --target/--all-targets exclude each other: name the database in the config file, or give --dsn alone")
	}
	if len(f.names) > 0 && f.all {
		return nil, cli.BadInput("--target and --all-targets exclude each other")
	}
	path, explicit := f.config, f.config != ""
	if !explicit {
		path = cli.DefaultConfigPath()
	}
	cfg, err := cli.LoadConfig(path)
	if errors.Is(err, cli.ErrNoConfig) {
		if explicit {
			return nil, cli.BadInput("--config %s: no such file", path)
		}
		return nil, cli.BadInput("--target/--all-targets: no config file at %s; create it (targets: [{name: NAME, dsn: DSN}]) or give --config FILE", path)
	}
	if err != nil {
		return nil, err
	}
	ts, err := cfg.Resolve(f.names)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		for _, w := range t.Warnings {
			a.warn(w)
		}
		if t.Config.Password != "" {
			a.secrets = append(a.secrets, t.Config.Password)
		}
	}
	return ts, nil
}

// targetTimeout bounds the connection check and read of one database among
// several, so that one slow database does not hold up the report of the others.
const targetTimeout = 10 * time.Second

// checkTargets checks every target as checkedTarget does, in parallel, each
// within targetTimeout; errs[i] is target i's error (nil: usable).
func checkTargets(ctx context.Context, ts []cli.NamedTarget) []error {
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, targetTimeout)
			defer cancel()
			errs[i] = dbcheck.Database(cctx, t.Config, migrations.Latest)
		})
	}
	wg.Wait()
	return errs
}
