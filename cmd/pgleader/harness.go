//go:build pgleader_lab

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgserver"
)

// harness is what the commands that run nodes of their own (bench, chaos) share:
// this binary for the nodes, a migrated database, a scratch directory.
type harness struct {
	bin string
	dsn string
	srv *pgserver.Server // the throwaway server, when no database was named
	dir string
}

// withHarness prepares a harness and runs fn on it, with a context that SIGINT
// and SIGTERM cancel; then it removes what it created (keep: not the scratch
// directory).
func (a *app) withHarness(cmd *cobra.Command, name string, keep bool, fn func(ctx context.Context, h *harness) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &harness{dsn: a.harnessDSN()}
	if h.dsn == "" {
		fmt.Fprintf(a.stderr, "%s: starting a throwaway PostgreSQL\n", name)
	}
	var closeDB func()
	var err error
	h.dsn, h.srv, closeDB, err = cluster.Database(ctx, h.dsn, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	if h.bin, err = os.Executable(); err != nil {
		return err
	}
	if h.dir, err = os.MkdirTemp("", "pgleader-"+name+"-"); err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(a.stderr, "%s: events and logs kept in %s\n", name, h.dir)
	} else {
		defer os.RemoveAll(h.dir)
	}
	return fn(ctx, h)
}

// writeJSON writes v as indented JSON to path (nothing when path is empty).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
