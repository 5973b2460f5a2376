package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestExporterNodeLifecycle: --node-retention is checked (one line, exit 2),
// and a node restarted under its id shows in pgleader_node_restarts.
func TestExporterNodeLifecycle(t *testing.T) {
	pgtest.Slow(t)
	for _, bad := range []struct{ value, want string }{
		{"1m", "--node-retention must be at least 5m0s"},
		{"-1h", "--node-retention must be at least 5m0s"},
		{"soon", `invalid argument "soon" for "--node-retention"`},
	} {
		r := pgleader(t, nil, "exporter", "--dsn", unreachable, "--node-retention", bad.value)
		line, ok := strings.CutSuffix(r.stderr, "\n")
		if r.code != cli.ExitBadInput || !ok || strings.Contains(line, "\n") || !strings.Contains(line, bad.want) {
			t.Errorf("--node-retention %s: exit %d, stderr %q; want exit %d and one line with %q",
				bad.value, r.code, r.stderr, cli.ExitBadInput, bad.want)
		}
	}

	dsn, c := startNodes(t, "jobs", "crashy")
	addr := freeAddr(t)
	// notify: a logical source's temporary slot outlives a killed exporter for a
	// moment, and the database cannot be dropped while it does.
	startBinary(t, "exporter", "--dsn", dsn, "--listen", addr, "--interval", "200ms", "--node-retention", "2h", "--source", "notify")
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	series := func(restarts int) string {
		return `pgleader_node_restarts{database="` + pc.Database + `",node="crashy"} ` + itoa(restarts) + "\n"
	}
	pgtest.WaitEvery(t, "crashy with 0 restarts in /metrics", 20*time.Second, 100*time.Millisecond, func() bool {
		_, body := httpGet(addr, "/metrics")
		return strings.Contains(body, series(0))
	})
	// The node dies and comes back under its id: another process.
	n := c.Node("crashy")
	if _, err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = n.Wait(20 * time.Second) // killed: its exit is an error
	if !n.Exited() {
		t.Fatal("crashy still runs 20s after SIGKILL")
	}
	if _, err := c.Start("crashy"); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitEvery(t, "crashy with 1 restart in /metrics", 20*time.Second, 100*time.Millisecond, func() bool {
		_, body := httpGet(addr, "/metrics")
		return strings.Contains(body, series(1))
	})
}
