package election_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSnippetsCompile: every Go block of the README and the code of the package
// doc's "Using it" section appear line for line (indentation aside) in a compiled
// example of this package, so the snippets users copy are code that builds. It
// fails when a snippet is edited without its example, or the other way round.
func TestSnippetsCompile(t *testing.T) {
	var compiled []string
	for _, f := range []string{"example_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		compiled = append(compiled, codeLines(string(b)))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README has no Go block")
	}
	snippets := map[string]string{}
	for i, b := range blocks {
		snippets["README block "+string(rune('1'+i))] = b[1]
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	using := regexp.MustCompile(`(?s)// # Using it\n//\n((?://(?:\t[^\n]*)?\n)+)`).FindStringSubmatch(string(doc))
	if using == nil {
		t.Fatal("doc.go has no code block under \"# Using it\"")
	}
	snippets["package doc, Using it"] = regexp.MustCompile(`(?m)^//\t?`).ReplaceAllString(using[1], "")
	for name, snip := range snippets {
		want := codeLines(snip)
		found := false
		for _, c := range compiled {
			if strings.Contains(c, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not compiled by any example of example_test.go:\n%s", name, snip)
		}
	}
}

// codeLines returns s's non-blank lines with their indentation removed, one per
// line.
func codeLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}
