package bench

import "testing"

// TestLeaseTargets: lease mode's bounds come from the nodes' timing — crash p99
// against L + I, the frozen gap's minimum against L − W, the idle load against
// 2 per leader and 1 per follower — and a lock-mode report gets none of them.
func TestLeaseTargets(t *testing.T) {
	args := []string{"--heartbeat-interval", "100ms", "--trust-window", "500ms", "--session-lease", "700ms"}
	rep := &Report{Mode: "lease", Stats: []Stat{
		{Name: crashStatName, P99MS: 801},
		{Name: frozenGapName, MinMS: 199.5},
	}, Load: &Load{Nodes: 3, PerNodePerInterval: 1.02}}
	rep.leaseTargets(Options{NodeArgs: args})
	want := map[string]struct {
		max, min, value float64
		met             bool
	}{
		crashStatName: {max: 800, value: 801, met: false},
		frozenGapName: {min: 200, value: 199.5, met: false},
		"load":        {max: 4.0 / 3, value: 1.02, met: true},
	}
	if len(rep.Targets) != len(want) {
		t.Fatalf("targets %+v", rep.Targets)
	}
	for _, tg := range rep.Targets {
		w, ok := want[tg.Stat]
		if !ok || tg.Max != w.max || tg.Min != w.min || tg.Value != w.value || tg.Met != w.met || tg.Verdict != verdict(w.met) {
			t.Errorf("target %+v, want %+v", tg, w)
		}
	}
	lock := &Report{Mode: "lock", Stats: rep.Stats, Load: rep.Load}
	lock.leaseTargets(Options{NodeArgs: args})
	if len(lock.Targets) != 0 {
		t.Errorf("lock mode got lease targets %+v", lock.Targets)
	}
}
