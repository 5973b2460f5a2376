package election

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

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

func TestDefaultNodeID(t *testing.T) {
	host, _ := os.Hostname()
	id := DefaultNodeID()
	want := regexp.MustCompile("^" + regexp.QuoteMeta(host) + fmt.Sprintf("-%d-", os.Getpid()) + "[0-9a-f]{6}$")
	if !want.MatchString(id) {
		t.Fatalf("DefaultNodeID() = %q", id)
	}
	if id == DefaultNodeID() {
		t.Fatal("two default node ids are equal")
	}
	if err := validateName("node id", id); err != nil {
		t.Fatal(err)
	}
}

func TestUnwatchedHolders(t *testing.T) {
	cases := []struct {
		me, peer string
		observed []string
		want     []string
	}{
		// The incident: n3 watches n1 (the ring wraps), n1 died before n3 aimed, so
		// ring_next skipped it and gave n2.
		{"n3", "n2", []string{"n1", "", "n1"}, []string{"n1"}},
		{"n3", "n1", []string{"n1"}, nil},                            // the peer itself: its watch reports it
		{"n1", "n3", []string{"n2", "n4"}, []string{"n2"}},           // n4 is past the peer
		{"n2", "", []string{"n1", "n2", "n3"}, []string{"n1", "n3"}}, // alone: everyone else is dead
		{"n2", "n3", []string{"n2", ""}, nil},                        // this node, unknown
		{"b", "a", []string{"c", "z", "a"}, []string{"c", "z"}},      // wraps around the end
	}
	for _, c := range cases {
		got := unwatchedHolders(c.me, c.peer, c.observed)
		if !slices.Equal(got, c.want) {
			t.Errorf("unwatchedHolders(%q, %q, %q) = %q, want %q", c.me, c.peer, c.observed, got, c.want)
		}
	}
}
