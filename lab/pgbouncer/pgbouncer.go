// Package pgbouncer runs a throwaway PgBouncer in front of a lab PostgreSQL, for
// the tests and benchmarks of pgleader behind a connection pooler: Debian's
// pgbouncer binary, on loopback, in the pooling mode asked for.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/lab/child"
	"github.com/pgleader/pgleader/lab/pgserver"
)

// ErrMissing: the pgbouncer binary is not installed.
var ErrMissing = errors.New("pgbouncer: the pgbouncer binary is not on PATH (/usr/sbin); install it (Debian/Ubuntu: apt-get install -y pgbouncer)")

// Options configure a Bouncer.
type Options struct {
	// Server is the PostgreSQL it pools (host and port of DSN's first host).
	ServerHost string
	ServerPort int
	// Mode is pool_mode: transaction (default), session or statement.
	Mode string
	// PoolSize is default_pool_size (default 20).
	PoolSize int
	// Log receives progress lines (optional).
	Log func(format string, args ...any)
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	Port int
	Mode string
	dir  string
	cmd  *exec.Cmd
	done <-chan error
}

// Binary returns the pgbouncer binary's path, or ErrMissing.
func Binary() (string, error) {
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", ErrMissing
}

// Start runs a PgBouncer on a free loopback port in front of the server, every
// database reachable as itself (connections log in to PostgreSQL as the postgres
// role), and waits until it accepts connections.
func Start(ctx context.Context, o Options) (*Bouncer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if o.Mode == "" {
		o.Mode = "transaction"
	}
	if o.PoolSize == 0 {
		o.PoolSize = 20
	}
	cred, err := pgserver.Credential()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "pgleader-pgbouncer-*")
	if err != nil {
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
`, o.ServerHost, o.ServerPort, port, o.Mode, o.PoolSize)
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(ini), 0o644); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(filepath.Join(dir, "pgbouncer.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, path)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	done, err := child.Start(cmd)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgbouncer: start: %w", err)
	}
	b := &Bouncer{Port: port, Mode: o.Mode, dir: dir, cmd: cmd, done: done}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			out, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgbouncer exited at start (%v): %s", err, strings.TrimSpace(string(out)))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Close()
			return nil, fmt.Errorf("pgbouncer: not accepting connections on 127.0.0.1:%d after 15s", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if o.Log != nil {
		o.Log("pgbouncer (%s pooling) on 127.0.0.1:%d in front of %s:%d", o.Mode, port, o.ServerHost, o.ServerPort)
	}
	return b, nil
}

// Front starts a bouncer in mode in front of the server of dsn (a URL DSN with
// host and port) and returns it with dsn rewritten to go through it.
func Front(ctx context.Context, dsn, mode string, log func(string, ...any)) (*Bouncer, string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return nil, "", fmt.Errorf("pgbouncer: needs a URL DSN with host and port (postgres://user@host:5432/db) to pool")
	}
	port, _ := strconv.Atoi(u.Port())
	b, err := Start(ctx, Options{ServerHost: u.Hostname(), ServerPort: port, Mode: mode, Log: log})
	if err != nil {
		return nil, "", err
	}
	via, err := b.DSN(dsn)
	if err != nil {
		_ = b.Close()
		return nil, "", err
	}
	return b, via, nil
}

// DSN is dsn (a DSN of the pooled server) rewritten to go through the bouncer:
// same user, database and parameters, the bouncer's host and port.
func (b *Bouncer) DSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", b.Port)
	return u.String(), nil
}

// Close stops the bouncer and removes its directory.
func (b *Bouncer) Close() error {
	if b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	return os.RemoveAll(b.dir)
}
