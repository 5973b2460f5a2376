package migrations_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestPrivilegeTable holds docs/security.md's "Privileges, function by function"
// to the schema: one row for every function that runs as the owner (SECURITY
// DEFINER, as the database says after migrating), no row for a function that does
// not, and every test a row names exists in the repository.
func TestPrivilegeTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## Privileges, function by function")
	if start < 0 {
		t.Fatal(`docs/security.md has no section "Privileges, function by function"`)
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	fnName := regexp.MustCompile("`([a-z_]+)`")
	testName := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	rows := map[string][]string{} // function → tests
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 7 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "function" {
			continue
		}
		tests := testName.FindAllStringSubmatch(cells[5], -1)
		if len(tests) == 0 {
			t.Errorf("row %q names no test", strings.TrimSpace(cells[1]))
		}
		for _, m := range fnName.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("function %s has two rows", m[1])
			}
			for _, tm := range tests {
				rows[m[1]] = append(rows[m[1]], tm[1])
			}
		}
	}

	ctx := context.Background()
	conn := pgtest.ConnectConfig(t, setup(t))
	r, err := conn.Query(ctx, `SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'pgleader'::regnamespace AND p.prosecdef ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var definer []string
	for r.Next() {
		var n string
		if err := r.Scan(&n); err != nil {
			t.Fatal(err)
		}
		definer = append(definer, n)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if len(definer) < 20 {
		t.Fatalf("only %d SECURITY DEFINER functions found: the query is wrong", len(definer))
	}
	for _, f := range definer {
		if _, ok := rows[f]; !ok {
			t.Errorf("SECURITY DEFINER function %s has no row in docs/security.md's privilege table", f)
		}
	}
	for f := range rows {
		if !slices.Contains(definer, f) {
			t.Errorf("docs/security.md's privilege table has a row for %s, which is not SECURITY DEFINER", f)
		}
	}

	// Every named test exists.
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, tests := range rows {
		for _, tn := range tests {
			if !defined[tn] {
				t.Errorf("the row of %s names %s, which no test file defines", f, tn)
			}
		}
	}
}
