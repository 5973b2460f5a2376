package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestTargets: status, history and the exporter over the named databases of a
// config file — two led databases (one reached through env:VARIABLE) and one
// that cannot be reached — and the one-line errors of a bad file or name.
func TestTargets(t *testing.T) {
	pgtest.Slow(t)
	dsnA, _ := startNodes(t, "jobs", "a1")
	dsnB, _ := startNodes(t, "jobs", "b1")
	closed := freeAddr(t) // a closed loopback port: refused at once
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yaml")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, fmt.Sprintf(`targets:
  - name: billing
    dsn: %q
  - name: orders
    dsn: env:ORDERS_TEST_DSN
  - name: down
    dsn: "postgres://nobody@%s/none?connect_timeout=2"
`, dsnA, closed))
	env := []string{"ORDERS_TEST_DSN=" + dsnB, "XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg")}
	for _, dsn := range []string{dsnA, dsnB} {
		pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool { // exit 0 alone: also before any node registered
			r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
			return r.code == 0 && strings.Contains(r.stdout, "jobs\tOK\t")
		})
	}

	led := time.Now() // both databases are led from here on

	t.Run("StatusAt", func(t *testing.T) {
		time.Sleep(50 * time.Millisecond) // the moment is in the past of every clock here
		at := led.Format(time.RFC3339Nano)
		r := pgleader(t, env, "status", "--config", conf, "--all-targets", "--at", at, "-o", "json")
		if r.code != cli.ExitUnreachable {
			t.Errorf("exit %d, want 6 (a database cannot be read)\n%s%s", r.code, r.stdout, r.stderr)
		}
		var doc struct {
			Targets []struct {
				Target string `json:"target"`
				Error  string `json:"error"`
				Status struct {
					Replay *struct {
						At time.Time `json:"at"`
					} `json:"replay"`
					Scopes []struct {
						Leader string `json:"leader"`
					} `json:"scopes"`
				} `json:"status"`
			} `json:"targets"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		leaders := map[string]string{}
		for _, tg := range doc.Targets {
			if tg.Status.Replay != nil && len(tg.Status.Scopes) == 1 && tg.Status.Replay.At.Equal(led) {
				leaders[tg.Target] = tg.Status.Scopes[0].Leader
			} else if tg.Error != "" {
				leaders[tg.Target] = "error"
			}
		}
		if leaders["billing"] != "a1" || leaders["orders"] != "b1" || leaders["down"] != "error" || len(leaders) != 3 {
			t.Errorf("replayed leaders %v; want billing a1, orders b1, down an error:\n%s", leaders, r.stdout)
		}
		r = pgleader(t, env, "status", "--config", conf, "--all-targets", "--at", at)
		if strings.Count(r.stdout, "REPLAY ") != 2 {
			t.Errorf("want a REPLAY line in each section read:\n%s", r.stdout)
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		r = pgleader(t, env, "status", "--config", conf, "--all-targets", "--at", future)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "is in the future") {
			t.Errorf("future --at over targets: exit %d, %q %q; want exit 2, one line", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("StatusTable", func(t *testing.T) {
		r := pgleader(t, env, "status", "--config", conf, "--all-targets")
		if r.code != cli.ExitUnreachable {
			t.Errorf("exit %d, want 6 (a database cannot be read)\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"── billing ──", "── orders ──", "── down ── ✖ UNREACHABLE (see stderr)", "a1", "b1"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		if !strings.Contains(r.stderr, "pgleader: target down: database unreachable") || strings.Contains(r.stdout, "database unreachable") {
			t.Errorf("the error belongs on stderr, only there:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "check --dsn") {
			t.Errorf("the advice of a target names --dsn:\n%s", r.stderr)
		}
	})
	t.Run("StatusJSON", func(t *testing.T) {
		r := pgleader(t, env, "status", "--config", conf, "--target", "orders", "--target", "billing", "-o", "json")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		var doc struct {
			Verdict string `json:"verdict"`
			Targets []struct {
				Target string `json:"target"`
				Error  string `json:"error"`
				Status struct {
					Scopes []struct {
						Name   string `json:"name"`
						Leader string `json:"leader"`
					} `json:"scopes"`
				} `json:"status"`
			} `json:"targets"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if doc.Verdict != "OK" || len(doc.Targets) != 2 || doc.Targets[0].Target != "orders" || doc.Targets[1].Target != "billing" ||
			len(doc.Targets[0].Status.Scopes) != 1 || doc.Targets[0].Status.Scopes[0].Leader != "b1" ||
			len(doc.Targets[1].Status.Scopes) != 1 || doc.Targets[1].Status.Scopes[0].Leader != "a1" {
			t.Errorf("status -o json over two targets:\n%s", r.stdout)
		}
		r = pgleader(t, env, "status", "--config", conf, "--target", "down", "--target", "billing", "-o", "json")
		if r.code != cli.ExitUnreachable || !strings.Contains(r.stdout, `"error": "pgleader: target down: database unreachable`) ||
			!strings.Contains(r.stdout, `"verdict": "UNREACHABLE"`) || !strings.Contains(r.stderr, "target down") {
			t.Errorf("down target in JSON: exit %d; want 6, the verdict UNREACHABLE (the worst of the databases'), the error on stderr too\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("History", func(t *testing.T) {
		r := pgleader(t, env, "history", "--config", conf, "--all-targets", "-o", "tsv")
		if r.code != cli.ExitUnreachable || !strings.Contains(r.stderr, "pgleader: target down: database unreachable") {
			t.Errorf("exit %d, stderr %q: want 6 and the down target named", r.code, r.stderr)
		}
		rj := pgleader(t, env, "history", "--config", conf, "--all-targets", "-o", "json")
		var docs []map[string]any
		if err := json.Unmarshal([]byte(rj.stdout), &docs); err != nil {
			t.Fatalf("history -o json: %v\n%s", err, rj.stdout)
		}
		var sawErr bool
		for _, d := range docs {
			if d["target"] == "down" && strings.Contains(fmt.Sprint(d["error"]), "database unreachable") {
				sawErr = true
			}
		}
		if rj.code != cli.ExitUnreachable || !sawErr {
			t.Errorf("history -o json: exit %d, want 6 and a {target: down, error} entry:\n%s", rj.code, rj.stdout)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasSuffix(lines[0], "\ttarget\tlast_sign\tsilent\tchild_exit") {
			t.Fatalf("history -o tsv: want a header ending in target and two terms:\n%s", r.stdout)
		}
		got := map[string]string{}
		for _, l := range lines[1:] {
			f := strings.Split(l, "\t")
			got[f[11]] = f[2] // target (after run_exit) → leader
		}
		if got["billing"] != "a1" || got["orders"] != "b1" {
			t.Errorf("terms by target %v:\n%s", got, r.stdout)
		}
	})
	t.Run("Exporter", func(t *testing.T) {
		addr := freeAddr(t)
		// billing and down: the exporter starts although down cannot be reached.
		startBinary(t, "exporter", "--config", conf, "--target", "billing", "--target", "down", "--listen", addr, "--interval", "200ms")
		get := func(path string) (int, string) { return httpGet(addr, path) }
		pgtest.WaitFor(t, "billing's leader in /metrics", 20*time.Second, func() bool {
			code, body := get("/metrics")
			return code == 200 && strings.Contains(body, `pgleader_scope_leader{database="billing",node="a1",scope="jobs"} 1`)
		})
		_, body := get("/metrics")
		for _, want := range []string{`pgleader_collector_up{database="billing"} 1`, `pgleader_collector_up{database="down"} 0`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if code, body := get("/probe?target=down"); code != 200 || !strings.Contains(body, `pgleader_collector_up{database="down"} 0`) || strings.Contains(body, `database="billing"`) {
			t.Errorf("/probe?target=down: %d\n%s", code, body)
		}
		if code, _ := get("/readyz"); code != 200 {
			t.Errorf("/readyz: %d, want 200 while billing is read", code)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		dup := filepath.Join(dir, "dup.yaml")
		write(dup, "targets:\n  - {name: a, dsn: x}\n  - {name: a, dsn: y}\n")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"status", "--config", dup, "--all-targets"}, "config " + dup + ":3: target \"a\" is named twice (first at line 2)"},
			{[]string{"history", "--config", conf, "--target", "nope"}, "--target nope: no such target in " + conf + " (it names billing, orders, down)"},
			{[]string{"top", "--once", "--config", conf, "--target", "billing", "--dsn", dsnA}, "--dsn and --target/--all-targets exclude each other"},
			{[]string{"exporter", "--config", filepath.Join(dir, "none.yaml"), "--all-targets"}, "--config " + filepath.Join(dir, "none.yaml") + ": no such file"},
			{[]string{"status", "--all-targets"}, "no config file at " + filepath.Join(dir, "xdg", "pgleader", "config.yaml")},
			{[]string{"status", "--config", conf}, "say which of its databases: --target NAME (repeatable) or --all-targets"},
		} {
			r := pgleader(t, env, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, r.code, r.stdout, r.stderr, c.want)
			}
		}
		r := pgleader(t, nil, "status", "--config", conf, "--target", "orders") // ORDERS_TEST_DSN not set
		if r.code != 2 || !strings.Contains(r.stderr, conf+":4: target orders: the environment variable ORDERS_TEST_DSN (its dsn) is not set") {
			t.Errorf("unset variable: exit %d %q", r.code, r.stderr)
		}
	})
}

// freeAddr returns a loopback address nothing listens on (for the moment).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// httpGet GETs path of the server at addr: the status and body, or 0 and the
// error.
func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
