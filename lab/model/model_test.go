package model

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// update rewrites the counterexamples in docs/model.md from this run's.
var update = flag.Bool("update", false, "rewrite the counterexample stories in docs/model.md")

const modelDoc = "../../docs/model.md"

// needSpin skips the test when spin or a C compiler is missing, unless CI is
// set: there the model must run (.ci/install-deps installs spin).
func needSpin(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"spin", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (CI is set, so the model must run): .ci/install-deps installs it", tool)
			}
			t.Skipf("%s is not installed: the protocol's model is not checked (apt-get install spin gcc)", tool)
		}
	}
}

// TestModel runs every check (Checks), two at a time: the models as they ship
// must pass, having taken every fault at least once; every mutation, finding
// and residual risk must break the property it names. Counterexamples are
// logged as stories; an unexpected one fails the test with its story. Checks
// marked Slow run when PGLEADER_MODEL_SLOW is set. -update rewrites the
// stories in docs/model.md; without it, the test fails when they differ.
func TestModel(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	needSpin(t)
	var (
		mu      sync.Mutex
		results = map[string]Result{}
		slots   = make(chan struct{}, 2) // 2 cores: no more than two pans at once
	)
	t.Run("checks", func(t *testing.T) {
		for _, c := range Checks() {
			t.Run(c.Name, func(t *testing.T) {
				if c.Slow && os.Getenv("PGLEADER_MODEL_SLOW") == "" {
					t.Skip("slow (minutes): set PGLEADER_MODEL_SLOW=1 to run it")
				}
				t.Parallel()
				slots <- struct{}{}
				defer func() { <-slots }()
				limit := 5 * time.Minute
				if c.Slow {
					limit = 20 * time.Minute
				}
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				defer cancel()
				r, err := c.Run(ctx, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d states, %d transitions, depth %d, %.0f MB, pan %v, in all %v\n  %s",
					c.About, r.States, r.Transitions, r.Depth, r.MemoryMB, r.Pan.Round(time.Millisecond),
					r.Elapsed.Round(time.Millisecond), r.Command)
				mu.Lock()
				results[c.Name] = r
				mu.Unlock()
				switch {
				case c.Want == "" && r.Errors > 0:
					t.Errorf("counterexample (%s broken):\n%s", r.Broken, strings.Join(r.Story, "\n"))
				case c.Want != "" && r.Errors == 0:
					t.Errorf("no counterexample: the check should break %s (%s)", c.Want, c.About)
				case c.Want != "" && r.Broken != c.Want:
					t.Errorf("the counterexample breaks %q, want %s:\n%s", r.Broken, c.Want, strings.Join(r.Story, "\n"))
				case c.Want != "":
					t.Logf("counterexample, as expected:\n%s", strings.Join(r.Story, "\n"))
				}
				for _, m := range c.Reach {
					if !slices.Contains(r.Reached, m) {
						t.Errorf("the run never took %q: a fault the model should exercise is unreachable", m)
					}
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	checkStories(t, results)
}

// storiesBlock is the part of docs/model.md the stories are written into.
var storiesBlock = regexp.MustCompile(`(?s)<!-- stories: begin -->\n.*<!-- stories: end -->`)

// storyHead starts a check's story in the stories block.
var storyHead = regexp.MustCompile(`(?m)^#### (\S+)\n`)

// docStories returns the stories block's sections, by check name: each from
// its "#### name" line to the next one (or the block's end).
func docStories(block []byte) map[string]string {
	out := map[string]string{}
	body := strings.TrimSuffix(string(block), "\n<!-- stories: end -->")
	locs := storyHead.FindAllStringSubmatchIndex(body, -1)
	for i, l := range locs {
		end := len(body)
		if i+1 < len(locs) {
			end = locs[i+1][0] - 1 // the blank line before the next heading
		}
		out[body[l[2]:l[3]]] = "\n" + body[l[0]:end]
	}
	return out
}

// checkStories compares the counterexamples in docs/model.md with the run's
// (or, with -update, writes them there). A slow check that did not run keeps
// the story the page has.
func checkStories(t *testing.T, results map[string]Result) {
	doc, err := os.ReadFile(modelDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !storiesBlock.Match(doc) {
		t.Fatalf("%s has no <!-- stories: begin --> … <!-- stories: end --> block", modelDoc)
	}
	kept := docStories(storiesBlock.Find(doc))
	var b strings.Builder
	b.WriteString("<!-- stories: begin -->\n")
	for _, c := range Checks() {
		if c.Want == "" {
			continue
		}
		r, ok := results[c.Name]
		switch {
		case ok:
			fmt.Fprintf(&b, "\n#### %s\n\n%s. Breaks %s. `%s`\n\n```\n%s\n```\n", c.Name, c.About, c.Want,
				strings.Join(append([]string{c.Model}, c.Defines...), " "), strings.Join(r.Story, "\n"))
		case c.Slow && kept[c.Name] != "":
			b.WriteString(kept[c.Name])
		default:
			t.Logf("%s did not run: the stories in %s are not compared (PGLEADER_MODEL_SLOW=1 runs every check)", c.Name, modelDoc)
			return
		}
	}
	b.WriteString("\n<!-- stories: end -->")
	want := storiesBlock.ReplaceAllLiteral(doc, []byte(b.String()))
	if *update {
		if err := os.WriteFile(modelDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(want) != string(doc) {
		t.Errorf("the counterexamples in %s are not this model's: go test ./lab/model/ -run TestModel -update rewrites them", modelDoc)
	}
}

// TestStory checks the replay parser on spin's own output.
func TestStory(t *testing.T) {
	replay := `spin: warning: c_code fragments remain uninterpreted
C claim_scopes: acquired epoch 1 (previous term 0 closed; guards to wait for: none)
c_code4:	{ if (!reached_x) { reached_x = 1; } }
@tick
C node_heartbeat: epoch 1 ok, trust until {t+3}
@tick
@tick
B gate opens (epoch 2)
B's application: a write with epoch 2 passes fence and commits
VIOLATION S5: gates of B and C open at once
spin: lock.pml:272, Error: assertion violated
a write with epoch 2 passes fence and commits
`
	story, broken := Story([]byte(replay))
	want := []string{
		"t=0 C claim_scopes: acquired epoch 1 (previous term 0 closed; guards to wait for: none)",
		"t=1 C node_heartbeat: epoch 1 ok, trust until t=4",
		"t=3 B gate opens (epoch 2)",
		"t=3 B's application: a write with epoch 2 passes fence and commits",
		"t=3 VIOLATION S5: gates of B and C open at once",
	}
	if broken != "S5" || !slices.Equal(story, want) {
		t.Errorf("Story = %q, %q\nwant %q, S5", story, broken, want)
	}
}

// TestChecksAreDistinct keeps the check table sane: unique names, known models
// and searches, and a property or a pass for each.
func TestChecksAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Checks() {
		if seen[c.Name] {
			t.Errorf("two checks named %s", c.Name)
		}
		seen[c.Name] = true
		if _, err := sources.ReadFile(c.Model); err != nil {
			t.Errorf("%s: model %s: %v", c.Name, c.Model, err)
		}
		if c.Want != "" && !slices.Contains([]string{"S1", "S3", "S5", "liveness"}, c.Want) {
			t.Errorf("%s: Want %q is no property of the model", c.Name, c.Want)
		}
		if c.Want == "" && c.Search != Exhaustive && c.Search != Liveness {
			t.Errorf("%s: a check that must pass needs an exhaustive or liveness search", c.Name)
		}
	}
}

var (
	// sqlDecl: a function of migrations/functions, its signature line and the
	// RETURNS line after it (as protocol/doc_test.go reads them).
	sqlDecl = regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION (pgleader\.([a-z0-9_]+)\(.*\))\n RETURNS (.*)$`)
	// defined: an inline or a macro of a model file.
	defined = regexp.MustCompile(`(?m)^(?:inline (\w+)\(|#define (\w+))`)
)

// entry is one function of correspondence.txt.
type entry struct {
	fn    string
	where map[string][]string // model file → names
	decls []string            // "signature\n RETURNS …"
}

func readCorrespondence(t *testing.T) []entry {
	t.Helper()
	b, err := os.ReadFile("correspondence.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []entry
	for _, block := range strings.Split(string(b), "\n\n") {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			continue
		}
		head := strings.SplitN(lines[0], "\t", 2)
		if len(head) != 2 || len(lines)%2 != 1 {
			t.Fatalf("correspondence.txt: a block must be \"name<TAB>where\", then declaration and RETURNS lines:\n%s", block)
		}
		e := entry{fn: head[0], where: map[string][]string{}}
		for _, part := range strings.Split(head[1], ";") {
			file, names, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				t.Fatalf("correspondence.txt: %s: %q is not FILE: names", e.fn, part)
			}
			for _, n := range strings.Split(names, ",") {
				e.where[file] = append(e.where[file], strings.TrimSpace(n))
			}
		}
		for i := 1; i < len(lines); i += 2 {
			e.decls = append(e.decls, lines[i]+"\n"+lines[i+1])
		}
		out = append(out, e)
	}
	return out
}

// TestCorrespondence keeps the models' table of SQL functions exact: every
// function listed is declared in migrations/functions exactly as the table
// shows it, with no other overload, and every inline or macro the table names
// exists in its model file. A function whose signature changes fails here
// until the model is checked against its new body and the table updated.
func TestCorrespondence(t *testing.T) {
	files, err := filepath.Glob("../../migrations/functions/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no ../../migrations/functions/*.sql (%v)", err)
	}
	sql := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sqlDecl.FindAllStringSubmatch(string(b), -1) {
			sql[m[2]] = append(sql[m[2]], m[1]+"\n RETURNS "+m[3])
		}
	}
	models := map[string][]string{}
	entries := readCorrespondence(t)
	if len(entries) < 10 {
		t.Fatalf("correspondence.txt lists %d functions: it was not read", len(entries))
	}
	for _, e := range entries {
		got := sql[e.fn]
		if len(got) == 0 {
			t.Errorf("%s: the model stands for pgleader.%s, which migrations/functions no longer declares", e.fn, e.fn)
			continue
		}
		for _, d := range e.decls {
			if !slices.Contains(got, d) {
				t.Errorf("%s: correspondence.txt declares\n%s\nbut migrations/functions does not: check the model against the function's body, then update the table", e.fn, d)
			}
		}
		for _, d := range got {
			if !slices.Contains(e.decls, d) {
				t.Errorf("%s: migrations/functions declares\n%s\nwhich correspondence.txt does not list: check the model against it, then add it", e.fn, d)
			}
		}
		for file, names := range e.where {
			if models[file] == nil {
				b, err := sources.ReadFile(file)
				if err != nil {
					t.Errorf("%s: no model file %s", e.fn, file)
					continue
				}
				for _, m := range defined.FindAllStringSubmatch(string(b), -1) {
					models[file] = append(models[file], m[1]+m[2])
				}
			}
			for _, n := range names {
				if !slices.Contains(models[file], n) {
					t.Errorf("%s: correspondence.txt names %s in %s, which defines no such inline or macro", e.fn, n, file)
				}
			}
		}
	}
}
