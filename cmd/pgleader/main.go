// Command pgleader is the command line of pgleader: leader election for the
// replicas of a service through the PostgreSQL it already runs.
//
// This package only wires cobra flags to the packages that do the work (election,
// migrations, workload, internal/eventlog); the conventions every command
// shares — where the DSN comes from, error lines and exit codes, logging — live in
// cmd/pgleader/internal/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
)

func main() {
	if code, ok := runGuard(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// app is the state the commands of one invocation share.
type app struct {
	stdout, stderr io.Writer

	dsn       string
	logFormat string
	logLevel  string
	log       *slog.Logger

	target  cli.Target      // set by resolve
	secrets []string        // the passwords of the config file's targets in use (never printed)
	started bool            // a command's RunE began: errors before that are usage errors
	warned  map[string]bool // the warnings printed: each once
}

// run executes the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that, when cancelled, stops a long-running
// command (node, exporter) as SIGTERM does.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return cli.ExitOK
	}
	if !a.started {
		err = cli.BadInput("%v; see `%s --help`", err, cmd.CommandPath())
	}
	var st *cli.StatusError
	if errors.As(err, &st) && st.Msg == "" {
		return st.Code
	}
	secrets := a.secrets
	if a.target.Config != nil {
		secrets = append(secrets, a.target.Config.Password)
	}
	fmt.Fprintln(stderr, cli.Message(err, secrets...))
	return cli.ExitCode(err)
}

// runE marks the start of a command's own work (see app.started).
func (a *app) runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		return fn(cmd, args)
	}
}

// resolve resolves the database of this invocation (cli.ResolveDSN).
func (a *app) resolve() (cli.Target, error) {
	a.warn(cli.PasswordWarning("--dsn", a.dsn))
	t, err := cli.ResolveDSN(a.dsn)
	if err != nil {
		return cli.Target{}, err
	}
	a.warn(cli.PassfileWarning(t.DSN))
	a.target = t
	return t, nil
}

// warn prints a one-line warning on stderr, once per run; an empty one is
// none.
func (a *app) warn(w string) {
	if w == "" || a.warned[w] {
		return
	}
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	a.warned[w] = true
	fmt.Fprintln(a.stderr, w)
}
