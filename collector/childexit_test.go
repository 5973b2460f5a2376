package collector

import "testing"

// TestChildExitText: a supervised command's end reads as its exit status or
// its signal (named when POSIX fixes the number), and a non-zero status or any
// signal as a crash (how the views print a stop at the term's end is
// tui/show's TestLastExit).
func TestChildExitText(t *testing.T) {
	for _, c := range []struct {
		code    int
		cause   string
		text    string
		crashed bool
	}{
		{0, "exit", "exit 0", false},
		{3, "exit", "exit 3", true},
		{137, "signal", "signal 9 (SIGKILL)", true},
		{139, "signal", "signal 11 (SIGSEGV)", true},
		{128 + 31, "signal", "signal 31", true},
		{137, "exit", "exit 137", true}, // a shell that exits 137 was not signalled itself
	} {
		tc := TermChild{Exits: 1, ExitCode: c.code, Cause: c.cause}
		if got := tc.String(); got != c.text {
			t.Errorf("%d %s: %q, want %q", c.code, c.cause, got, c.text)
		}
		if tc.Crashed() != c.crashed {
			t.Errorf("%d %s: crashed %v, want %v", c.code, c.cause, tc.Crashed(), c.crashed)
		}
	}
}
