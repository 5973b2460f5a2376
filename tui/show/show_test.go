package show

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/collector"
)

// declaredVerdicts returns the Verdict constants of package collector's
// source, in the order they are declared: the views must follow the source,
// not a list of their own.
func declaredVerdicts(t *testing.T) []collector.Verdict {
	t.Helper()
	files, err := filepath.Glob("../../collector/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []collector.Verdict
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Verdict" {
					continue
				}
				for i := range vs.Names {
					lit := vs.Values[i].(*ast.BasicLit)
					out = append(out, collector.Verdict(strings.Trim(lit.Value, `"`)))
				}
			}
		}
	}
	return out
}

// TestVerdicts: every Verdict the collector declares is one it knows, ranked
// in the order of declaration (worst first), and has a glyph of its own and a
// label of glyph and word; an unknown verdict is labelled as unknown.
func TestVerdicts(t *testing.T) {
	declared := declaredVerdicts(t)
	if len(declared) < 5 {
		t.Fatalf("found only %q among the declared constants", declared)
	}
	for i, v := range declared {
		if !v.Known() {
			t.Errorf("%q is declared but not known to the collector", v)
		}
		if i > 0 && v.Rank() <= declared[i-1].Rank() {
			t.Errorf("rank of %q (%d) not above %q's (%d)", v, v.Rank(), declared[i-1], declared[i-1].Rank())
		}
		if g := Glyph(v); g == unknown || g == "" {
			t.Errorf("%q has no glyph of its own (%q)", v, g)
		}
		if want := Glyph(v) + " " + string(v); Verdict(v) != want {
			t.Errorf("%q: label %q, want %q", v, Verdict(v), want)
		}
	}
	for v, want := range map[collector.Verdict]string{
		collector.VerdictSplitBrain: "‼ SPLIT BRAIN", collector.VerdictNoLeader: "✖ NO LEADER", collector.VerdictDegraded: "▲ DEGRADED",
		collector.VerdictOK: "✔ OK", collector.VerdictIdle: "· IDLE", "FUTURE THING": "? FUTURE THING", "": "? UNKNOWN",
	} {
		if got := Verdict(v); got != want {
			t.Errorf("Verdict(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestNodeState: each state the collector judges has its glyph; another shows
// as unknown.
func TestNodeState(t *testing.T) {
	for s, want := range map[collector.NodeState]string{
		collector.NodeLive: "● live", collector.NodeLate: "◐ late", collector.NodeDown: "✖ down",
		collector.NodeStopped: "■ stopped", collector.NodeUnknown: "? unknown",
	} {
		if got := NodeState(s); got != want {
			t.Errorf("NodeState(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestEpoch: epochs of the first timeline print as they are; after a
// failover, as timeline and term.
func TestEpoch(t *testing.T) {
	for e, want := range map[int64]string{0: "0", 42: "42", 1<<40 - 1: "1099511627775", 1 << 40: "t2·0",
		1<<40 + 3: "t2·3", 2<<40 + 1: "t3·1"} {
		if got := Epoch(e); got != want {
			t.Errorf("Epoch(%d) = %q, want %q", e, got, want)
		}
	}
}

// TestLastExit: a supervised command's last end reads as its exit status or
// its signal, a stop at the term's end as a stop.
func TestLastExit(t *testing.T) {
	for _, c := range []struct {
		code  int
		cause string
		text  string
	}{
		{0, "exit", "exit 0"},
		{3, "exit", "exit 3"},
		{137, "signal", "signal 9 (SIGKILL)"},
		{137, "exit", "exit 137"},
		{143, "drained", "stopped at term end (drained)"},
		{143, "killed", "stopped at term end (killed)"},
		{143, "", "exit 143"}, // recorded by a node before 1.0
	} {
		if got := LastExit(&collector.Supervised{LastExit: &c.code, LastExitCause: c.cause}); got != c.text {
			t.Errorf("%d %q: %q, want %q", c.code, c.cause, got, c.text)
		}
	}
	if got := LastExit(&collector.Supervised{}); got != "" {
		t.Errorf("no exit: %q", got)
	}
	if got := LastExit(nil); got != "" {
		t.Errorf("nothing supervised: %q", got)
	}
}
