package protocol_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// protocolDoc is the page that describes the SQL protocol to clients in other
// languages.
const protocolDoc = "../docs/protocol.md"

var (
	// definedFn: a function defined by the repeatable files, with its signature
	// line and the RETURNS line after it.
	definedFn = regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION (pgleader\.([a-z0-9_]+)\(.*\))\n RETURNS (.*)$`)
	// anyFn: every function the repeatable files define, whatever the layout.
	anyFn = regexp.MustCompile(`(?i)CREATE OR REPLACE FUNCTION pgleader\.([a-z0-9_]+)\s*\(`)
	// namedFn: a function the page names, called or declared.
	namedFn = regexp.MustCompile(`pgleader\.([a-z0-9_]+)\(`)
	// heading: a section heading of the page.
	heading = regexp.MustCompile(`(?m)^#{2,4} .*$`)
	// sqlBlock: a fenced sql code block of the page.
	sqlBlock = regexp.MustCompile("(?s)```sql\n(.*?)```")
)

// functionFiles returns the text of migrations/functions/*.sql.
func functionFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../migrations/functions/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no ../migrations/functions/*.sql (%v)", err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// nodeFunctions returns the functions privilege_lists grants to the node role:
// the second of its four arrays (definer, node, reader, operator).
func nodeFunctions(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../migrations/functions/privilege_lists.sql")
	if err != nil {
		t.Fatal(err)
	}
	arrays := regexp.MustCompile(`(?s)ARRAY\[(.*?)\]`).FindAllStringSubmatch(string(b), -1)
	if len(arrays) != 4 {
		t.Fatalf("privilege_lists.sql: %d arrays, want 4 (definer, node, reader, operator)", len(arrays))
	}
	names := uniq(regexp.MustCompile(`'([a-z0-9_]+)'`), arrays[1][1])
	if len(names) == 0 {
		t.Fatal("privilege_lists.sql: the node array names no function")
	}
	return names
}

// signature is a function's declaration as the SQL file writes it: the name and
// arguments, then the result type.
type signature struct{ args, returns string }

// docSignatures returns the declarations the page shows in its sql blocks: a line
// that starts with "pgleader." followed by a line that starts with " RETURNS ".
func docSignatures(doc string) []signature {
	var out []signature
	for _, block := range sqlBlock.FindAllStringSubmatch(doc, -1) {
		lines := strings.Split(block[1], "\n")
		for i := 0; i+1 < len(lines); i++ {
			if strings.HasPrefix(lines[i], "pgleader.") && strings.HasPrefix(lines[i+1], " RETURNS ") {
				out = append(out, signature{lines[i], strings.TrimPrefix(lines[i+1], " RETURNS ")})
			}
		}
	}
	return out
}

// TestProtocolDocMatchesSchema keeps docs/protocol.md from drifting away from the
// SQL: every function granted to the node role has a section (a heading that
// names "pgleader.NAME(") and shows every overload's signature and result exactly
// as its SQL file declares them; every "pgleader.NAME(" the page names exists in
// migrations/functions; and every declaration it shows is one the SQL has.
func TestProtocolDocMatchesSchema(t *testing.T) {
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	sqlFiles := functionFiles(t)

	defined := uniq(anyFn, sqlFiles...)
	declared := map[string][]signature{} // by function name: its overloads
	for _, f := range sqlFiles {
		for _, m := range definedFn.FindAllStringSubmatch(f, -1) {
			declared[m[2]] = append(declared[m[2]], signature{m[1], m[3]})
		}
	}
	shown := docSignatures(doc)
	headings := heading.FindAllString(doc, -1)

	for _, fn := range nodeFunctions(t) {
		if !slices.Contains(defined, fn) {
			t.Errorf("privilege_lists grants %s to the node role, but no file under migrations/functions defines it", fn)
			continue
		}
		if !slices.ContainsFunc(headings, func(h string) bool { return strings.Contains(h, "pgleader."+fn+"(") }) {
			t.Errorf("%s: granted to the node role, but %s has no section heading naming pgleader.%s(", fn, protocolDoc, fn)
		}
		if len(declared[fn]) == 0 {
			t.Errorf("%s: its declaration in migrations/functions is not on one line followed by RETURNS; this test cannot read it", fn)
		}
		for _, sig := range declared[fn] {
			if !slices.Contains(shown, sig) {
				t.Errorf("%s: %s does not show its declaration exactly as the SQL has it, in a sql block:\n%s\n RETURNS %s",
					fn, protocolDoc, sig.args, sig.returns)
			}
		}
	}

	for _, fn := range uniq(namedFn, doc) {
		if !slices.Contains(defined, fn) {
			t.Errorf("%s names pgleader.%s(, which no file under migrations/functions defines", protocolDoc, fn)
		}
	}

	var all []signature
	for _, sigs := range declared {
		all = append(all, sigs...)
	}
	for _, sig := range shown {
		if !slices.Contains(all, sig) {
			t.Errorf("%s shows a declaration the SQL does not have:\n%s\n RETURNS %s", protocolDoc, sig.args, sig.returns)
		}
	}
}

// TestNodeFunctionsRead guards the test above against reading nothing: the node
// role's list holds the functions every node calls.
func TestNodeFunctionsRead(t *testing.T) {
	got := nodeFunctions(t)
	for _, fn := range []string{"claim_scopes", "fence", "node_heartbeat", "register_node", "release_batch"} {
		if !slices.Contains(got, fn) {
			t.Errorf("nodeFunctions() = %v, lacks %s", got, fn)
		}
	}
}
