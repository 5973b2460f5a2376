package election_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestTLSVerifyFull: the engine works over TLS with full verification, its dedicated
// sessions really are encrypted, the socket watcher still notices a terminated
// backend through the TLS layer, and a wrong CA is a clear error.
func TestTLSVerifyFull(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	srv := pgtest.NewServer(t, pgserver.Options{TLS: true})
	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://postgres@localhost:%d/app?sslmode=verify-full&sslrootcert=%s", srv.Port(), srv.CAFile())
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrationsUp(cfg); err != nil {
		t.Fatal(err)
	}

	r := &recorder{}
	c := testnode.FastConfig(dsn, "tls-1", "s")
	n := testnode.Start(t, c, r.Observe)
	pgtest.WaitFor(t, "leadership over TLS", 10*time.Second, func() bool { return n.Leads("s") })

	var plain int64
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity a LEFT JOIN pg_stat_ssl s USING (pid)
		WHERE a.application_name LIKE 'pgleader % tls-1' AND NOT coalesce(s.ssl, false)`).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if plain != 0 {
		t.Fatalf("%d of the node's sessions are not encrypted", plain)
	}

	// A terminated backend ends Do (the watcher's TLS unwrapping itself is tested
	// in TestWatchSocket).
	doCtx := make(chan context.Context, 1)
	go n.Scope("s").Do(ctx, func(ctx context.Context, _ election.Token) error { doCtx <- ctx; <-ctx.Done(); return nil })
	dctx := <-doCtx
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope = 's'"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("terminated TLS backend not noticed")
	}
	pgtest.WaitFor(t, "gate_closed after the terminated backend", 5*time.Second, func() bool {
		return r.count("tls-1", election.EventGateClosed) > 0
	})
	pgtest.WaitFor(t, "leadership again over TLS", 10*time.Second, func() bool { return n.Leads("s") })

	// A CA that did not sign the server's certificate: refused, and said so.
	other := pgtest.NewServer(t, pgserver.Options{TLS: true})
	wrongCA := filepath.Join(t.TempDir(), "ca.crt")
	b, _ := os.ReadFile(other.CAFile())
	os.WriteFile(wrongCA, b, 0o644)
	bad := fmt.Sprintf("postgres://postgres@localhost:%d/app?sslmode=verify-full&sslrootcert=%s&connect_timeout=5", srv.Port(), wrongCA)
	e, err := election.New(election.Config{DSN: bad, NodeID: "x", Scopes: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Check(ctx)
	if !errors.Is(err, election.ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong CA: %v, want ErrUnreachable mentioning the certificate", err)
	}
}
