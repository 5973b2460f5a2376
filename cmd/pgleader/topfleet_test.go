package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopFleetOnce: top --once over the named databases of a config file —
// two led databases whose scope and node names repeat, and one that cannot be
// reached — prints one merged view: the unreachable database as such, the
// others' scopes with their database.
func TestTopFleetOnce(t *testing.T) {
	dsnA, _ := startNodes(t, "jobs", "n1")
	dsnB, _ := startNodes(t, "jobs", "n1")
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`targets:
  - name: billing
    dsn: %q
  - name: orders
    dsn: %q
  - name: down
    dsn: "postgres://nobody@%s/none?connect_timeout=2"
`, dsnA, dsnB, freeAddr(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{dsnA, dsnB} {
		waitFor(t, "a leader", func() bool {
			r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
			return r.code == 0 && strings.Contains(r.stdout, "jobs\tOK\t")
		})
	}

	r := pgleader(t, nil, "top", "--once", "-o", "json", "--config", conf, "--all-targets")
	if r.code != 6 || !strings.Contains(r.stderr, "target down") {
		t.Fatalf("exit %d, want 6 (a database cannot be read), and its line on stderr\n%s%s", r.code, r.stdout, r.stderr)
	}
	var doc struct {
		Snapshot struct {
			Scopes []struct {
				Name     string `json:"scope"`
				Database string `json:"database"`
				Leader   string `json:"leader"`
				Verdict  string `json:"verdict"`
			} `json:"scopes"`
			Databases []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"databases"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	got := map[string]string{}
	for _, d := range doc.Snapshot.Databases {
		got[d.Name] = d.Status
	}
	if got["billing"] != "up" || got["orders"] != "up" || got["down"] != "unreachable" {
		t.Fatalf("databases %v", got)
	}
	led := 0
	for _, sc := range doc.Snapshot.Scopes {
		if sc.Name == "jobs" && sc.Leader == "n1" && sc.Verdict == "OK" && (sc.Database == "billing" || sc.Database == "orders") {
			led++
		}
	}
	if led != 2 {
		t.Fatalf("scopes %+v", doc.Snapshot.Scopes)
	}

	r = pgleader(t, nil, "top", "--once", "--width", "100", "--config", conf, "--all-targets")
	if r.code != 6 || !strings.Contains(r.stdout, "down ✖ UNREACHABLE") || !strings.Contains(r.stdout, "billing 1 ✔") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
