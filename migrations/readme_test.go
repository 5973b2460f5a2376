package migrations_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/pgleader/pgleader/migrations"
)

var (
	// latestStatement is where the README states the schema version a release
	// installs, once.
	latestStatement = regexp.MustCompile("version (\\d+) \\(`migrations.Latest`\\)")
	// schemaVersion is any other "schema version N" in the README: it can only
	// mean the current one.
	schemaVersion = regexp.MustCompile(`(?i)schema version\W{0,4}(\d+)`)
)

// TestReadmeStatesLatest: the README states the schema version once, as
// migrations.Latest, and names no other as "schema version".
func TestReadmeStatesLatest(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	ms := latestStatement.FindAllStringSubmatch(readme, -1)
	if len(ms) != 1 {
		t.Fatalf("README states the installed schema version %d times as %q; want once", len(ms), latestStatement)
	}
	for _, m := range append(ms, schemaVersion.FindAllStringSubmatch(readme, -1)...) {
		if n, _ := strconv.Atoi(m[1]); n != migrations.Latest {
			t.Errorf("README: %q, but migrations.Latest is %d", m[0], migrations.Latest)
		}
	}
}
