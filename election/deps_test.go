package election_test

import (
	osexec "os/exec"
	"strings"
	"testing"
)

// TestDependencies: embedding the engine links pgx and the standard library, not
// the tools around it; the watchers (collector, tui, exporter) and the checker
// that reads events files do not link the engine, the watchers link no
// operator action, and protocol, the vocabulary
// they share with it, imports nothing of this module; every package under
// internal/ is a leaf (it imports nothing of this module but other internal
// packages); only the CLI imports the demo; the pgleader binary links no test
// code.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
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
	// The watchers speak protocol, not the engine; the checker reads the events
	// file (internal/eventlog), not the engine's events; protocol is a leaf.
	const module = "github.com/pgleader/pgleader"
	for _, pkg := range []string{"../collector", "../tui", "../exporter", "../lab/checker"} {
		for dep := range deps(pkg) {
			if dep == module+"/election" || strings.HasPrefix(dep, module+"/election/") {
				t.Errorf("go list -deps %s holds %s", pkg, dep)
			}
		}
	}
	// The watching side reads: the write path (operator actions) is linked
	// only where it is wired, in cmd and the demo, never into a view.
	for _, pkg := range []string{"../collector/...", "../tui/...", "../exporter/..."} {
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
	out, err := osexec.Command("go", "list", "../internal/...").Output()
	if err != nil {
		t.Fatalf("go list ../internal/...: %v", err)
	}
	leaves := strings.Fields(string(out))
	if len(leaves) == 0 {
		t.Fatal("go list ../internal/... lists no package: the leaf check would be vacuous")
	}
	for _, pkg := range leaves {
		for dep := range deps(pkg) {
			if (dep == module || strings.HasPrefix(dep, module+"/")) && !strings.HasPrefix(dep, module+"/internal/") {
				t.Errorf("go list -deps %s holds %s: internal/ holds leaves, which import only other leaves", pkg, dep)
			}
		}
	}
	// The demo is one of the CLI's commands, at the top beside it: nothing else
	// (library, watchers, lab) imports it.
	out, err = osexec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list ../...: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if pkg == module+"/cmd/pgleader" || pkg == module+"/demo" || strings.HasPrefix(pkg, module+"/demo/") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == module+"/demo" || strings.HasPrefix(imp, module+"/demo/") {
				t.Errorf("%s imports %s: only cmd/pgleader imports the demo", pkg, imp)
			}
		}
	}
	for dep := range deps("../cmd/pgleader") {
		if dep == "testing" || strings.HasPrefix(dep, "go.uber.org/goleak") {
			t.Errorf("the pgleader binary links %s", dep)
		}
	}
}
