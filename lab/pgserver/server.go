// Package pgserver runs throwaway PostgreSQL servers for the lab: tests (through
// lab/pgtest), the demo, chaos runs and benchmarks.
//
// Start creates a fresh data directory with initdb in a temporary directory
// and runs the postgres server binary directly as a child process, so the
// caller owns the postmaster and can stop it in any shutdown mode, boot it
// again on the same data directory and port, and remove everything with
// Close.
//
// Tests use it through lab/pgtest (Main, DSN, NewServer), which adds the
// testing.TB plumbing; this package links no test code into the pgleader binary.
//
// PostgreSQL refuses to run as root; when the current process is root the
// server runs as the "postgres" OS user.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/child"
)

// errNoBinaries is returned when the PostgreSQL server binaries are missing.
var errNoBinaries = errors.New("pgserver: PostgreSQL server binaries (initdb, postgres) not found via pg_config --bindir, /usr/lib/postgresql/*/bin or PATH; install them (Debian/Ubuntu: apt-get install -y postgresql) or set PGLEADER_TEST_DSN to an existing server")

const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	logTailLines = 20
)

// Options configures Start.
type Options struct {
	// Port to listen on 127.0.0.1; 0 picks a free port.
	Port int
	// Settings are extra server settings passed as -c name=value (override
	// defaults). The port is always Options.Port (or the picked free port).
	Settings map[string]string
	// Log receives progress lines (may be nil).
	Log func(format string, args ...any)
	// TLS makes the server accept TLS with a certificate for localhost and
	// 127.0.0.1 signed by a throwaway CA (Server.CAFile), for sslmode=verify-full.
	TLS bool
}

// Server is a PostgreSQL server running in a temporary directory, owned by
// this process. Its methods are safe for concurrent use.
type Server struct {
	bindir   string
	dir      string // temp dir holding data/, sock/ and postgres.log
	dataDir  string
	sockDir  string
	logPath  string
	port     int
	settings map[string]string
	tls      bool
	cred     *syscall.Credential // nil: run as the current user
	logf     func(format string, args ...any)

	opMu   sync.Mutex // serialises Boot, Stop and Close
	closed bool       // guarded by opMu

	mu   sync.Mutex // guards proc
	proc *proc
}

// proc is one postmaster process.
type proc struct {
	pid  int
	done chan struct{} // closed when the process has exited
	err  error         // wait error; valid after done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start runs initdb into a fresh temporary directory and boots a server on
// it, waiting until it accepts connections. Close the server to stop it and
// remove the directory.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bindir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := Credential()
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "pgleader-pg-*")
	if err != nil {
		return nil, fmt.Errorf("pgserver: create temp dir: %w", err)
	}
	s := &Server{
		bindir:   bindir,
		dir:      dir,
		dataDir:  filepath.Join(dir, "data"),
		sockDir:  filepath.Join(dir, "sock"),
		logPath:  filepath.Join(dir, "postgres.log"),
		port:     port,
		settings: opts.Settings,
		tls:      opts.TLS,
		cred:     cred,
		logf:     opts.Log,
	}
	register(s)
	if err := s.setup(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.Boot(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) log(format string, args ...any) {
	if s.logf != nil {
		s.logf(format, args...)
	}
}

// setup creates the directory layout and runs initdb.
func (s *Server) setup(ctx context.Context) error {
	if err := s.chown(s.dir); err != nil {
		return err
	}
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := s.chown(s.sockDir); err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bindir, "initdb"),
		"-D", s.dataDir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgserver: initdb %s: %w\n%s", s.dataDir, err, bytes.TrimSpace(out))
	}
	s.log("pgserver: initdb %s took %s", s.dataDir, time.Since(start).Round(time.Millisecond))
	if s.tls {
		return s.writeTLS()
	}
	return nil
}

// DSN returns a URL connection string for database dbname on this server.
func (s *Server) DSN(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, url.PathEscape(dbname))
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() int { return s.port }

// DataDir returns the server's data directory.
func (s *Server) DataDir() string { return s.dataDir }

// PID returns the postmaster's process id, or 0 when the server is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.pid
}

// args returns the postgres command line.
func (s *Server) args() []string {
	set := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": s.sockDir,
		"fsync":                   "off",
		"full_page_writes":        "off",
		"wal_level":               "logical",
		"max_wal_senders":         "10",
		"max_replication_slots":   "10",
		"max_connections":         "300",
		"shared_buffers":          "32MB",
		"log_min_messages":        "warning",
		"log_destination":         "stderr",
		"logging_collector":       "off",
	}
	if s.tls {
		set["ssl"] = "on"
		set["ssl_cert_file"] = "server.crt"
		set["ssl_key_file"] = "server.key"
	}
	for k, v := range s.settings {
		set[k] = v
	}
	set["port"] = strconv.Itoa(s.port)
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	args := []string{"-D", s.dataDir}
	for _, k := range names {
		args = append(args, "-c", k+"="+set[k])
	}
	return args
}

// Boot starts the server on its data directory and port and waits until it
// accepts connections. It fails if the server is already running.
func (s *Server) Boot(ctx context.Context) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.closed {
		return errors.New("pgserver: server is closed")
	}
	if s.PID() != 0 {
		return errors.New("pgserver: server is already running")
	}
	start := time.Now()
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitReady(ctx, p); err != nil {
		// Do not leave a half-started postmaster behind.
		_ = s.stopLocked("immediate")
		return err
	}
	s.log("pgserver: postgres ready on 127.0.0.1:%d (pid %d) in %s", s.port, p.pid, time.Since(start).Round(time.Millisecond))
	return nil
}

// spawn starts the postmaster through package child: from a goroutine locked to
// its OS thread for the postmaster's whole life. Pdeathsig fires when the thread
// that forked the child exits, so if the test binary dies, the postmaster gets
// SIGQUIT; and the thread ends only after the postmaster, killing nothing else.
func (s *Server) spawn() (*proc, error) {
	logFile, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgserver: open server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own copy of the descriptor
	if err := s.chown(s.logPath); err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(s.bindir, "postgres"), s.args()...)
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGQUIT,
	}
	waited, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("pgserver: start postgres: %w", err)
	}
	p := &proc{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = <-waited
		close(p.done)
	}()
	return p, nil
}

// waitReady polls until the server accepts connections, the process exits,
// ctx ends, or readyTimeout passes.
func (s *Server) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	dsn := s.DSN("postgres")
	delay := 10 * time.Millisecond
	var lastErr error
	for {
		attemptCtx, attemptCancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(attemptCtx, dsn)
		if err == nil {
			err = conn.Close(attemptCtx)
		}
		attemptCancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-p.done:
			return fmt.Errorf("pgserver: postgres exited during startup (%v); last lines of %s:\n%s", p.err, s.logPath, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgserver: postgres not ready on port %d: %w (last error: %v); last lines of %s:\n%s", s.port, ctx.Err(), lastErr, s.logPath, s.logTail())
		case <-time.After(delay):
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

// logTail returns the last lines of postgres.log.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// Stop shuts the server down and waits for the postmaster to exit. mode is
// "smart" (SIGTERM: wait for clients), "fast" (SIGINT: disconnect clients,
// checkpoint) or "immediate" (SIGQUIT: no checkpoint, crash recovery on the
// next Boot). If the postmaster has not exited after 30 s its process group
// is killed. Stopping a stopped server does nothing.
func (s *Server) Stop(mode string) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return s.stopLocked(mode)
}

func (s *Server) stopLocked(mode string) error {
	var sig syscall.Signal
	switch mode {
	case "smart":
		sig = syscall.SIGTERM
	case "fast":
		sig = syscall.SIGINT
	case "immediate":
		sig = syscall.SIGQUIT
	default:
		return fmt.Errorf("pgserver: unknown stop mode %q (want smart, fast or immediate)", mode)
	}
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	start := time.Now()
	if err := syscall.Kill(p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgserver: signal postgres (pid %d): %w", p.pid, err)
	}
	select {
	case <-p.done:
		s.log("pgserver: postgres (pid %d) stopped (%s) in %s", p.pid, mode, time.Since(start).Round(time.Millisecond))
		return nil
	case <-time.After(stopTimeout):
	}
	// Kill the whole group: the postmaster and its backends.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("pgserver: postgres (pid %d) did not exit after SIGKILL", p.pid)
	}
	return fmt.Errorf("pgserver: postgres (pid %d) did not stop (%s) within %s; killed it", p.pid, mode, stopTimeout)
}

// Restart stops the server in the given mode and boots it again.
func (s *Server) Restart(ctx context.Context, mode string) error {
	if err := s.Stop(mode); err != nil {
		return err
	}
	return s.Boot(ctx)
}

// CreateDatabase creates database name on the server.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return ExecAdmin(ctx, s.DSN("postgres"), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// Close stops the server immediately and removes its temporary directory.
// It is idempotent.
func (s *Server) Close() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	defer unregister(s)
	stopErr := s.stopLocked("immediate")
	if err := os.RemoveAll(s.dir); err != nil {
		return errors.Join(stopErr, fmt.Errorf("pgserver: remove %s: %w", s.dir, err))
	}
	return stopErr
}

// ExecAdmin runs one statement on a fresh connection to dsn.
func ExecAdmin(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("pgserver: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgserver: %s: %w", sql, err)
	}
	return nil
}

// chown hands path to the server's OS user when running as root.
func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return nil
}

// Credential is the credential the lab runs PostgreSQL and PgBouncer with: the
// postgres OS user when this process is root (both refuse to run as root), nil
// otherwise.
func Credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root and PostgreSQL refuses to run as root, but there is no postgres OS user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgserver: postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgserver: postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// childEnv is the environment for initdb and postgres: ours without PG*
// variables (which could redirect them), with LC_ALL=C.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
)

// findBinDir locates the directory holding initdb and postgres.
func findBinDir() (string, error) {
	binDirOnce.Do(func() { binDir, binDirErr = lookBinDir() })
	return binDir, binDirErr
}

func lookBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" && has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if dir := filepath.Dir(p); has(dir) {
			return dir, nil
		}
	}
	return "", errNoBinaries
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths numerically.
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, ea := strconv.Atoi(va[i])
		nb, eb := strconv.Atoi(vb[i])
		if ea != nil || eb != nil {
			if va[i] != vb[i] {
				return va[i] < vb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// live holds every server started and not yet closed, so the signal handler
// installed by pgtest.Main can clean them all up.
var (
	liveMu sync.Mutex
	live   = map[*Server]struct{}{}
)

func register(s *Server) {
	liveMu.Lock()
	live[s] = struct{}{}
	liveMu.Unlock()
}

func unregister(s *Server) {
	liveMu.Lock()
	delete(live, s)
	liveMu.Unlock()
}

// LiveServers returns every server started and not yet closed.
func LiveServers() []*Server {
	liveMu.Lock()
	defer liveMu.Unlock()
	out := make([]*Server, 0, len(live))
	for s := range live {
		out = append(out, s)
	}
	return out
}

// BinDir returns the directory of the PostgreSQL binaries the servers run (initdb,
// postgres), where their client tools (pg_dump, psql) are too.
func BinDir() (string, error) { return findBinDir() }
