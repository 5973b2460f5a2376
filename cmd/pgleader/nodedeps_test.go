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
// it calls (app, runE, resolve, buildVersion, the root that registers it). Demo
// lives in the same binary but in files of its own, which this list must never
// grow to include; chaos and bench are built into pgleader-lab only
// (TestShippedBinaryHasNoLab).
var nodeFiles = []string{"node.go", "node_nolab.go", "main.go", "root.go", "target.go", "version.go",
	"run.go", "listen.go", "isleader.go", "labcmds_nolab.go"}

// labFree are the import path prefixes the node's code path must not reach: the
// lab (harnesses, fault injection, test servers), the demo that drives it, and
// the fault proxy.
var labFree = []string{"github.com/pgleader/pgleader/lab/", "github.com/pgleader/pgleader/demo",
	"github.com/Shopify/toxiproxy"}

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

// labOnly are the packages only pgleader-lab links: the chaos harness and its
// fault proxy (toxiproxy), and the benchmarks.
var labOnly = []string{"github.com/Shopify/toxiproxy", "github.com/pgleader/pgleader/lab/chaos",
	"github.com/pgleader/pgleader/lab/faultnet", "github.com/pgleader/pgleader/lab/bench"}

// buildOnly are what builds and packages pgleader (lab/release: nfpm; the docs
// build: cobra/doc): no pgleader binary links them.
var buildOnly = []string{"github.com/goreleaser/nfpm", "github.com/spf13/cobra/doc", "github.com/pgleader/pgleader/lab/release"}

// TestShippedBinaryHasNoLab: the production build of cmd/pgleader links neither
// the fault lab nor the benchmarks (they double its modules for commands no
// production host runs), and the lab build still links both; neither links
// the release tooling.
func TestShippedBinaryHasNoLab(t *testing.T) {
	deps := func(tags ...string) []string {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command("go", append(args, ".")...).Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	shipped, lab := deps(), deps("-tags", "pgleader_lab")
	for _, want := range labOnly {
		has := func(ds []string) bool {
			return slices.ContainsFunc(ds, func(d string) bool { return strings.HasPrefix(d, want) })
		}
		if has(shipped) {
			t.Errorf("the production binary links %s: it belongs in pgleader-lab (-tags pgleader_lab) only", want)
		}
		if !has(lab) {
			t.Errorf("pgleader-lab does not link %s", want)
		}
	}
	for _, dep := range append(shipped, lab...) {
		for _, bad := range buildOnly {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("a pgleader binary links %s, which only builds and packages it", dep)
			}
		}
	}
}

// TestLabCommandsPointToLab: in the production binary, chaos and bench say in one
// line, exit 2, that they live in pgleader-lab and how to get it — whatever
// arguments they were given.
func TestLabCommandsPointToLab(t *testing.T) {
	if labBuild {
		t.Skip("a lab build has the real commands")
	}
	for _, args := range [][]string{{"chaos", "--duration", "60s", "--json", "x.json"}, {"bench", "failover", "-n", "50"}, {"bench", "--help"}} {
		var stdout, stderr strings.Builder
		code := run(args, &stdout, &stderr)
		line, ok := strings.CutSuffix(stderr.String(), "\n")
		if code != 2 || !ok || strings.Contains(line, "\n") || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, stdout.String(), stderr.String())
		}
		for _, want := range []string{"pgleader-lab " + args[0], "make build-lab"} {
			if !strings.Contains(line, want) {
				t.Errorf("%v: %q lacks %q", args, line, want)
			}
		}
	}
	help := new(strings.Builder)
	run([]string{"--help"}, help, help)
	for _, hidden := range []string{"chaos", "bench"} {
		if strings.Contains(help.String(), "\n  "+hidden+" ") {
			t.Errorf("pgleader --help lists %s:\n%s", hidden, help)
		}
	}
}
