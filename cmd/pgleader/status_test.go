package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestStatusAndHistory: status and history against real nodes, in every format,
// and the exit codes scripts rely on.
func TestStatusAndHistory(t *testing.T) {
	pgtest.Slow(t)
	dsn, c := startNodes(t, "billing", "n1", "n2")
	var leader string
	pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "json")
		var st struct {
			Verdict  string `json:"verdict"`
			Timeline int64  `json:"timeline"`
			Scopes   []struct {
				Scope   string `json:"scope"`
				Leader  string `json:"leader"`
				Epoch   int64  `json:"epoch"`
				Verdict string `json:"verdict"`
			} `json:"scopes"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Scopes) != 1 {
			return false
		}
		leader = st.Scopes[0].Leader
		return st.Verdict == "OK" && leader != "" && st.Scopes[0].Epoch == 1 && st.Timeline >= 1
	})
	r := pgleader(t, nil, "status", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "✔ OK") || !strings.Contains(r.stdout, leader) {
		t.Fatalf("status table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 ||
		!strings.HasPrefix(lines[1], "billing\tOK\t"+leader+"\t1\t") {
		t.Fatalf("status tsv: exit %d\n%s", r.code, r.stdout)
	}

	// Kill the leader and stop the other node: the scope has no leader, exit 3.
	if _, err := c.Node(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[leader]
	// The other node leads, with no live follower left: DEGRADED (no_follower),
	// exit 5 (led, with alerts), not 3 (no leader).
	pgtest.WaitEvery(t, "the takeover", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
		return strings.Contains(r.stdout, "billing\tDEGRADED\t"+other+"\t2\t") && strings.Contains(r.stdout, "no_follower") && r.code == 5
	})
	if _, err := c.Node(other).Kill(); err != nil {
		t.Fatal(err)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn)
	if r.code != 3 || !strings.Contains(r.stdout, "✖ NO LEADER") {
		t.Fatalf("status without leader: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = pgleader(t, nil, "history", "--dsn", dsn, "--scope", "billing", "-o", "json")
	var terms []struct {
		Epoch   int64  `json:"epoch"`
		Holder  string `json:"holder"`
		EndedBy string `json:"ended_by"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &terms); err != nil || r.code != 0 {
		t.Fatalf("history json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	// A killed holder's term is closed by its successor as "crashed" when the
	// successor found the dead process's guard gone, "lost_connection" when the
	// guard's backend had not exited yet (the reason is observational: a race).
	if len(terms) != 2 {
		t.Fatalf("history: %+v", terms)
	}
	ended := terms[1].EndedBy
	if terms[0].Epoch != 2 || terms[0].Holder != other || terms[1].Holder != leader ||
		(ended != "crashed" && ended != "lost_connection") {
		t.Fatalf("history: %+v", terms)
	}
	r = pgleader(t, nil, "history", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, ended) || !strings.Contains(r.stdout, "GAP BEFORE") {
		t.Fatalf("history table: exit %d\n%s", r.code, r.stdout)
	}
	r = pgleader(t, nil, "history", "--dsn", dsn, "--since", "1h", "-o", "tsv")
	if r.code != 0 || len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 3 {
		t.Fatalf("history tsv --since: exit %d\n%s", r.code, r.stdout)
	}
	// The dashboard's one-frame mode, for scripts and bug reports.
	r = pgleader(t, nil, "top", "--once", "--width", "100", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "✖ NO LEADER billing") || strings.Contains(r.stdout, "\x1b[") {
		t.Fatalf("top --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "top", "--once", "-o", "json", "--dsn", dsn)
	var frame map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &frame); r.code != 0 || err != nil {
		t.Fatalf("top --once -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if r := pgleader(t, nil, "top", "--dsn", dsn); r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("top without a terminal: exit %d, %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{{"status", "-o", "yaml"}, {"history", "--limit", "0"}, {"status", "--interval", "1ms", "--watch"}} {
		if r := pgleader(t, nil, append(bad, "--dsn", dsn)...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, r.code, r.stderr)
		}
	}
}

// TestStatusIdle: a scope whose only candidate stopped cleanly is IDLE: counted
// as such, not listed as not OK, exit 0; retired, it leaves the table and is
// counted in the JSON's retired.
func TestStatusIdle(t *testing.T) {
	pgtest.Slow(t)
	dsn, c := startNodes(t, "parked", "solo")
	pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
		return strings.Contains(r.stdout, "parked\tOK\tsolo\t")
	})
	if _, err := c.Node("solo").Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.Node("solo").Wait(20 * time.Second); err != nil {
		t.Fatalf("solo after SIGTERM: %v", err)
	}
	type doc struct {
		Verdict       string         `json:"verdict"`
		VerdictCounts map[string]int `json:"verdict_counts"`
		Retired       int            `json:"retired"`
		Nodes         []struct {
			Node     string `json:"node"`
			Priority *int   `json:"priority"`
		} `json:"nodes"`
	}
	var st doc
	pgtest.WaitEvery(t, "the scope to be IDLE", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "json")
		st = doc{}
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.VerdictCounts["IDLE"] == 1
	})
	if st.Verdict != "OK" || len(st.Nodes) != 1 || st.Nodes[0].Priority == nil || *st.Nodes[0].Priority != 1 {
		t.Fatalf("status json: %+v", st)
	}
	r := pgleader(t, nil, "status", "--dsn", dsn)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "1 scope: 1 · IDLE\n") || strings.Contains(r.stdout, "not OK") ||
		!strings.Contains(r.stdout, "1 node stopped") {
		t.Fatalf("status table: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}

	if _, err := pgtest.Connect(t, dsn).Exec(context.Background(), "SELECT pgleader.retire_scope('parked', 'TestStatusIdle')"); err != nil {
		t.Fatal(err)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn, "-o", "json")
	st = doc{}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st.Retired != 1 || len(st.VerdictCounts) != 0 {
		t.Fatalf("status json after retiring: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if r := pgleader(t, nil, "status", "--dsn", dsn); r.code != 0 || !strings.HasPrefix(r.stdout, "no scopes in view: 1 scope retired") {
		t.Fatalf("status table after retiring: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestExporterServes: `pgleader exporter` serves metrics of a live scope and
// reports ready.
func TestExporterServes(t *testing.T) {
	pgtest.Slow(t)
	dsn, _ := startNodes(t, "jobs", "only")
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "exporter", "--dsn", dsn, "--listen", addr, "--interval", "200ms")
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphan if the test binary dies
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	get := func(path string) (int, string) { return httpGet(addr, path) }
	// Every series carries the database label: for a lone --dsn, its database name.
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := `database="` + pc.Database + `"`
	pgtest.WaitEvery(t, "the scope's leader in /metrics", 20*time.Second, 100*time.Millisecond, func() bool {
		code, body := get("/metrics")
		return code == 200 && strings.Contains(body, `pgleader_scope_leader{`+db+`,node="only",scope="jobs"} 1`)
	})
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{"pgleader_scope_has_leader{" + db + ",scope=\"jobs\"} 1", "pgleader_collector_up{" + db + "} 1", "pgleader_exporter_scrape_success{" + db + "} 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// SIGTERM: a clean stop, exit 0.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	stopped = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("exporter after SIGTERM: %v", err)
	}
	if r := pgleader(t, nil, "exporter", "--dsn", dsn, "--listen", "256.1.1.1:1"); r.code != 2 || !strings.Contains(r.stderr, "--listen") {
		t.Errorf("bad --listen: exit %d, %q", r.code, r.stderr)
	}
}

// TestSlots: list shows a permanent slot and warns that it retains WAL; drop
// removes it; dropping a missing slot is bad input.
func TestSlots(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	conn := pgtest.Connect(t, dsn)
	if _, err := conn.Exec(context.Background(), "SELECT pg_create_logical_replication_slot('pgl_test_slot', 'pgoutput')"); err != nil {
		t.Fatal(err)
	}
	r := pgleader(t, nil, "slots", "list", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "pgl_test_slot") || !strings.Contains(r.stderr, "inactive permanent slot pgl_test_slot retains") {
		t.Fatalf("slots list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "slots", "drop", "pgl_test_slot", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "dropped") {
		t.Fatalf("slots drop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgl_test_slot'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("slot still there: %d, %v", n, err)
	}
	if r := pgleader(t, nil, "slots", "drop", "pgl_test_slot", "--dsn", dsn); r.code != 2 {
		t.Errorf("dropping a missing slot: exit %d, %q", r.code, r.stderr)
	}
}

// TestResignCommand: `pgleader resign` hands the scope over gracefully; a stale
// --epoch is refused with exit 3.
func TestResignCommand(t *testing.T) {
	dsn, c := startNodes(t, "jobs", "r1", "r2")
	var first string
	pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool {
		first, _ = c.Leader("jobs")
		_, _ = c.Poll()
		return first != ""
	})
	r := pgleader(t, nil, "resign", "jobs", "--epoch", "1", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "asked "+first+" to resign jobs (epoch 1)") {
		t.Fatalf("resign: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pgtest.WaitEvery(t, "the handover", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "history", "--dsn", dsn, "--scope", "jobs", "-o", "tsv")
		return strings.Contains(r.stdout, "\t1\t"+first+"\t") && strings.Contains(r.stdout, "\tresigned\t") &&
			strings.Contains(r.stdout, "jobs\t2\t")
	})
	if r := pgleader(t, nil, "resign", "jobs", "--epoch", "1", "--dsn", dsn); r.code != 3 || !strings.Contains(r.stderr, "epoch 1 is not the open term (current epoch 2)") {
		t.Fatalf("stale epoch: exit %d, %q", r.code, r.stderr)
	}
}

// node forget: refused for a running node, then the stopped node leaves status;
// the stale_node hint names the command, its id quoted for a shell.
func TestNodeForgetCommand(t *testing.T) {
	dsn, c := startNodes(t, "fg", "f1", "f2")
	pgtest.WaitEvery(t, "a leader", 20*time.Second, 100*time.Millisecond, func() bool {
		l, _ := c.Leader("fg")
		_, _ = c.Poll()
		return l != ""
	})
	if r := pgleader(t, nil, "node", "forget", "f2", "--dsn", dsn); r.code != 1 || !strings.Contains(r.stderr, "is running") {
		t.Fatalf("forget a running node: exit %d, %q", r.code, r.stderr)
	}
	if r := pgleader(t, nil, "node", "forget", "f\x1b[2Jx", "--dsn", dsn); r.code != 2 || strings.Contains(r.stderr, "\x1b") {
		t.Fatalf("forget a malformed id: exit %d, %q", r.code, r.stderr)
	}
	if _, err := c.Node("f2").Kill(); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitEvery(t, "f2's session gone", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "node", "forget", "f2", "--dsn", dsn)
		return r.code == 0 && strings.Contains(r.stdout, "forgot node f2")
	})
	if r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "json"); strings.Contains(r.stdout, `"f2"`) {
		t.Fatalf("status still shows the forgotten node:\n%s", r.stdout)
	}
	if r := pgleader(t, nil, "node", "forget", "f2", "--dsn", dsn); r.code != 1 || !strings.Contains(r.stderr, "nothing to forget") {
		t.Fatalf("forget it again: exit %d, %q", r.code, r.stderr)
	}
}
