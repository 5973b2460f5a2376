package electionapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionapi"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func fast(dsn, node string, scopes ...string) election.Config {
	return election.Config{DSN: dsn, NodeID: node, Scopes: scopes,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond,
		TrustWindow: 300 * time.Millisecond, SessionLease: 500 * time.Millisecond}
}

func start(t *testing.T, cfg election.Config) (*election.Elector, func()) {
	t.Helper()
	e, err := election.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return e, func() { cancel(); _ = e.Wait() }
}

func get(t *testing.T, url string) (int, electionapi.ScopeState) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st electionapi.ScopeState
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return resp.StatusCode, st
}

// postResign sends POST /v1/resign as a script does: with X-Pgleader.
func postResign(url string) (*http.Response, error) {
	req, err := http.NewRequest("POST", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Pgleader", "1")
	return http.DefaultClient.Do(req)
}

func TestHandler(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	a, stopA := start(t, fast(dsn, "api-a", "api-s"))
	defer stopA()
	if _, err := a.Scope("api-s").Await(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, stopB := start(t, fast(dsn, "api-b", "api-s"))
	defer stopB()
	var workUp atomic.Bool
	srvA := httptest.NewServer(electionapi.Handler(a, electionapi.Options{AllowResign: true, Ready: func(string) bool { return workUp.Load() }}))
	defer srvA.Close()
	srvB := httptest.NewServer(electionapi.Handler(b, electionapi.Options{}))
	defer srvB.Close()

	t.Run("LeaderIs200FollowerIs503", func(t *testing.T) {
		code, st := get(t, srvA.URL+"/v1/leader/api-s")
		if code != 200 || !st.Leading || st.Leader != "api-a" || st.Epoch == 0 || st.TrustRemainingMS <= 0 || st.TrustRemainingMS > 300 {
			t.Fatalf("leader: %d %+v; want 200, leading, epoch > 0, 0 < trust ≤ 300ms", code, st)
		}
		pgtest.WaitFor(t, "the follower to see the leader", 5*time.Second, func() bool {
			_, st := get(t, srvB.URL+"/v1/leader/api-s")
			return st.Leader == "api-a"
		})
		code, st = get(t, srvB.URL+"/v1/leader/api-s")
		if code != 503 || st.Leading || st.Role != election.RoleFollower || st.TrustRemainingMS != 0 {
			t.Fatalf("follower: %d %+v; want 503, follower, no trust", code, st)
		}
	})

	t.Run("ReadyNeedsTheWorkUp", func(t *testing.T) {
		if code, _ := get(t, srvA.URL+"/v1/ready/api-s"); code != 503 {
			t.Fatalf("leader whose work is down: /v1/ready %d, want 503", code)
		}
		workUp.Store(true)
		if code, _ := get(t, srvA.URL+"/v1/ready/api-s"); code != 200 {
			t.Fatalf("leader whose work is up: /v1/ready %d, want 200", code)
		}
		if code, _ := get(t, srvB.URL+"/v1/ready/api-s"); code != 503 {
			t.Fatalf("follower: /v1/ready %d, want 503", code)
		}
	})

	t.Run("UnknownScopeIs404", func(t *testing.T) {
		if code, _ := get(t, srvA.URL+"/v1/leader/nope"); code != 404 {
			t.Fatalf("unknown scope: %d, want 404", code)
		}
	})

	t.Run("ResignOnlyWhenAllowed", func(t *testing.T) {
		resp, err := postResign(srvB.URL + "/v1/resign/api-s")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("resign without AllowResign: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("TransitionsStream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srvB.URL+"/v1/transitions?format=ndjson", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		next := func() electionapi.Event {
			if !lines.Scan() {
				t.Fatalf("stream ended: %v", lines.Err())
			}
			var ev electionapi.Event
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				t.Fatalf("line %q: %v", lines.Text(), err)
			}
			return ev
		}
		if ev := next(); ev.Event != "state" || ev.Leader != "api-a" || ev.Role != election.RoleFollower {
			t.Fatalf("first event %+v, want b's state: follower of api-a", ev)
		}
		// a resigns through its API: b is elected and says so on the stream.
		resp2, err := postResign(srvA.URL + "/v1/resign/api-s")
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != 200 {
			t.Fatalf("resign: %d, want 200", resp2.StatusCode)
		}
		for {
			ev := next()
			if ev.Event == "elected" {
				if ev.Leader != "api-b" || ev.Scope != "api-s" {
					t.Fatalf("elected event %+v", ev)
				}
				break
			}
		}
		if code, st := get(t, srvB.URL+"/v1/leader/api-s"); code != 200 || st.Leader != "api-b" {
			t.Fatalf("after the resign, b: %d %+v; want 200, leader api-b", code, st)
		}
	})
}

func TestListen(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.invalid:0"} {
		if ln, err := electionapi.Listen(addr, false); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) accepted a non-loopback address", addr)
		} else if !errors.Is(err, electionapi.ErrRemote) {
			t.Errorf("Listen(%q) = %v, want ErrRemote", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		ln, err := electionapi.Listen(addr, false)
		if err != nil {
			if strings.Contains(addr, "::1") {
				continue // no IPv6 loopback here
			}
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		ln.Close()
	}

	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	ln, err := electionapi.Listen("unix:"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := electionapi.Listen("unix:"+sock, false); err == nil || !strings.Contains(err.Error(), "another process listens") {
		t.Fatalf("second Listen on a live socket: %v, want refused", err)
	}
	ln.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket file outlived its listener (%v)", err)
	}
	// A stale socket (its listener gone without unlinking it) is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = electionapi.Listen("unix:"+sock, false)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("dial the new socket: %v", err)
	} else {
		c.Close()
	}
	ln.Close()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("keep me"), 0o600)
	if _, err := electionapi.Listen("unix:"+file, false); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("the regular file was changed")
	}
}

// TestListenAbstractRefused: an abstract socket (unix:@NAME) has no file and so
// no permissions: any local user could connect. It is refused.
func TestListenAbstractRefused(t *testing.T) {
	ln, err := electionapi.Listen("unix:@pgleader-test", false)
	if err == nil {
		ln.Close()
		t.Fatal("Listen accepted an abstract socket")
	}
	if !strings.Contains(err.Error(), "abstract") || !strings.Contains(err.Error(), "unix:/") {
		t.Fatalf("Listen(unix:@…) = %v; want a refusal naming the abstract socket and a path to use instead", err)
	}
}

// TestListenSocketNeverWider: under umask 0 a socket file created by bind(2)
// is 0777 until something narrows it. The path must never be seen with a mode
// wider than 0660, not for a moment: a watcher polls it while Listen runs,
// many times over, and nothing Listen used is left beside it.
func TestListenSocketNeverWider(t *testing.T) {
	pgtest.Slow(t)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	var wider atomic.Int64
	var seen atomic.Int64
	for range 300 {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if fi, err := os.Lstat(sock); err == nil {
					seen.Add(1)
					if fi.Mode().Perm()&^0o660 != 0 {
						wider.Add(1)
					}
				}
			}
		}()
		ln, err := electionapi.Listen("unix:"+sock, false)
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		fi, err := os.Lstat(sock)
		if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm()&^0o660 != 0 {
			t.Fatalf("after Listen: %v %v; want a socket of mode 0660 or narrower", fi, err)
		}
		ln.Close()
		close(stop)
		<-done
	}
	if n := wider.Load(); n > 0 {
		t.Fatalf("the socket path was seen %d times (of %d) with a mode wider than 0660", n, seen.Load())
	}
	if seen.Load() == 0 {
		t.Fatal("the watcher never saw the socket: the test proves nothing")
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("left in the socket's directory: %v", left)
	}
}

// do sends one request to srv with the given Host (none: the URL's) and
// headers, and returns the status and the body's error field.
func do(t *testing.T, c *http.Client, method, url, host string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("%s %s: answered with Access-Control-Allow-Origin %q", method, url, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp.StatusCode >= 400 && (body.Error == "" || bytes.Count(b, []byte("\n")) != 1) {
		t.Errorf("%s %s: %d with body %q; want one JSON line naming the problem", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, body.Error
}

// TestCrossSiteRefused: a web page in a browser on the node's host can send
// requests to the API — a form POST with no CORS preflight, or reads through
// DNS rebinding (the page's own name, resolved to 127.0.0.1). The API answers
// only requests addressed to it by a loopback literal, localhost, the
// listening address or a configured name, and changes state only for requests
// that carry X-Pgleader and are not cross-site.
func TestCrossSiteRefused(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	e, stop := start(t, fast(dsn, "xs-a", "xs"))
	defer stop()
	if _, err := e.Scope("xs").Await(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(electionapi.Handler(e, electionapi.Options{AllowResign: true, Hosts: []string{"api.internal"}}))
	defer srv.Close()
	c := srv.Client()
	c.Timeout = 10 * time.Second // a stream answered 200 would never end
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	leading := func() bool { return e.Scope("xs").Role() == election.RoleLeader }

	t.Run("HostNames", func(t *testing.T) {
		for _, tt := range []struct {
			host string
			want int
		}{
			{"", 200}, // the URL's: 127.0.0.1:PORT
			{"localhost:" + port, 200},
			{"LOCALHOST", 200},
			{"127.0.0.2:" + port, 200},
			{"[::1]:" + port, 200},
			{"api.internal:" + port, 200},
			{"rebind.attacker.example:" + port, 421},
			{"rebind.attacker.example", 421},
			{"localhost.attacker.example:" + port, 421},
			{"192.0.2.7:" + port, 421}, // an address this connection did not arrive at
		} {
			code, msg := do(t, c, "GET", srv.URL+"/v1/scopes", tt.host, nil)
			if code != tt.want {
				t.Errorf("GET /v1/scopes with Host %q: %d (%s), want %d", tt.host, code, msg, tt.want)
			}
			if code == 421 && !strings.Contains(msg, "Host") {
				t.Errorf("Host %q refused with %q: want the message to name the Host", tt.host, msg)
			}
		}
		for _, path := range []string{"/v1/leader/xs", "/v1/ready/xs", "/v1/transitions", "/nope"} {
			if code, _ := do(t, c, "GET", srv.URL+path, "rebind.attacker.example:"+port, nil); code != 421 {
				t.Errorf("GET %s through a rebound name: %d, want 421", path, code)
			}
		}
	})

	t.Run("BrowserFormPost", func(t *testing.T) {
		// What a <form method=post action=http://127.0.0.1:PORT/v1/resign/xs> sends.
		for _, hdr := range []map[string]string{
			{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"},
			{"Content-Type": "text/plain", "Origin": "https://attacker.example"},                             // a browser without Sec-Fetch-*
			{"Content-Type": "text/plain", "Origin": "null"},                                                 // a sandboxed frame
			{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-site", "Origin": "http://localhost:3000"}, // another local web app
			{"Content-Type": "text/plain"}, // no browser headers, but no X-Pgleader either
			{"X-Pgleader": "1", "Origin": "https://attacker.example"},
			{"X-Pgleader": "1", "Sec-Fetch-Site": "cross-site"},
		} {
			code, msg := do(t, c, "POST", srv.URL+"/v1/resign/xs", "", hdr)
			if code != 403 {
				t.Errorf("POST /v1/resign/xs with %v: %d (%s), want 403", hdr, code, msg)
			}
		}
		if !leading() {
			t.Fatal("a refused request ended the term")
		}
		if code, _ := do(t, c, "OPTIONS", srv.URL+"/v1/resign/xs", "", map[string]string{
			"Origin": "https://attacker.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-pgleader"}); code < 400 {
			t.Errorf("CORS preflight: %d; want it refused", code)
		}
	})

	t.Run("ResignWithTheHeader", func(t *testing.T) {
		code, msg := do(t, c, "POST", srv.URL+"/v1/resign/xs", "", map[string]string{"X-Pgleader": "1", "Origin": srv.URL})
		if code != 200 {
			t.Fatalf("same-origin POST with X-Pgleader: %d (%s), want 200", code, msg)
		}
		pgtest.WaitFor(t, "the term to end", 5*time.Second, func() bool { return !leading() })
	})

	t.Run("UnixSocketAnyHost", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "api.sock")
		ln, err := electionapi.Listen("unix:"+sock, false)
		if err != nil {
			t.Fatal(err)
		}
		us := &http.Server{Handler: electionapi.Handler(e, electionapi.Options{})}
		served := make(chan error, 1)
		go func() { served <- us.Serve(ln) }()
		defer func() { us.Close(); <-served }()
		uc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
		defer uc.CloseIdleConnections()
		if code, msg := do(t, uc, "GET", "http://pgleader/v1/scopes", "", nil); code != 200 {
			t.Fatalf("GET over the socket with Host pgleader: %d (%s), want 200", code, msg)
		}
	})
}

// rawGet sends GET path on a new connection to addr and returns the
// connection and the status code of its answer (0: closed without one).
func rawGet(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // an answer that never comes fails the test, not the run
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		return c, nil, 0
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("GET %s: no answer within 20s: the connection was queued", path)
		}
		return c, br, 0
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		var body struct{ Error string }
		if json.Unmarshal(b, &body) != nil || body.Error == "" {
			t.Errorf("GET %s: %d with body %q; want a JSON error", path, resp.StatusCode, b)
		}
	}
	return c, br, resp.StatusCode
}

// TestLimits: a client of the API cannot take the node's file descriptors or
// memory. Connections beyond the limit are answered 503 at once (not queued),
// streams beyond theirs too, and a connection that never finishes its request
// is closed.
func TestLimits(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	e, stop := start(t, fast(dsn, "lim-a", "lim"))
	defer stop()
	if _, err := e.Scope("lim").Await(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := electionapi.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	const maxConns, maxStreams = 6, 3
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- electionapi.Serve(ctx, ln, electionapi.Handler(e, electionapi.Options{MaxStreams: maxStreams}), maxConns)
	}()
	defer func() { cancel(); <-served }()

	t.Run("Streams", func(t *testing.T) {
		var open []net.Conn
		for range maxStreams {
			c, _, code := rawGet(t, addr, "/v1/transitions?format=ndjson")
			if code != 200 {
				t.Fatalf("stream within the limit: %d", code)
			}
			open = append(open, c)
		}
		if _, _, code := rawGet(t, addr, "/v1/transitions?format=ndjson"); code != 503 {
			t.Fatalf("stream %d of %d allowed: %d, want 503", maxStreams+1, maxStreams, code)
		}
		if _, _, code := rawGet(t, addr, "/v1/leader/lim"); code != 200 {
			t.Fatalf("GET /v1/leader beside the streams: %d, want 200", code)
		}
		open[0].Close()
		pgtest.WaitFor(t, "a stream's place to free up", 10*time.Second, func() bool {
			c, _, code := rawGet(t, addr, "/v1/transitions?format=ndjson")
			c.Close()
			return code == 200
		})
		for _, c := range open {
			c.Close()
		}
	})

	t.Run("Connections", func(t *testing.T) {
		// Wait for the streams of the subtest before to be gone.
		var held []net.Conn
		pgtest.WaitFor(t, "every connection slot to be free", 20*time.Second, func() bool {
			for _, c := range held {
				c.Close()
			}
			held = held[:0]
			for range maxConns {
				c, _, code := rawGet(t, addr, "/v1/leader/lim") // kept alive: it keeps its slot
				if code != 200 {
					return false
				}
				held = append(held, c)
			}
			return true
		})
		for i := range 50 { // far beyond the limit; each answered at once
			if c, _, code := rawGet(t, addr, "/v1/scopes"); code != 503 {
				t.Fatalf("connection %d beyond the limit of %d: %d, want 503", i+1, maxConns, code)
			} else {
				c.Close()
			}
		}
		held[0].Close()
		pgtest.WaitFor(t, "a freed slot to serve again", 10*time.Second, func() bool {
			c, _, code := rawGet(t, addr, "/v1/scopes")
			c.Close()
			return code == 200
		})
		for _, c := range held {
			c.Close()
		}
	})

	t.Run("SlowRequestClosed", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /v1/scopes HTTP/1.1\r\nHost: 127.0.0.1\r\n") // and never the end of the head
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a request head that never ends kept its connection for 30s")
		}
	})
}

// streamLines reads /v1/transitions?format=ndjson from url as raw JSON objects.
type streamLines struct {
	t     *testing.T
	lines *bufio.Scanner
}

func openStream(t *testing.T, url string) *streamLines {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a silent stream fails the test
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/transitions?format=ndjson", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %s", resp.Status)
	}
	return &streamLines{t: t, lines: bufio.NewScanner(resp.Body)}
}

func (s *streamLines) next() map[string]any {
	s.t.Helper()
	if !s.lines.Scan() {
		s.t.Fatalf("stream ended: %v", s.lines.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(s.lines.Bytes(), &m); err != nil {
		s.t.Fatalf("line %q: %v", s.lines.Text(), err)
	}
	return m
}

// TestStreamTellsTrust: a watcher of /v1/transitions must be able to tell a
// live node from a frozen one, and how long this node's gate stays open
// without asking. Every stream carries a keepalive line at least every second
// ({"event":"keepalive","at":…}, nothing else), and a leader's stream a trust
// event per led scope with trust_remaining_ms computed when it is written;
// when the gate closes, one more trust event says 0.
func TestStreamTellsTrust(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	a, stopA := start(t, fast(dsn, "tr-a", "tr"))
	defer stopA()
	if _, err := a.Scope("tr").Await(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, stopB := start(t, fast(dsn, "tr-b", "tr"))
	defer stopB()
	srvA := httptest.NewServer(electionapi.Handler(a, electionapi.Options{}))
	defer srvA.Close()
	srvB := httptest.NewServer(electionapi.Handler(b, electionapi.Options{}))
	defer srvB.Close()

	t.Run("Leader", func(t *testing.T) {
		s := openStream(t, srvA.URL)
		if st := s.next(); st["event"] != "state" || st["role"] != "leader" || st["trust_remaining_ms"] == nil {
			t.Fatalf("first line %v; want the leader's state with trust_remaining_ms", st)
		}
		keepalives, trusts := 0, 0
		for keepalives < 3 || trusts < 3 {
			m := s.next()
			switch m["event"] {
			case "keepalive":
				keepalives++
				if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["at"])); err != nil || len(m) != 2 {
					t.Fatalf("keepalive line %v; want exactly {\"event\":\"keepalive\",\"at\":TIME}", m)
				}
			case "trust":
				trusts++
				ms, _ := m["trust_remaining_ms"].(float64)
				if m["scope"] != "tr" || m["role"] != "leader" || m["leader"] != "tr-a" || m["epoch"] == float64(0) || ms <= 0 || ms > 300 {
					t.Fatalf("trust line %v; want scope tr, leader tr-a, 0 < trust_remaining_ms ≤ 300 (the trust window)", m)
				}
			}
		}
		// The gate closes: a last trust event says so.
		if err := a.Scope("tr").Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		for {
			m := s.next()
			if m["event"] == "trust" && m["trust_remaining_ms"] == float64(0) {
				if m["role"] == "leader" {
					t.Fatalf("trust line %v: no trust left, yet role leader", m)
				}
				break
			}
			if m["event"] == "trust" && m["role"] != "leader" {
				t.Fatalf("trust line %v: not leading, yet trust left", m)
			}
		}
	})

	t.Run("FollowerHearsKeepalives", func(t *testing.T) {
		pgtest.WaitFor(t, "a node to lead again", 10*time.Second, func() bool {
			return a.Scope("tr").Role() == election.RoleLeader || b.Scope("tr").Role() == election.RoleLeader
		})
		follower := srvB.URL
		if b.Scope("tr").Role() == election.RoleLeader {
			follower = srvA.URL
		}
		s := openStream(t, follower)
		if st := s.next(); st["event"] != "state" || st["trust_remaining_ms"] != float64(0) {
			t.Fatalf("first line %v; want the follower's state with trust_remaining_ms 0", st)
		}
		for keepalives := 0; keepalives < 3; {
			switch m := s.next(); m["event"] {
			case "keepalive":
				keepalives++
			case "trust":
				if m["trust_remaining_ms"] != float64(0) {
					t.Fatalf("a follower's stream says %v", m)
				}
			}
		}
	})

	t.Run("ServerSentEvents", func(t *testing.T) {
		req, _ := http.NewRequest("GET", srvA.URL+"/v1/transitions", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sawComment := false; !sawComment; {
			if !sc.Scan() {
				t.Fatalf("stream ended: %v", sc.Err())
			}
			sawComment = sc.Text() == ": keepalive"
		}
	})
}

// TestStreamOutlivesServerTimeouts: Serve bounds reading and writing a request
// by 5 s each; a stream lifts them for itself and keeps going.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	e, stop := start(t, fast(dsn, "long-a", "long"))
	defer stop()
	ln, err := electionapi.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- electionapi.Serve(ctx, ln, electionapi.Handler(e, electionapi.Options{}), 0) }()
	defer func() { cancel(); <-served }()
	s := openStream(t, "http://"+ln.Addr().String())
	var first time.Time
	for {
		m := s.next()
		if m["event"] != "keepalive" {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["at"]))
		if first.IsZero() {
			first = at
		}
		if at.Sub(first) > 11*time.Second { // past the read and the write timeout, both
			return
		}
	}
}
