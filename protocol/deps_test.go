package protocol_test

import (
	osexec "os/exec"
	"strings"
	"testing"
)

// TestDependencies: the vocabulary is a leaf (it imports nothing of this module),
// and the watchers (collector, tui, exporter) speak it without linking the engine.
func TestDependencies(t *testing.T) {
	deps := func(pkg string) map[string]bool {
		out, err := osexec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		m := map[string]bool{}
		for _, l := range strings.Fields(string(out)) {
			m[l] = true
		}
		return m
	}
	const module, self = "github.com/pgleader/pgleader", "github.com/pgleader/pgleader/protocol"
	for dep := range deps(".") {
		if dep != self && (dep == module || strings.HasPrefix(dep, module+"/")) {
			t.Errorf("go list -deps protocol holds %s", dep)
		}
	}
	const engine = module + "/election"
	for _, pkg := range []string{"../collector", "../tui", "../exporter"} {
		for dep := range deps(pkg) {
			if dep == engine || strings.HasPrefix(dep, engine+"/") {
				t.Errorf("go list -deps %s holds %s", pkg, dep)
			}
		}
	}
}
