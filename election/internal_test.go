package election

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckServerVersion(t *testing.T) {
	for _, tc := range []struct {
		num  int
		want string // "" = accepted
	}{
		{130012, "server is 13.0, pgleader needs PostgreSQL 14 or newer"},
		{90624, "server is 9.6, pgleader needs PostgreSQL 14 or newer"},
		{140000, ""},
		{150018, ""},
		{170002, ""},
	} {
		err := checkServerVersion(tc.num)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d: %v, want accepted", tc.num, err)
		case tc.want != "" && (!errors.Is(err, ErrUnsupportedServer) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d: %v, want ErrUnsupportedServer saying %q", tc.num, err, tc.want)
		}
	}
}

// The backoff after the n-th failure lies in [d/2, d] with d = 25ms·2^(n−1), capped
// at 1s, and it is jittered (not one fixed value).
func TestBackoff(t *testing.T) {
	for n := 1; n <= 20; n++ {
		d := min(25*time.Millisecond<<min(n-1, 6), time.Second)
		seen := map[time.Duration]bool{}
		for range 200 {
			b := backoff(n)
			if b < d/2 || b > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, b, d/2, d)
			}
			seen[b] = true
		}
		if len(seen) < 50 {
			t.Fatalf("backoff(%d) took only %d distinct values in 200 draws: not jittered", n, len(seen))
		}
	}
}
