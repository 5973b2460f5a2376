package main

import (
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
)

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "pgleader",
		Short: "Leader election for Go services through the PostgreSQL they already run",
		Long: `pgleader elects exactly one leader per scope among the replicas of a service,
through the PostgreSQL the service already runs: a session advisory lock on a
dedicated connection, an epoch fencing token the database itself enforces,
heartbeats and a trust window that close a stale leader's gate before a successor
can take over.

Every command connects to the database given by --dsn, else the DATABASE_URL
environment variable, else the standard PG* variables (PGHOST, PGPORT, PGUSER,
PGDATABASE, PGPASSWORD, PGSSLMODE, …). Keep the password out of --dsn: other
users of the host can read a process's arguments (ps). Put it in ~/.pgpass (or
the file PGPASSFILE names) or PGPASSWORD, or pass the whole connection string in
DATABASE_URL; a --dsn that holds a password works, with a warning.

Exit codes: 0 success; 1 runtime failure; 2 bad input (flags, connection string,
unreachable server, PostgreSQL older than 14, missing schema, unsafe timing).`,
		Example: `  pgleader migrate --dsn postgres://app@db:5432/app
  pgleader node --dsn postgres://app@db:5432/app --scope billing`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			log, err := cli.NewLogger(a.stderr, a.logFormat, a.logLevel)
			if err != nil {
				return err
			}
			a.log = log
			return nil
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.CompletionOptions.DisableDefaultCmd = true

	pf := root.PersistentFlags()
	pf.StringVar(&a.dsn, "dsn", "", "PostgreSQL connection string (`DSN`), URL (postgres://user@host:5432/db) or key=value form, without the password (ps shows it to every user: use ~/.pgpass, PGPASSFILE, PGPASSWORD or DATABASE_URL) (default: $DATABASE_URL, else the PG* variables)")
	pf.StringVar(&a.logFormat, "log-format", "text", "log `FORMAT` on stderr: text or json")
	pf.StringVar(&a.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")

	root.AddCommand(a.migrateCommand(), a.nodeCommand(), a.statusCommand(), a.historyCommand(),
		a.runCommand(), a.isLeaderCommand(), a.resignCommand(), a.handoverCommand(), a.scopeCommand(), a.topCommand(), a.exporterCommand(), a.slotsCommand(), a.benchCommand(), a.demoCommand(), a.chaosCommand(), a.reapCommand(), a.versionCommand())
	root.AddCommand(a.labCommands()...)
	root.AddCommand(a.docsCommands()...)
	a.onlyOnLinux(root)
	return root
}
