package upgrade_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

// TestFreshInstallEqualsUpgrade: the schema a fresh install of the current
// release creates is the one the upgrade path leaves (the previous release's
// migrate, then the current one's): the same tables, columns in the same order,
// functions, views, owners and grants, as pg_dump --schema-only prints them.
// Two databases of one server, so the roles they name are the same roles.
func TestFreshInstallEqualsUpgrade(t *testing.T) {
	pgtest.Slow(t)
	fresh, upgraded := pgtest.DSN(t), pgtest.DSN(t)
	if v := migrate(t, current, fresh); v != migrations.Latest {
		t.Fatalf("fresh install at schema version %d, want %d", v, migrations.Latest)
	}
	from := migrate(t, previous, upgraded)
	if v := migrate(t, current, upgraded); v != migrations.Latest || from > v {
		t.Fatalf("upgrade from schema version %d left %d, want %d", from, v, migrations.Latest)
	}
	t.Logf("upgraded from schema version %d to %d", from, migrations.Latest)

	a, b := schemaDump(t, fresh), schemaDump(t, upgraded)
	// The comparison means something only if the dump holds the schema.
	for _, want := range []string{"CREATE SCHEMA pgleader;", "CREATE TABLE pgleader.leader_state",
		"CREATE FUNCTION pgleader.fence(", "OWNER TO ", "GRANT "} {
		if !strings.Contains(a, want) {
			t.Fatalf("the fresh install's dump has no %q: not a dump of the pgleader schema?\n%s", want, a)
		}
	}
	if a != b {
		t.Errorf("the schema of a fresh install (-) differs from the upgraded one (+):\n%s", lineDiff(a, b))
	}
}

// schemaDump returns pg_dump --schema-only of the database dsn names (owners
// and privileges included), without what differs between any two dumps: the
// \restrict key of psql's meta-command guard (PostgreSQL 17.6, 16.10, 15.14 on).
func schemaDump(t *testing.T, dsn string) string {
	t.Helper()
	bin, err := pgserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--schema-only", "--dbname", dsn)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("pg_dump: %v\n%s", err, stderr)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, `\restrict `) || strings.HasPrefix(l, `\unrestrict `) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// lineDiff returns a unified-style diff of two texts: lines only in a with "-",
// only in b with "+", and up to three lines of context around each change.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	type line struct {
		op     byte // ' ', '-', '+'
		text   string
		ax, by int // line numbers in a and b, from 1, where the line is or would go
	}
	// The common head and tail as they are; the longest common subsequence of
	// what lies between (small when the texts nearly agree).
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	mx, my := x[head:len(x)-tail], y[head:len(y)-tail]
	lcs := make([][]int32, len(mx)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(my)+1)
	}
	for i := len(mx) - 1; i >= 0; i-- {
		for j := len(my) - 1; j >= 0; j-- {
			if mx[i] == my[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []line
	for k := range head {
		ops = append(ops, line{' ', x[k], k + 1, k + 1})
	}
	i, j := 0, 0
	for i < len(mx) || j < len(my) {
		ax, by := head+i+1, head+j+1
		switch {
		case i < len(mx) && j < len(my) && mx[i] == my[j]:
			ops = append(ops, line{' ', mx[i], ax, by})
			i, j = i+1, j+1
		case i < len(mx) && (j == len(my) || lcs[i+1][j] >= lcs[i][j+1]): // deletions first
			ops = append(ops, line{'-', mx[i], ax, by})
			i++
		default:
			ops = append(ops, line{'+', my[j], ax, by})
			j++
		}
	}
	for k := range tail {
		ax, by := len(x)-tail+k, len(y)-tail+k
		ops = append(ops, line{' ', x[ax], ax + 1, by + 1})
	}

	const context = 3
	var sb strings.Builder
	shown := -2 // index of the last line printed
	for k, op := range ops {
		near := false
		for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
			near = near || ops[d].op != ' '
		}
		if !near {
			continue
		}
		if k != shown+1 {
			fmt.Fprintf(&sb, "@@ -%d +%d @@\n", op.ax, op.by)
		}
		fmt.Fprintf(&sb, "%c%s\n", op.op, op.text)
		shown = k
	}
	return sb.String()
}

// TestLineDiff: the diff a failing schema comparison prints.
func TestLineDiff(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"x\ny", "x\ny", ""},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9", "1\n2\n3\n4\nX\n5\n6\n7\n8\n9",
			"@@ -2 +2 @@\n 2\n 3\n 4\n+X\n 5\n 6\n 7\n"},
		{"a\nb\nc", "a\nB\nc", "@@ -1 +1 @@\n a\n-b\n+B\n c\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9",
			"@@ -1 +1 @@\n+0\n 1\n 2\n 3\n@@ -7 +8 @@\n 7\n 8\n 9\n-10\n"},
	} {
		if got := lineDiff(tc.a, tc.b); got != tc.want {
			t.Errorf("lineDiff(%q, %q) =\n%s\nwant\n%s", tc.a, tc.b, got, tc.want)
		}
	}
}
