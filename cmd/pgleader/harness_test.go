package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// demo and bench start their own throwaway PostgreSQL and node processes; these
// short runs keep both commands working.

func TestDemoHeadlessFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	r := pgleader(t, nil, "demo", "--headless", "--faults", "--duration", "14s", "--seed", "3", "--listen", "off")
	if r.code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"leads billing (epoch 1)", "leads reports (epoch 1)", "FAULT ", "failover ",
		"── summary", "gate overlap        0s", "verdict             SAFE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := pgleader(t, nil, "demo", "--faults"); r.code != 2 || !strings.Contains(r.stderr, "--faults goes with --headless") {
		t.Errorf("--faults without --headless: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := pgleader(t, nil, "demo"); r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("dashboard without a terminal: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestBenchFailoverRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	var rep struct {
		Limit *struct {
			N     int     `json:"n"`
			MinMS float64 `json:"min_ms"`
		} `json:"limit"`
		Stats []struct {
			Name    string  `json:"name"`
			N       int     `json:"n"`
			MinMS   float64 `json:"min_ms"`
			MaxMS   float64 `json:"max_ms"`
			VsLimit *struct {
				P50Ratio float64 `json:"p50_ratio"`
				P99Ratio float64 `json:"p99_ratio"`
			} `json:"vs_limit"`
		} `json:"stats"`
		Targets []struct {
			Verdict string `json:"verdict"`
		} `json:"targets"`
		Gate []struct {
			NsPerOp float64 `json:"ns_per_op"`
		} `json:"gate"`
	}
	r, b := pgleaderJSON(t, &rep, "bench", "failover", "-n", "2", "--scenarios", "crash,graceful,gate")
	if len(rep.Stats) != 3 || len(rep.Gate) != 2 {
		t.Fatalf("report has %d stats and %d gate figures, want 3 and 2:\n%s", len(rep.Stats), len(rep.Gate), b)
	}
	for _, s := range rep.Stats {
		if s.N != 2 || s.MinMS <= 0 || s.MaxMS < s.MinMS {
			t.Errorf("implausible %s: %+v", s.Name, s)
		}
		if failover := s.Name == "crash failover" || s.Name == "graceful handover"; failover != (s.VsLimit != nil) ||
			(s.VsLimit != nil && (s.VsLimit.P50Ratio <= 0 || s.VsLimit.P99Ratio <= 0)) {
			t.Errorf("%s beside the limit: %+v", s.Name, s.VsLimit)
		}
	}
	// The physical limit runs whenever a failover scenario does.
	if rep.Limit == nil || rep.Limit.N != 2 || rep.Limit.MinMS <= 0 || len(rep.Targets) != 1 {
		t.Errorf("limit %+v, targets %+v", rep.Limit, rep.Targets)
	}
	if !strings.Contains(r.stdout, "physical limit") || !strings.Contains(r.stdout, "target crash failover p99 ≤ 2× limit p99") {
		t.Errorf("table lacks the limit:\n%s", r.stdout)
	}
	if r := pgleader(t, nil, "bench", "failover", "--scenarios", "nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown scenario") {
		t.Errorf("bad scenario: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestBenchScaleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	var rep struct {
		Led     int `json:"led"`
		PerNode []struct {
			Connections int `json:"connections"`
		} `json:"per_node"`
		Limit *struct {
			N int `json:"n"`
		} `json:"limit"`
		Takeover *struct {
			N int `json:"n"`
		} `json:"takeover"`
		KilledLed int  `json:"killed_led"`
		AllReLed  bool `json:"all_re_led"`
	}
	_, b := pgleaderJSON(t, &rep, "bench", "scale", "--nodes", "2", "--scopes", "5", "-n", "2", "--idle-window", "500ms")
	if rep.Led != 5 || len(rep.PerNode) != 2 || rep.PerNode[0].Connections <= 0 || rep.Limit == nil || rep.Limit.N != 2 ||
		rep.Takeover == nil || rep.Takeover.N != rep.KilledLed || !rep.AllReLed {
		t.Fatalf("report:\n%s", b)
	}
	if r := pgleader(t, nil, "bench", "scale", "--nodes", "1"); r.code != 2 || !strings.Contains(r.stderr, "--nodes must be ≥ 2") {
		t.Errorf("one node: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestChaosRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	var rep struct {
		Seed    int64 `json:"seed"`
		Results []struct {
			Scenario string `json:"scenario"`
			Faults   int    `json:"faults"`
		} `json:"results"`
	}
	r, _ := pgleaderJSON(t, &rep, "chaos", "--duration", "2s", "--scenario", "resign", "--seed", "3")
	if !strings.Contains(r.stdout, "all 1 scenarios passed (seed 3)") {
		t.Fatalf("chaos stdout lacks the verdict:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if rep.Seed != 3 || len(rep.Results) != 1 || rep.Results[0].Scenario != "resign" || rep.Results[0].Faults == 0 {
		t.Fatalf("report %+v", rep)
	}
	if r := pgleader(t, nil, "chaos", "--scenario", "nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown --scenario") {
		t.Errorf("bad scenario: exit %d, stderr %q", r.code, r.stderr)
	}
}

// pgleaderJSON runs the binary with args and --json FILE, fails t unless it exits
// 0, and decodes FILE into v; it returns the run and FILE's content.
func pgleaderJSON(t *testing.T, v any, args ...string) (result, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.json")
	r := pgleader(t, nil, append(args, "--json", path)...)
	if r.code != 0 {
		t.Fatalf("pgleader %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	return r, b
}
