// Package pythonnative tests the python-native example: pgleader_native.py, a
// node written in Python from docs/protocol.md alone, held to the protocol by
// the conformance kit (lab/conformance) beside pgleader node processes, against
// a real PostgreSQL, with Debian's python3 and psycopg2.
package pythonnative

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/pgrun"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/conformance"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

const python = "/usr/bin/python3" // Debian's, with python3-psycopg2

var pgleader string

func TestMain(m *testing.M) {
	bin, cleanup, err := cluster.Build(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pgleader = bin
	pgtest.Main(m, cleanup)
}

// needPython skips the test when Debian's python3 or its psycopg2 is missing
// (fails it in CI), and returns the client's path.
func needPython(t *testing.T) string {
	t.Helper()
	pgrun.Python(t)
	client, err := filepath.Abs("pgleader_native.py")
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// template is the client's command line for the kit, with the kit's timing
// (the reference nodes') and a fenced write every 20 ms.
func template(t *testing.T, client, extra string) conformance.Template {
	tmpl, err := conformance.ParseTemplate(python + " " + client +
		" --id {id} --scope {scope} --dsn {dsn} --events {events} --work-interval 20ms" +
		" --heartbeat-interval 100ms --heartbeat-timeout 150ms --trust-window 500ms --session-lease 700ms --drain-timeout 1s " + extra)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// server is a throwaway PostgreSQL the kit may restart, migrated.
func server(t *testing.T) conformance.Options {
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "native"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("native")
	cfg, _ := pgx.ParseConfig(dsn)
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	return conformance.Options{Bin: pgleader, DSN: dsn, Server: srv, Dir: t.TempDir(), Seed: 39, Rounds: 1}
}

func check(t *testing.T, o conformance.Options) {
	t.Helper()
	var progress strings.Builder
	o.Progress = &progress
	rep, err := conformance.Run(context.Background(), o)
	var out strings.Builder
	conformance.WriteReport(&out, rep)
	if err != nil || !rep.OK() {
		t.Fatalf("run: %v\n%s\n%s", err, progress.String(), out.String())
	}
	t.Logf("\n%s", out.String())
}

// TestConformance runs the kit against the client: every fault once, then,
// as a minimal client without the listen session and the ring watch
// (docs/protocol.md §16: what a client may skip), the faults where those
// matter: it stays safe and takes over in both directions, only later.
func TestConformance(t *testing.T) {
	pgtest.Slow(t)
	client := needPython(t)
	o := server(t)
	t.Run("Full", func(t *testing.T) {
		o := o
		o.Node = template(t, client, "")
		check(t, o)
	})
	t.Run("Minimal", func(t *testing.T) {
		o := o
		o.Node, o.Seed, o.Dir = template(t, client, "--no-listen --no-ring"), o.Seed+1, t.TempDir()
		o.Faults = []string{"sigterm", "handover-to", "crash-to-foreign"}
		check(t, o)
	})
}

// TestBadInput: one line naming the problem and the fix, exit 2, before
// anything starts.
func TestBadInput(t *testing.T) {
	pgtest.Slow(t)
	client := needPython(t)
	dsn := pgtest.MigratedDSN(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--id", "n1"}, "--scope"},
		{[]string{"--id", "n1", "--scope", "s", "--trust-window", "300ms"}, "must be shorter than the trust window"},
		{[]string{"--id", "n1", "--scope", "s", "--session-lease", "1.55s"}, "must exceed the trust window"},
		{[]string{"--id", "n1", "--scope", "s", "--heartbeat-interval", "fast"}, "is not a duration"},
		{[]string{"--id", "n1", "--scope", "s", "--events", "/nonexistent/events.jsonl"}, "pass a writable file path"},
		{[]string{"--id", "n1", "--scope", "s", "--frobnicate"}, "unrecognized arguments"},
	} {
		cmd := exec.Command(python, append([]string{client, "--dsn", dsn}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if cmd.ProcessState.ExitCode() != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.says) {
			t.Errorf("%v: exit %d (%v), output %q; want exit 2 and one line saying %q", tc.args, cmd.ProcessState.ExitCode(), err, out, tc.says)
		}
	}
}
