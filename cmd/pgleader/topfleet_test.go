package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestTopFleetOnce: top --once over the named databases of a config file —
// two led databases whose scope and node names repeat, and one that cannot be
// reached — prints one merged view: the unreachable database as such, the
// others' scopes with their database.
func TestTopFleetOnce(t *testing.T) {
	pgtest.Slow(t)
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
		pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool {
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

	// --at over the fleet: each database's history, side by side; the one
	// that cannot be read is unreachable, said on stderr, exit 6.
	var at time.Time
	if err := pgtest.Connect(t, dsnA).QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&at); err != nil {
		t.Fatal(err)
	}
	r = pgleader(t, nil, "top", "--once", "-o", "json", "--config", conf, "--all-targets", "--at", at.UTC().Format(time.RFC3339Nano))
	if r.code != 6 || !strings.Contains(r.stderr, "target down") {
		t.Fatalf("top --at over the fleet: exit %d, want 6 and the unreadable database on stderr\n%s%s", r.code, r.stdout, r.stderr)
	}
	var replayed struct {
		Snapshot struct {
			Scopes []struct {
				Name     string `json:"scope"`
				Database string `json:"database"`
				Leader   string `json:"leader"`
			} `json:"scopes"`
			Databases []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"databases"`
			Replay *struct {
				At time.Time `json:"at"`
			} `json:"replay"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &replayed); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	rs := replayed.Snapshot
	if rs.Replay == nil || !rs.Replay.At.Equal(at) || len(rs.Databases) != 3 || rs.Databases[2].Status != "unreachable" || len(rs.Scopes) != 2 ||
		rs.Scopes[0].Database == rs.Scopes[1].Database || rs.Scopes[0].Leader != "n1" || rs.Scopes[1].Leader != "n1" {
		t.Fatalf("top --at over the fleet: %+v", rs)
	}
	r = pgleader(t, nil, "top", "--once", "--width", "100", "--config", conf, "--all-targets", "--at", at.UTC().Format(time.RFC3339Nano))
	if !strings.Contains(r.stdout, "REPLAY") || lineWith(r.stdout, `^\s+billing\s+jobs\s+✔ OK\s+n1`) == "" || lineWith(r.stdout, `^\s+orders\s+jobs\s+✔ OK\s+n1`) == "" {
		t.Fatalf("top --at --once over the fleet:\n%s", r.stdout)
	}
}

// lineWith is the first line of s that matches the regular expression re.
func lineWith(s, re string) string {
	return regexp.MustCompile(`(?m)` + re + `.*$`).FindString(s)
}
