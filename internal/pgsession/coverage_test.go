package pgsession_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// connectCall is a call that opens a connection or a pool.
var connectCall = regexp.MustCompile(`\b(?:pgx\.Connect|pgx\.ConnectConfig|pgconn\.Connect|pgconn\.ConnectConfig|pgxpool\.New|pgxpool\.NewWithConfig|stdlib\.OpenDB|sql\.Open)\(`)

// reviewed lists, per file outside tests, how many connections it opens and why
// their sessions are safe. A new connection changes a count and fails
// TestEveryConnectionReviewed: open it through pgsession (Connect, Apply) and
// update the count, or say here why it needs neither.
var reviewed = map[string]struct {
	n   int
	why string
}{
	"internal/pgsession/pgsession.go": {2, "Connect itself"},
	"election/pooler.go":              {2, "dial: connConfig applies pgsession.Apply; the pooler fallback sets the path on the session and checkSessionPath verifies it"},
	"internal/pgdial/pgdial.go":       {2, "Config applies pgsession.Apply; pooled connections set it per transaction (the collector's readSettings) or run qualified statements (operator actions)"},
	"collector/logical/slots.go":      {2, "Available applies pgsession.Apply to both connections"},
	"collector/logical/stream.go":     {1, "Open applies pgsession.Apply"},
	"workload/workload.go":            {1, "NewPool applies pgsession.Apply (direct); pooled: pgleader.fence and an INSERT into pgleader.demo_actions"},
	"migrations/migrate/migrate.go":   {1, "Up applies pgsession.ApplyMigration"},
	// The application's own pools: what they run is the application's.
	"examples/scheduler/main.go":   {1, "an application's pool"},
	"examples/service/main.go":     {1, "an application's pool"},
	"examples/submissions/main.go": {1, "an application's pool"},
	// The lab's harness, on the throwaway servers it starts itself.
	"lab/bench/collector.go":         {2, "bench harness"},
	"lab/bench/dashboard.go":         {1, "bench harness"},
	"lab/bench/failover.go":          {4, "bench harness"},
	"lab/bench/limit.go":             {3, "bench harness"},
	"lab/bench/run.go":               {1, "bench harness"},
	"lab/bench/scale.go":             {1, "bench harness"},
	"lab/chaos/chaos.go":             {2, "chaos harness"},
	"lab/chaos/flood.go":             {1, "chaos harness: the NOTIFY flood of a CONNECT-only role, on a database it set up"},
	"lab/conformance/conformance.go": {3, "conformance harness: its own reads and faults, on the database it was given"},
	"lab/chaos/writer.go":            {1, "the supervised chaos child: Writer applies pgsession.Apply"},
	"lab/pgserver/server.go":         {2, "the server's own start-up and admin"},
	"lab/pgserver/standby.go":        {2, "the server's own start-up and admin"},
	// Tests' own sessions, on the throwaway servers they start.
	"lab/pgtest/testing.go": {2, "test helper (Connect), for a test's own statements; the admin session that drops a test database"},
}

// TestEveryConnectionReviewed: every connection the module opens outside tests
// is in reviewed, with its count.
func TestEveryConnectionReviewed(t *testing.T) {
	root := filepath.Join("..", "..")
	got := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := len(connectCall.FindAll(b, -1)); n > 0 {
			rel, _ := filepath.Rel(root, path)
			got[filepath.ToSlash(rel)] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, r := range reviewed {
		if !strings.Contains(r.why, "pgsession") || f == "internal/pgsession/pgsession.go" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err == nil && !strings.Contains(string(b), "pgsession.") {
			t.Errorf("%s: reviewed as %q, but it does not use pgsession", f, r.why)
		}
	}
	for f, n := range got {
		r, ok := reviewed[f]
		switch {
		case !ok:
			t.Errorf("%s opens %d connection(s) not reviewed: open them through pgsession (Connect, Apply) and add the file to reviewed", f, n)
		case r.n != n:
			t.Errorf("%s opens %d connection(s), %d reviewed (%s): check the new ones use pgsession, then update the count", f, n, r.n, r.why)
		}
	}
	for f := range reviewed {
		if _, ok := got[f]; !ok {
			t.Errorf("%s is reviewed but opens no connection: drop it from reviewed", f)
		}
	}
}
