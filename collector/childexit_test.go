package collector

import "testing"

// TestChildExitText: a supervised command's end reads as its exit status or
// its signal (named when POSIX fixes the number), a stop at the term's end as a
// stop, and a non-zero status or any signal as a crash.
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
		sv := Supervised{LastExit: &c.code, LastExitCause: c.cause}
		if got := sv.LastExitText(); got != c.text {
			t.Errorf("Supervised %d %s: %q, want %q", c.code, c.cause, got, c.text)
		}
	}
	code := 143
	for cause, want := range map[string]string{"drained": "stopped at term end (drained)", "killed": "stopped at term end (killed)", "": "exit 143"} {
		if got := (Supervised{LastExit: &code, LastExitCause: cause}).LastExitText(); got != want {
			t.Errorf("cause %q: %q, want %q", cause, got, want)
		}
	}
	if got := (Supervised{}).LastExitText(); got != "" {
		t.Errorf("no exit: %q", got)
	}
}
