package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nodeFiles are the files of package main on the code path of the shipped
// `pgleader node`: the command itself, its hook-less half, and the shared wiring
// it calls (app, runE, resolve, buildVersion, the root that registers it). Demo,
// chaos and bench live in the same binary but in files of their own, which this
// list must never grow to include.
var nodeFiles = []string{"node.go", "node_nolab.go", "main.go", "root.go", "target.go", "version.go",
	"run.go", "listen.go", "isleader.go", "labcmds_nolab.go"}

// labFree are the import path prefixes the node's code path must not reach: the
// lab (harnesses, fault injection, test servers) and the fault proxy.
var labFree = []string{"github.com/pgleader/pgleader/lab/", "github.com/Shopify/toxiproxy"}

// TestNodeImportsNoLab: `pgleader node` links neither lab/ nor toxiproxy through
// its own files, and the contract workload it runs (--work-interval) is a
// product package with no lab dependency either.
func TestNodeImportsNoLab(t *testing.T) {
	fset := token.NewFileSet()
	imports := []string{"github.com/pgleader/pgleader/workload"}
	for _, name := range nodeFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, imp.Path.Value, err)
			}
			for _, bad := range labFree {
				if strings.HasPrefix(p, bad) {
					t.Errorf("%s imports %s", name, p)
				}
			}
			if !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
	}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, imports...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", imports, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range labFree {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("the node's code path links %s (go list -deps of the imports of %v)", dep, nodeFiles)
			}
		}
	}
}

// TestShippedNodeHasNoTestHooks: without the pgleader_lab tag, `pgleader node`
// has no --test-* flag, hidden or not, and its files name none (the hooks live
// in node_lab.go).
func TestShippedNodeHasNoTestHooks(t *testing.T) {
	if labBuild {
		t.Skip("a lab build (-tags pgleader_lab) has the hooks by design")
	}
	fl := (&app{}).nodeCommand().Flags()
	for _, name := range []string{"test-pause-before-write", "test-unsafe-skip-fence"} {
		if fl.Lookup(name) != nil {
			t.Errorf("the shipped node has --%s", name)
		}
	}
	for _, name := range nodeFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), `"test-`) {
			t.Errorf("%s names a --test-* flag: fault hooks belong in node_lab.go", name)
		}
	}
}
