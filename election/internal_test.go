package election

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// A database in the middle of a restart or failover is waited out; a wrong address,
// password or database is not.
func TestInTransition(t *testing.T) {
	one, _ := pgx.ParseConfig("postgres://u@127.0.0.1:5432/db")
	two, _ := pgx.ParseConfig("postgres://u@127.0.0.1:5432,127.0.0.1:5433/db?target_session_attrs=read-write")
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		err  error
		cfg  *pgx.ConnConfig
		want bool
	}{
		{"StartingUp", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, one, true},
		{"EveryHostReadOnly", errors.Join(pgconn.ErrReadOnlyConnection, pgconn.ErrReadOnlyConnection), two, true},
		{"RefusedOneOfSeveral", errors.Join(refused, pgconn.ErrReadOnlyConnection), two, true},
		{"RefusedSingleHost", refused, one, false},
		{"ResetDuringCheck", fmt.Errorf("%w: read schema version: %w", ErrUnreachable, syscall.ECONNRESET), one, true},
		{"BadPassword", &pgconn.PgError{Code: "28P01", Message: "password authentication failed"}, two, false},
		{"NoSuchDatabase", &pgconn.PgError{Code: "3D000", Message: "database does not exist"}, two, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := fmt.Errorf("%w: cannot connect: %w", ErrUnreachable, tc.err)
			if got := inTransition(wrapped, tc.cfg); got != tc.want {
				t.Errorf("inTransition(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
