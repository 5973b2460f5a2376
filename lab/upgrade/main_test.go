package upgrade_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/upgrade"
	"github.com/pgleader/pgleader/migrations"
)

var (
	previous string // upgrade.PreviousRelease's pgleader (shipped build, cached)
	current  string // this working tree's pgleader (lab build, -race under -race)
)

// TestMain builds both releases. A previous release that cannot be built fails
// the run, naming the fix: a skipped upgrade test would prove nothing.
func TestMain(m *testing.M) {
	prev, err := upgrade.BuildPrevious()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, cleanup, err := cluster.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	previous, current = prev, bin
	pgtest.Main(m, cleanup)
}

// pgleader runs bin with args and --dsn dsn, and returns its exit code and output.
func pgleader(t *testing.T, bin, dsn string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, "--dsn", dsn)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return 0, string(out)
}

// migrate runs `pgleader migrate` of bin on dsn, as an operator would, and
// returns the schema version it left.
func migrate(t *testing.T, bin, dsn string) int {
	t.Helper()
	if code, out := pgleader(t, bin, dsn, "migrate"); code != 0 {
		t.Fatalf("%s migrate: exit %d:\n%s", release(bin), code, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	v, err := migrations.Version(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if v == 0 {
		t.Fatalf("%s migrate exited 0 but left no pgleader schema", release(bin))
	}
	return v
}

// release names the release of a binary, for messages.
func release(bin string) string {
	if bin == previous {
		return "previous release (" + upgrade.PreviousRelease[:12] + ")"
	}
	return "current release"
}
