// Package api holds the recorded public Go API of the module's promised
// packages (README, "Versioning"), one export-data file each, and the test
// that holds the code to it: an incompatible change to a promised package
// fails make test. A compatible addition is listed, and passes.
//
// To record the API after an intended change (a new major version, or an
// addition to keep): make api-baseline.
package api

import (
	"bytes"
	"flag"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Promised are the packages whose Go API the module promises to keep
// (semantic versioning from v1.0.0; README, "Versioning"). Every other
// package's Go API is not covered (a type a promised package takes from one,
// such as election.Reason, is checked through the promised package): the CLI,
// the SQL protocol, the metrics and the events file are promised as
// documented instead.
var Promised = []string{
	"github.com/pgleader/pgleader/election",
	"github.com/pgleader/pgleader/election/electiontest",
	"github.com/pgleader/pgleader/election/electionprom",
	"github.com/pgleader/pgleader/migrations",
	"github.com/pgleader/pgleader/migrations/migrate",
	// protocol: the vocabulary election's API speaks (Reason's values, the
	// SQLSTATEs, LockKey), shared with the watchers and native clients.
	"github.com/pgleader/pgleader/protocol",
}

var record = flag.Bool("record", false, "write the recorded API of every promised package instead of checking it (make api-baseline)")

// baseline is the file that records pkg's API.
func baseline(pkg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(pkg, "github.com/pgleader/pgleader/"), "/", "_") + ".export"
}

func apidiff(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "apidiff"}, args...)...)
	cmd.Dir = ".." // the module's root: apidiff loads the packages from it
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go tool apidiff %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// TestAPICompatible: no promised package changes its API incompatibly with
// the recorded one.
func TestAPICompatible(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks every promised package: not in the short lane")
	}
	dir := t.TempDir()
	for _, pkg := range Promised {
		base, err := filepath.Abs(baseline(pkg))
		if err != nil {
			t.Fatal(err)
		}
		if *record {
			apidiff(t, "-w", base, pkg)
			t.Logf("%s: recorded in api/%s", pkg, baseline(pkg))
			continue
		}
		if _, err := os.Stat(base); err != nil {
			t.Errorf("%s: no recorded API (%v): make api-baseline", pkg, err)
			continue
		}
		cur := filepath.Join(dir, baseline(pkg))
		apidiff(t, "-w", cur, pkg)
		if report := apidiff(t, base, cur); report != "" {
			if incompatible := apidiff(t, "-incompatible", base, cur); incompatible != "" {
				t.Errorf("%s changed its promised API incompatibly:\n%s\nKeep the old form (deprecate it), or, for a new major version, make api-baseline", pkg, incompatible)
			} else {
				t.Logf("%s: compatible changes since the recorded API (make api-baseline records them):\n%s", pkg, report)
			}
		}
	}
}

// notCovered is the sentence every package outside the promise ends its doc
// with (README, "Versioning").
const notCovered = "Its Go API is not covered by pgleader's compatibility promise"

// TestPackageDocsSayWhatIsPromised: every importable package of the module
// that is not promised (not under internal/, lab/, examples/ or cmd/, and not a
// command) says so in its package doc, and no promised package does.
func TestPackageDocsSayWhatIsPromised(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Name}} {{.Dir}} {{join .GoFiles ","}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/pgleader/pgleader/"
	promised := map[string]bool{}
	for _, p := range Promised {
		promised[p] = true
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue // no Go files but tests
		}
		pkg, name, dir, files := f[0], f[1], f[2], strings.Split(f[3], ",")
		rel := strings.TrimPrefix(pkg, module)
		if name == "main" || rel == "api" || strings.Contains("/"+rel+"/", "/internal/") {
			continue
		}
		if top, _, _ := strings.Cut(rel, "/"); top == "lab" || top == "examples" || top == "cmd" {
			continue
		}
		says := strings.Contains(packageDoc(t, dir, files), notCovered)
		switch {
		case promised[pkg] && says:
			t.Errorf("%s is promised, and its package doc says %q", pkg, notCovered)
		case !promised[pkg] && !says:
			t.Errorf("%s is not promised: end its package doc with %q …", pkg, notCovered)
		}
		checked++
	}
	if checked < len(Promised)+5 {
		t.Fatalf("checked %d packages: go list found too few for the check to mean anything", checked)
	}
}

// packageDoc returns the package comments of files (the package's Go files,
// as go list names them, in dir), joined with their line breaks undone.
func packageDoc(t *testing.T, dir string, files []string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			b.WriteString(strings.Join(strings.Fields(f.Doc.Text()), " "))
		}
	}
	return b.String()
}
