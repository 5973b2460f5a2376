package collector

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// declaredVerdicts returns the Verdict constants of the package's source, in
// the order they are declared: the table must follow the source, not itself.
func declaredVerdicts(t *testing.T) []Verdict {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []Verdict
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
					out = append(out, Verdict(strings.Trim(lit.Value, `"`)))
				}
			}
		}
	}
	return out
}

// TestVerdictPresentation: every Verdict constant has a rank, a glyph and a
// label; ranks rise strictly from worst to best in the order the constants are
// declared; an unknown verdict ranks between what is known wrong and what is
// known fine, and is labelled as unknown.
func TestVerdictPresentation(t *testing.T) {
	declared := declaredVerdicts(t)
	if len(declared) < 5 {
		t.Fatalf("found only %q among the declared constants", declared)
	}
	if got := Verdicts(); !slices.Equal(got, declared) {
		t.Fatalf("Verdicts() = %q, declared %q", got, declared)
	}
	for i, v := range declared {
		if g := v.Glyph(); g == unknownGlyph || g == "" {
			t.Errorf("%q has no glyph of its own (%q)", v, g)
		}
		if want := v.Glyph() + " " + string(v); v.Label() != want {
			t.Errorf("%q: label %q, want %q", v, v.Label(), want)
		}
		if v.Rank() == unknownRank || !v.Known() {
			t.Errorf("%q ranks as an unknown verdict (rank %d, known %v)", v, v.Rank(), v.Known())
		}
		if i > 0 && v.Rank() <= declared[i-1].Rank() {
			t.Errorf("rank of %q (%d) not above %q's (%d)", v, v.Rank(), declared[i-1], declared[i-1].Rank())
		}
	}
	for _, v := range []Verdict{"FUTURE THING", ""} {
		if r := v.Rank(); r <= VerdictDegraded.Rank() || r >= VerdictOK.Rank() {
			t.Errorf("unknown %q ranks %d: not between DEGRADED and OK", v, r)
		}
		if !v.Troubled() || v.Known() {
			t.Errorf("unknown %q: Troubled %v, Known %v", v, v.Troubled(), v.Known())
		}
	}
	for v, want := range map[Verdict]string{
		VerdictSplitBrain: "‼ SPLIT BRAIN", VerdictNoLeader: "✖ NO LEADER", VerdictDegraded: "▲ DEGRADED",
		VerdictOK: "✔ OK", VerdictIdle: "· IDLE", "FUTURE THING": "? FUTURE THING", "": "? UNKNOWN",
	} {
		if got := v.Label(); got != want {
			t.Errorf("Label(%q) = %q, want %q", v, got, want)
		}
	}
}
