package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/migrations"
	"github.com/pgleader/pgleader/protocol"
)

// TestVersionCommand: version prints the stamped release version and commit
// (make build's -ldflags -X), else "dev", beside the Go version and the schema
// and protocol versions, as text or JSON; another -o is bad input.
func TestVersionCommand(t *testing.T) {
	for _, stamp := range []struct{ version, commit, want string }{
		{"", "", "dev"},
		{"1.0.0-rc.1", "0123456789ab", "1.0.0-rc.1"},
	} {
		t.Run(stamp.want, func(t *testing.T) {
			defer func(v, c string) { version, commit = v, c }(version, commit)
			version, commit = stamp.version, stamp.commit

			var out, errOut strings.Builder
			if code := run([]string{"version", "-o", "json"}, &out, &errOut); code != 0 {
				t.Fatalf("version -o json: exit %d, stderr %q", code, errOut.String())
			}
			var got versionInfo
			if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
				t.Fatalf("version -o json: %v\n%s", err, out.String())
			}
			want := versionInfo{Version: stamp.want, Commit: stamp.commit, Go: runtime.Version(),
				Platform: runtime.GOOS + "/" + runtime.GOARCH, Schema: migrations.Latest, Protocol: protocol.Version}
			if stamp.commit == "" {
				want.Commit = got.Commit // whatever the toolchain recorded, if anything
			}
			if got != want {
				t.Errorf("version -o json = %+v, want %+v", got, want)
			}

			out.Reset()
			if code := run([]string{"version"}, &out, &errOut); code != 0 {
				t.Fatalf("version: exit %d", code)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 5 || lines[0] != "pgleader "+stamp.want ||
				!strings.HasPrefix(lines[3], "schema ") || !strings.HasSuffix(lines[3], " "+itoa(migrations.Latest)) ||
				!strings.HasSuffix(lines[4], " "+itoa(protocol.Version)) || !strings.Contains(lines[2], runtime.Version()) {
				t.Errorf("version prints:\n%s", out.String())
			}
			if stamp.commit != "" && !strings.HasSuffix(lines[1], " "+stamp.commit) {
				t.Errorf("version's commit line %q lacks %s", lines[1], stamp.commit)
			}
		})
	}

	var out, errOut strings.Builder
	if code := run([]string{"version", "-o", "yaml"}, &out, &errOut); code != 2 ||
		errOut.String() != "pgleader: -o/--output must be text or json (got \"yaml\")\n" {
		t.Errorf("version -o yaml: exit %d, stderr %q", code, errOut.String())
	}
}
