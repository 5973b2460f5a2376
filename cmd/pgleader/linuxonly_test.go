package main

import (
	"strings"
	"testing"
)

// TestLinuxOnlyCommands: a build for another system (platform darwin) refuses
// run and demo in one line naming what they need, exit 2, whatever their
// arguments; its other commands are the real ones. On Linux they stay real.
func TestLinuxOnlyCommands(t *testing.T) {
	defer func(p string) { platform = p }(platform)
	platform = "darwin"
	for _, args := range [][]string{
		{"run", "--scope", "billing", "--once", "--", "/bin/true"},
		{"demo", "--headless", "--faults"},
		{"run", "--help"},
	} {
		var stdout, stderr strings.Builder
		code := run(args, &stdout, &stderr)
		line, ok := strings.CutSuffix(stderr.String(), "\n")
		if code != 2 || !ok || strings.Contains(line, "\n") || stdout.Len() != 0 {
			t.Errorf("%v on darwin: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, stdout.String(), stderr.String())
		}
		for _, want := range []string{"pgleader: " + args[0] + " needs Linux and this is darwin", "PR_SET_PDEATHSIG", "work here"} {
			if !strings.Contains(line, want) {
				t.Errorf("%v on darwin: %q lacks %q", args, line, want)
			}
		}
	}
	// The rest is untouched: status parses its flags and reaches for the database.
	var stdout, stderr strings.Builder
	if code := run([]string{"status", "--dsn", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"}, &stdout, &stderr); code != 6 ||
		!strings.Contains(stderr.String(), "database unreachable") {
		t.Errorf("status on darwin: exit %d, stderr %q; want the real command's unreachable error", code, stderr.String())
	}
	var help strings.Builder
	run([]string{"--help"}, &help, &help)
	if !strings.Contains(help.String(), "(Linux only)") {
		t.Errorf("pgleader --help on darwin does not mark run and demo Linux only:\n%s", help.String())
	}

	platform = "linux"
	stderr.Reset()
	if code := run([]string{"run", "--scope", "billing"}, &stdout, &stderr); code != 2 || strings.Contains(stderr.String(), "needs Linux") {
		t.Errorf("run on linux: exit %d, stderr %q; want the real command's usage error", code, stderr.String())
	}
}
