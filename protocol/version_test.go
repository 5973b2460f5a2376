package protocol_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	schema "github.com/pgleader/pgleader/migrations"
	"github.com/pgleader/pgleader/protocol"
)

// versionStatements are the ways docs/protocol.md states the version it
// describes; each must occur and name protocol.Version.
var versionStatements = []*regexp.Regexp{
	regexp.MustCompile(`It describes schema version (\d+)`),
	regexp.MustCompile("`SELECT pgleader.schema_version\\(\\)` returns (\\d+)"),
	regexp.MustCompile("`pgleader.schema_version\\(\\) >= (\\d+)`"),
	regexp.MustCompile("`pgleader.schema_version\\(\\)` ≥ (\\d+)"),
	regexp.MustCompile(`The schema version \((\d+)\)`),
	// Any other "schema version N" the page may grow.
	regexp.MustCompile(`(?i)schema[ _]version\W{0,8}(\d+)`),
}

// TestProtocolVersion: docs/protocol.md states the version it describes as
// protocol.Version everywhere it states one, and that version is one
// `pgleader migrate` installs.
func TestProtocolVersion(t *testing.T) {
	if protocol.Version > schema.Latest {
		t.Errorf("protocol.Version %d is above schema.Latest %d: the page describes a schema no release installs", protocol.Version, schema.Latest)
	}
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, re := range versionStatements {
		ms := re.FindAllStringSubmatch(doc, -1)
		if len(ms) == 0 {
			t.Errorf("%s no longer states its version as %q", protocolDoc, re)
		}
		for _, m := range ms {
			if n, _ := strconv.Atoi(m[1]); n != protocol.Version {
				t.Errorf("%s: %q states version %d; protocol.Version is %d", protocolDoc, m[0], n, protocol.Version)
			}
		}
	}
}
