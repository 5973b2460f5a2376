package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"go.uber.org/goleak"

	"github.com/pgleader/pgleader/lab/pgbouncer"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// envDSN names the environment variable that points DSN at an existing
// server instead of starting one.
const envDSN = "PGLEADER_TEST_DSN"

// maxIdentLen is PostgreSQL's identifier limit in bytes (NAMEDATALEN-1).
const maxIdentLen = 63

var (
	sharedOnce sync.Once
	sharedMu   sync.Mutex
	shared     *pgserver.Server
	sharedErr  error
)

// sharedServer starts the per-binary server on first use.
func sharedServer() (*pgserver.Server, error) {
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s, err := pgserver.Start(ctx, pgserver.Options{})
		sharedMu.Lock()
		shared, sharedErr = s, err
		sharedMu.Unlock()
	})
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return shared, sharedErr
}

var leakIgnores []goleak.Option

// IgnoreLeaks tells Main's goroutine-leak check to ignore goroutines matching opts:
// for a third-party library known to leave goroutines behind (name it and say why
// where you call this). Call it from TestMain before Main.
func IgnoreLeaks(opts ...goleak.Option) { leakIgnores = append(leakIgnores, opts...) }

// Main is meant to be called from TestMain: it runs the tests, then closes
// the shared server (if DSN started one) and any other server left open,
// and, if everything passed, checks for leaked goroutines with goleak. It
// exits the process with the resulting code. While the tests run, SIGINT
// and SIGTERM close all servers and exit with status 1, so an interrupted
// run leaves no PostgreSQL process or data directory behind.
//
// cleanups run after the tests (and on an interrupt), before the process exits: a
// test binary cannot otherwise remove what its TestMain created, since Main exits.
func Main(m *testing.M, cleanups ...func()) {
	runCleanups := func() {
		for _, c := range cleanups {
			c()
		}
	}
	sigCh := make(chan os.Signal, 1)
	signal.Notify(sigCh, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	handlerDone := make(chan struct{})
	go func() {
		defer close(handlerDone)
		select {
		case sig := <-sigCh:
			fmt.Fprintf(os.Stderr, "pgtest: received %v; closing PostgreSQL servers\n", sig)
			closeAll(pgserver.LiveServers(), 15*time.Second)
			runCleanups()
			os.Exit(1)
		case <-quit:
		}
	}()

	code := m.Run()

	signal.Stop(sigCh)
	close(quit)
	<-handlerDone
	runCleanups()

	sharedMu.Lock()
	s := shared
	sharedMu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: closing shared server: %v\n", err)
			code = 1
		}
	}
	if left := pgserver.LiveServers(); len(left) > 0 {
		for _, s := range left {
			fmt.Fprintf(os.Stderr, "pgtest: server on port %d (%s) was never closed\n", s.Port(), s.DataDir())
		}
		closeAll(left, 60*time.Second)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(leakIgnores...); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutine leak after tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// closeAll closes servers concurrently, giving up after timeout.
func closeAll(servers []*pgserver.Server, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "%v\n", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		fmt.Fprintf(os.Stderr, "pgtest: gave up closing servers after %s\n", timeout)
	}
}

// DSN returns the connection string of a fresh, empty database for this
// test and drops the database (WITH (FORCE)) when the test ends. The
// database lives on a server shared by the whole test binary, started on
// first use; use Main in TestMain so it is stopped afterwards. If
// PGLEADER_TEST_DSN is set, the database is created on that server
// instead. DSN calls t.Fatal if no server can be had.
func DSN(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	name := dbName(t.Name())
	var adminDSN, dsn string
	if ext := os.Getenv(envDSN); ext != "" {
		var err error
		if dsn, err = withDatabase(ext, name); err != nil {
			t.Fatalf("pgtest: %s: %v", envDSN, err)
		}
		adminDSN = ext
	} else {
		s, err := sharedServer()
		if err != nil {
			t.Fatal(err)
		}
		adminDSN, dsn = s.DSN("postgres"), s.DSN(name)
	}

	ident := pgx.Identifier{name}.Sanitize()
	if err := pgserver.ExecAdmin(ctx, adminDSN, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropDatabase(ctx, adminDSN, name); err != nil {
			t.Errorf("pgtest: dropping test database: %v", err)
		}
	})
	return dsn
}

// dropDatabase drops the test database name. DROP DATABASE … WITH (FORCE)
// ends the database's sessions but refuses while a logical replication slot of
// it is active (55006): a walsender whose client hung up may not have exited
// yet (seen in make test: the collector's temporary slot, a moment after its
// stream closed). Such walsenders are terminated, and the drop is tried again
// until it succeeds or ctx ends.
func dropDatabase(ctx context.Context, adminDSN, name string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
	for {
		_, err := conn.Exec(ctx, drop)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "55006" {
			return err
		}
		if _, terr := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		                                WHERE database = $1 AND active_pid IS NOT NULL`, name); terr != nil {
			return errors.Join(err, terr)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NewServer starts a private server for a test that stops or restarts it (or
// needs pgserver.Options such as TLS), and closes it when the test ends. It skips the test when
// PGLEADER_TEST_DSN is set, and calls t.Fatal if the server cannot start.
func NewServer(t testing.TB, opts ...pgserver.Options) *pgserver.Server {
	t.Helper()
	if os.Getenv(envDSN) != "" {
		t.Skip("needs a private server it can restart; PGLEADER_TEST_DSN is set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := pgserver.Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Log == nil {
		o.Log = t.Logf
	}
	s, err := pgserver.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// dbName builds pgleader_test_<sanitized test name>_<random hex>, at most
// 63 bytes.
func dbName(testName string) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	const prefix = "pgleader_test_"
	suffix := "_" + hex.EncodeToString(b[:])
	var sb strings.Builder
	underscore := true // drop leading underscores
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
			underscore = false
		} else if !underscore {
			sb.WriteByte('_')
			underscore = true
		}
	}
	mid := sb.String()
	if room := maxIdentLen - len(prefix) - len(suffix); len(mid) > room {
		mid = mid[:room]
	}
	mid = strings.TrimRight(mid, "_")
	if mid == "" {
		return prefix + suffix[1:]
	}
	return prefix + mid + suffix
}

// withDatabase returns dsn (URL or keyword=value form) pointing at database
// name instead.
func withDatabase(dsn, name string) (string, error) {
	var out string
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		u.RawPath = ""
		out = u.String()
	} else {
		// In keyword=value form a later setting overrides an earlier one.
		out = strings.TrimSpace(dsn) + " dbname=" + name
	}
	cfg, err := pgconn.ParseConfig(out)
	if err != nil {
		return "", err
	}
	if cfg.Database != name {
		return "", fmt.Errorf("cannot point the connection string at database %s (got %q)", name, cfg.Database)
	}
	return out, nil
}

// NewStandby starts a streaming standby of primary (StartStandby) for a test that
// fails over, and closes it when the test ends.
func NewStandby(t testing.TB, primary *pgserver.Server) *pgserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	standby, err := primary.StartStandby(ctx, pgserver.Options{Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := standby.Close(); err != nil {
			t.Error(err)
		}
	})
	return standby
}

// MigratedDSN returns the DSN of a fresh database (DSN) with the pgleader schema
// applied.
func MigratedDSN(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	Migrate(t, dsn)
	return dsn
}

// Migrate applies the pgleader schema to the database dsn points at, or fails t.
func Migrate(t testing.TB, dsn string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond every few milliseconds until it holds, or fails t after d:
// tests wait on conditions with a deadline, never on a fixed sleep.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	WaitEvery(t, what, d, 2*time.Millisecond, cond)
}

// WaitEvery is WaitFor for a condition that costs something to check (a command
// to run, a page to scrape, a query): it checks cond every interval, so that
// checking does not take the CPU from what the test waits for.
func WaitEvery(t testing.TB, what string, d, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(interval)
	}
}

// Connect opens a connection to dsn for the test and closes it when the test
// ends; it fails t if the server does not answer within 10 s.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return ConnectConfig(t, cfg)
}

// ConnectConfig is Connect for a parsed (and perhaps edited) configuration.
func ConnectConfig(t testing.TB, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s:%d/%s as %s: %v", cfg.Host, cfg.Port, cfg.Database, cfg.User, err)
	}
	t.Cleanup(func() {
		// Bounded: a test may leave the server stopped or frozen.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// Logger is the logger of the components a test starts: silent, or with
// PGLEADER_TEST_LOG set, every record at debug level on stderr.
func Logger() *slog.Logger {
	if os.Getenv("PGLEADER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// JSONLines parses every line of the file at path as a JSON object, as an
// events file holds them (docs/design.md §5), and fails t on a line that is not
// one: tests check the file as it is on disk, field by field. A file that does
// not exist yet has no lines.
func JSONLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %d is not a JSON object: %v: %s", path, len(out)+1, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// NewBouncer starts a PgBouncer in pool mode (transaction, session, statement) in
// front of the server of dsn and returns dsn rewritten to go through it; the
// bouncer stops when the test ends. It fails the test when pgbouncer is missing
// (CI installs it: .ci/install-deps).
func NewBouncer(t testing.TB, dsn, mode string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, via, err := pgbouncer.Front(ctx, dsn, mode, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return via
}

// Slow skips t under -short: the test takes seconds (a cluster to elect, a
// fault to ride out, a process to start), so make test runs it and make
// test-short, the edit–test loop, does not.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
}
