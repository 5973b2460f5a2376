package exporter_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestDefaultListenLoopback: unless told otherwise, the exporter is reachable
// from its own host only.
func TestDefaultListenLoopback(t *testing.T) {
	t.Parallel()
	host, port, err := net.SplitHostPort(exporter.DefaultListen)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || port != "9817" {
		t.Fatalf("DefaultListen %q: want a loopback address on port 9817", exporter.DefaultListen)
	}
}

// lockedBuffer is a log destination the collector's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connDetails are the parts of a DSN no endpoint may show.
type connDetails struct {
	user, password, database, host string
	port                           uint16
}

func (d connDetails) check(t *testing.T, where, body string) {
	t.Helper()
	for what, s := range map[string]string{"user": d.user, "password": d.password, "database": d.database,
		"host": d.host, "host:port": net.JoinHostPort(d.host, strconv.Itoa(int(d.port)))} {
		if strings.Contains(body, s) {
			t.Errorf("%s shows the %s (%q):\n%s", where, what, s, body)
		}
	}
	if regexp.MustCompile(fmt.Sprintf(`(^|[^0-9])%d([^0-9]|$)`, d.port)).MatchString(body) {
		t.Errorf("%s shows the port %d:\n%s", where, d.port, body)
	}
}

// exposedCollector runs a collector on dsn with the user replaced by a role of
// its own (LOGIN SUPERUSER, dropped at the end) and a password, and returns its
// handler (the exporter's own metrics only: what the exporter package emits),
// what the DSN holds, the role's name, and the log of the collector and Ready.
func exposedCollector(t *testing.T, dsn string, port int) (http.Handler, connDetails, *lockedBuffer) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("pgleader_exporter_secret_%d", time.Now().UnixNano()%1_000_000)
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role+" LOGIN SUPERUSER"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	u.User = url.UserPassword(role, "pw-Secret-42")
	if port != 0 {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	}
	cc, err := pgx.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	col, err := collector.New(collector.Config{ConnConfig: cc, PollInterval: 50 * time.Millisecond,
		Source: collector.SourceModeNotify, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- col.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("collector: %v", err)
		}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exporter.New(col, exporter.Options{}))
	h := exporter.Handler(reg, exporter.Ready(col, logger))
	return h, connDetails{user: role, password: "pw-Secret-42", database: cc.Database, host: cc.Host, port: cc.Port}, logs
}

// TestEndpointsShowNoConnectionDetails: whoever can reach the exporter learns
// nothing of how it connects (user, password, database, host, port), whether
// the database is readable, unreachable after a first read, or never reached;
// the details are in the log.
func TestEndpointsShowNoConnectionDetails(t *testing.T) {
	pgtest.Slow(t)
	every := func(t *testing.T, h http.Handler, d connDetails) {
		t.Helper()
		for _, path := range []string{"/", "/metrics", "/readyz", "/healthz"} {
			_, body := get(t, h, path)
			d.check(t, path, body)
		}
	}
	// readyz waits until /readyz answers code and a body that begins with want,
	// checks every endpoint, then the body itself.
	readyz := func(t *testing.T, h http.Handler, d connDetails, code int, want string) {
		t.Helper()
		pgtest.WaitFor(t, want, 15*time.Second, func() bool {
			c, body := get(t, h, "/readyz")
			return c == code && strings.HasPrefix(body, strings.TrimSpace(want))
		})
		every(t, h, d)
		if _, body := get(t, h, "/readyz"); body != want {
			t.Errorf("/readyz: %q, want %q", body, want)
		}
	}

	t.Run("ReadyThenUnreachable", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		h, d, logs := exposedCollector(t, dsn, 0)
		readyz(t, h, d, http.StatusOK, "ok\n")

		// The role may no longer log in, and its sessions end: every read fails
		// with an error that names the user and the database.
		admin, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		for _, q := range []string{"ALTER ROLE " + d.user + " NOLOGIN",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + d.user + "'"} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		readyz(t, h, d, http.StatusServiceUnavailable, "not ready: database unreachable\n")
		if code, body := get(t, h, "/metrics"); code != http.StatusOK || !strings.Contains(body, "\npgleader_collector_up 0\n") {
			t.Errorf("/metrics while unreachable: %d\n%s", code, body)
		}
		if l := logs.String(); !strings.Contains(l, "exporter not ready") || !strings.Contains(l, d.user) {
			t.Errorf("the log lacks the reason with its details:\n%s", l)
		}
	})

	t.Run("NeverReached", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		h, d, logs := exposedCollector(t, dsn, closed)
		pgtest.WaitFor(t, "the collector's first failed read", 15*time.Second, func() bool { return strings.Contains(logs.String(), "cannot read") })
		readyz(t, h, d, http.StatusServiceUnavailable, "not ready: no snapshot yet\n")
		if l := logs.String(); !strings.Contains(l, net.JoinHostPort(d.host, strconv.Itoa(int(d.port)))) {
			t.Errorf("the log lacks the address tried:\n%s", l)
		}
	})
}
