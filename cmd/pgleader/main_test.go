package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// binary is the pgleader executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := cluster.Build(raceEnabled) // the engine's goroutines run in the child
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	pgtest.Main(m, cleanup)
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// cleanEnv is the environment of the child without any database setting of the
// test's own environment, plus extra. A race-enabled child skips the race
// runtime's one-second pause at a successful exit.
func cleanEnv(extra ...string) []string {
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startNodes starts a node process of the binary for each id on a fresh migrated
// database, every one campaigning for scope; they stop when the test ends.
func startNodes(t *testing.T, scope string, ids ...string) (dsn string, c *cluster.Cluster) {
	t.Helper()
	dsn = pgtest.MigratedDSN(t)
	c = cluster.New(cluster.Options{Bin: binary, DSN: dsn, Dir: t.TempDir(), Scopes: []string{scope},
		NodeArgs: []string{"--log-level", "warn"}})
	t.Cleanup(c.Close)
	for _, id := range ids {
		if _, err := c.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, c
}

// pgleader runs the binary to completion (at most a minute) with args.
func pgleader(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running pgleader %q: %v", args, err)
	}
	return r
}
