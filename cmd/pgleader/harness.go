package main

import (
	"context"
	"fmt"
	"os"

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

// harnessDSN is the database a harness command was pointed at: --dsn, else
// DATABASE_URL; empty means "start a throwaway PostgreSQL". The PG* variables are
// deliberately not used here: running faults against a database needs an explicit
// choice.
func (a *app) harnessDSN() string {
	if a.dsn != "" {
		return a.dsn
	}
	return os.Getenv("DATABASE_URL")
}

// newHarness prepares a harness; close removes what it created (keep: not the
// scratch directory).
func (a *app) newHarness(ctx context.Context, name string, keep bool) (*harness, func(), error) {
	h := &harness{dsn: a.harnessDSN()}
	if h.dsn == "" {
		fmt.Fprintf(a.stderr, "%s: starting a throwaway PostgreSQL\n", name)
	}
	var closeDB func()
	var err error
	h.dsn, h.srv, closeDB, err = cluster.Database(ctx, h.dsn, nil)
	if err != nil {
		return nil, nil, err
	}
	if h.bin, err = os.Executable(); err != nil {
		closeDB()
		return nil, nil, err
	}
	if h.dir, err = os.MkdirTemp("", "pgleader-"+name+"-"); err != nil {
		closeDB()
		return nil, nil, err
	}
	if keep {
		fmt.Fprintf(a.stderr, "%s: events and logs kept in %s\n", name, h.dir)
	}
	return h, func() {
		if !keep {
			os.RemoveAll(h.dir)
		}
		closeDB()
	}, nil
}
