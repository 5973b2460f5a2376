package pgtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestDSN(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel()
	dsn1, dsn2 := pgtest.DSN(t), pgtest.DSN(t)
	if dsn1 == dsn2 {
		t.Fatalf("two calls returned the same DSN %s", dsn1)
	}
	c1, c2 := pgtest.Connect(t, dsn1), pgtest.Connect(t, dsn2)
	db1 := queryString(t, c1, "SELECT current_database()")
	db2 := queryString(t, c2, "SELECT current_database()")
	if db1 == db2 || !strings.HasPrefix(db1, "pgleader_test_testdsn_") || len(db1) > 63 {
		t.Fatalf("databases %q and %q", db1, db2)
	}
	if n := queryString(t, c1, "SELECT count(*)::text FROM pg_class WHERE relnamespace = 'public'::regnamespace"); n != "0" {
		t.Fatalf("fresh database has %s relations in public", n)
	}
	if _, err := c1.Exec(context.Background(), "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if n := queryString(t, c2, "SELECT count(*)::text FROM pg_class WHERE relnamespace = 'public'::regnamespace"); n != "0" {
		t.Fatalf("second database sees %s relations from the first", n)
	}
	if got := queryString(t, c1, "SHOW wal_level"); got != "logical" {
		t.Errorf("wal_level = %q, want logical", got)
	}
	if got := queryString(t, c1, "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off", got)
	}
	if got := queryString(t, c1, "SHOW synchronous_commit"); got != "on" {
		t.Errorf("synchronous_commit = %q, want on", got)
	}
}

func TestDSNLongSubtestName(t *testing.T) {
	t.Parallel()
	t.Run(strings.Repeat("Very Long/Name-", 10), func(t *testing.T) {
		c := pgtest.Connect(t, pgtest.DSN(t))
		if db := queryString(t, c, "SELECT current_database()"); len(db) > 63 || !strings.HasPrefix(db, "pgleader_test_") {
			t.Fatalf("database name %q", db)
		}
	})
}

func TestNewServer(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx := context.Background()
	dataDir := s.DataDir()
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatal(err)
	}
	pid1 := s.PID()
	if pid1 == 0 {
		t.Fatal("PID() = 0 for a running server")
	}
	if err := s.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	dsn := s.DSN("app")
	if !strings.Contains(dsn, fmt.Sprintf("127.0.0.1:%d/app", s.Port())) {
		t.Fatalf("DSN %s does not mention port %d", dsn, s.Port())
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	if err := s.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if pid := s.PID(); pid != 0 {
		t.Fatalf("PID() = %d after Stop", pid)
	}
	if err := s.Stop("immediate"); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	pid2 := s.PID()
	if pid2 == 0 || pid2 == pid1 {
		t.Fatalf("PID after Boot = %d, before = %d", pid2, pid1)
	}
	if err := s.Boot(ctx); err == nil {
		t.Fatal("Boot of a running server succeeded")
	}
	if got := queryString(t, pgtest.Connect(t, dsn), "SELECT v FROM t"); got != "kept" {
		t.Fatalf("row after immediate stop = %q", got)
	}

	if err := s.Restart(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	pid3 := s.PID()
	if pid3 == 0 || pid3 == pid2 {
		t.Fatalf("PID after Restart = %d, before = %d", pid3, pid2)
	}
	if got := queryString(t, pgtest.Connect(t, dsn), "SELECT v FROM t"); got != "kept" {
		t.Fatalf("row after fast restart = %q", got)
	}
	if err := s.Stop("bogus"); err == nil {
		t.Fatal("Stop with an unknown mode succeeded")
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s.PID() != 0 {
		t.Fatal("PID() != 0 after Close")
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir after Close: %v", err)
	}
	if err := s.Boot(ctx); err == nil {
		t.Fatal("Boot after Close succeeded")
	}
}

func TestStartSettings(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel()
	if os.Getenv("PGLEADER_TEST_DSN") != "" {
		t.Skip("PGLEADER_TEST_DSN is set")
	}
	ctx := context.Background()
	s, err := pgserver.Start(ctx, pgserver.Options{
		Settings: map[string]string{"max_connections": "42"},
		Log:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&got); err != nil || got != "42" {
		t.Fatalf("max_connections = %q (%v), want 42", got, err)
	}
	// Smart shutdown waits for clients to disconnect.
	conn.Close(ctx)
	if err := s.Stop("smart"); err != nil {
		t.Fatal(err)
	}
	if s.PID() != 0 {
		t.Fatal("server still running after Stop")
	}
}

// TestPdeathsig checks that the postmaster dies when the process that
// started it is SIGKILLed, so no server outlives a killed test binary.
func TestPdeathsig(t *testing.T) {
	pgtest.Slow(t)
	if os.Getenv("PGTEST_PDEATHSIG_CHILD") == "1" {
		pdeathsigChild()
		return
	}
	if os.Getenv("PGLEADER_TEST_DSN") != "" {
		t.Skip("PGLEADER_TEST_DSN is set")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPdeathsig$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGTEST_PDEATHSIG_CHILD=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "PGTEST pid=%d dir=%s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child did not report a postmaster pid")
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d still alive 15s after its parent was SIGKILLed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pdeathsigChild() {
	s, err := pgserver.Start(context.Background(), pgserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("PGTEST pid=%d dir=%s\n", s.PID(), filepath.Dir(s.DataDir()))
	time.Sleep(time.Hour) // wait to be killed
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
