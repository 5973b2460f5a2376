package dbcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
		{"ShuttingDownAndStandby", errors.Join(&pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}, pgconn.ErrReadOnlyConnection), two, true},
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

// LockTableCapacity refuses more scopes than half the server's lock table and
// names the settings.
func TestLockTableCapacity(t *testing.T) {
	c := LockTableCapacity{MaxLocksPerTransaction: 64, MaxConnections: 100}
	if c.Entries() != 6400 || c.MaxScopes() != 3200 {
		t.Fatalf("entries %d, max scopes %d; want 6400, 3200", c.Entries(), c.MaxScopes())
	}
	if err := c.Check(3200); err != nil {
		t.Errorf("3200 scopes: %v", err)
	}
	err := c.Check(3201)
	if !errors.Is(err, ErrTooManyScopes) {
		t.Fatalf("3201 scopes: %v, want ErrTooManyScopes", err)
	}
	for _, want := range []string{"max_locks_per_transaction (64)", "max_connections (100)", "3200 scopes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestAwaitRunsEveryCheckAgain: a check that fails because the database is in
// transition, whichever check it is, makes await run all of them again — the
// first ones too, for the server may be another one now — until they pass; a
// failure that will not heal ends it at once; nil checks are skipped.
func TestAwaitRunsEveryCheckAgain(t *testing.T) {
	cfg, _ := pgx.ParseConfig("postgres://u@127.0.0.1:5432/db")
	ctx := t.Context()
	var first, last int
	dropped := 2 // the last check loses its connection twice (a crash), then passes
	err := await(ctx, cfg, nil, []func(context.Context) error{
		func(context.Context) error { first++; return nil },
		nil,
		func(context.Context) error {
			last++
			if dropped > 0 {
				dropped--
				return fmt.Errorf("%w: read the other nodes' modes: %w", ErrUnreachable, io.ErrUnexpectedEOF)
			}
			return nil
		},
	})
	if err != nil || first != 3 || last != 3 {
		t.Fatalf("await = %v after %d runs of the first check and %d of the last; want nil after 3 and 3", err, first, last)
	}

	refused := &pgconn.PgError{Code: "28P01", Message: "password authentication failed"}
	runs := 0
	err = await(ctx, cfg, nil, []func(context.Context) error{
		func(context.Context) error { runs++; return fmt.Errorf("%w: %w", ErrUnreachable, refused) },
	})
	if !errors.Is(err, refused) || runs != 1 {
		t.Fatalf("await = %v after %d runs; want the password error after 1", err, runs)
	}
}
