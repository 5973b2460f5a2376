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
	out := filepath.Join(t.TempDir(), "bench.json")
	r := pgleader(t, nil, "bench", "failover", "-n", "2", "--scenarios", "crash,graceful,gate", "--json", out)
	if r.code != 0 {
		t.Fatalf("bench exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Stats []struct {
			Name  string  `json:"name"`
			N     int     `json:"n"`
			MinMS float64 `json:"min_ms"`
			MaxMS float64 `json:"max_ms"`
		} `json:"stats"`
		Gate []struct {
			NsPerOp float64 `json:"ns_per_op"`
		} `json:"gate"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stats) != 3 || len(rep.Gate) != 2 {
		t.Fatalf("report has %d stats and %d gate figures, want 3 and 2:\n%s", len(rep.Stats), len(rep.Gate), b)
	}
	for _, s := range rep.Stats {
		if s.N != 2 || s.MinMS <= 0 || s.MaxMS < s.MinMS {
			t.Errorf("implausible %s: %+v", s.Name, s)
		}
	}
	if r := pgleader(t, nil, "bench", "failover", "--scenarios", "nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown scenario") {
		t.Errorf("bad scenario: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestChaosRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chaos.json")
	r := pgleader(t, nil, "chaos", "--duration", "2s", "--scenario", "resign", "--seed", "3", "--json", out)
	if r.code != 0 || !strings.Contains(r.stdout, "all 1 scenarios passed (seed 3)") {
		t.Fatalf("chaos exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Seed    int64 `json:"seed"`
		Results []struct {
			Scenario string `json:"scenario"`
			Faults   int    `json:"faults"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Seed != 3 || len(rep.Results) != 1 || rep.Results[0].Scenario != "resign" || rep.Results[0].Faults == 0 {
		t.Fatalf("report %+v", rep)
	}
	if r := pgleader(t, nil, "chaos", "--scenario", "nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown --scenario") {
		t.Errorf("bad scenario: exit %d, stderr %q", r.code, r.stderr)
	}
}
