package election_test

import (
	osexec "os/exec"
	"strings"
	"testing"
)

// TestDependencies: embedding the engine links pgx and the standard library, not
// the tools around it; the watchers (collector, tui, exporter) do not link the
// engine nor the operator actions, and protocol, the vocabulary they share with it, imports nothing of
// this module; the pgleader binary links no test code.
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
	forbidden := []string{"github.com/pressly/goose", "go.uber.org/goleak", "github.com/Shopify/toxiproxy",
		"github.com/spf13/cobra", "charm.land/", "github.com/charmbracelet/", "github.com/prometheus/",
		"github.com/jackc/pglogrepl", "github.com/pgleader/pgleader/collector", "github.com/jackc/pgx/v5/pgxpool", "github.com/pgleader/pgleader/lab/",
		"testing"}
	for _, pkg := range []string{"."} {
		for dep := range deps(pkg) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") || strings.HasPrefix(dep, f) && strings.HasSuffix(f, "/") {
					t.Errorf("go list -deps %s holds %s", pkg, dep)
				}
			}
		}
	}
	// The watchers speak protocol, not the engine; protocol is a leaf.
	const module = "github.com/pgleader/pgleader"
	for _, pkg := range []string{"../collector", "../tui", "../exporter"} {
		for dep := range deps(pkg) {
			if dep == module+"/election" || strings.HasPrefix(dep, module+"/election/") {
				t.Errorf("go list -deps %s holds %s", pkg, dep)
			}
		}
	}
	// The watching side reads: the write path (operator actions) is linked
	// only where it is wired, in cmd and the lab, never into a view.
	for _, pkg := range []string{"../collector", "../collector/...", "../tui/...", "../exporter/..."} {
		for dep := range deps(pkg) {
			if dep == module+"/operator" || strings.HasPrefix(dep, module+"/operator/") {
				t.Errorf("go list -deps %s holds %s", pkg, dep)
			}
		}
	}
	for dep := range deps("../protocol") {
		if dep != module+"/protocol" && (dep == module || strings.HasPrefix(dep, module+"/")) {
			t.Errorf("go list -deps protocol holds %s", dep)
		}
	}
	for dep := range deps("../cmd/pgleader") {
		if dep == "testing" || strings.HasPrefix(dep, "go.uber.org/goleak") {
			t.Errorf("the pgleader binary links %s", dep)
		}
	}
}
