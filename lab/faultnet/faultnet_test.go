package faultnet

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// toxiproxy v2.12.0 starts no goroutine owned by a global (its metrics registry is
// per server and unused here), so nothing is ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startEcho starts a TCP echo server on 127.0.0.1 that closes a connection when its
// client does. Cleanup closes the listener and every connection and waits for the
// server's goroutines.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(t.Name(), startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back, all within timeout. It returns the time
// taken and the first error.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write([]byte(msg)); err != nil {
		return time.Since(start), err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return time.Since(start), err
	}
	if string(buf) != msg {
		return time.Since(start), errors.New("echo mismatch: got " + string(buf))
	}
	return time.Since(start), nil
}

func mustEcho(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := roundTrip(c, "hello", 2*time.Second); err != nil {
		t.Fatalf("echo through proxy: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readErr reads from c with the given deadline and returns the error (nil if data
// arrived).
func readErr(c net.Conn, timeout time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var b [64]byte
	_, err := c.Read(b[:])
	return err
}

func TestForward(t *testing.T) {
	p := newProxy(t)
	if host, _, err := net.SplitHostPort(p.Addr()); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", p.Addr())
	}
	c := dial(t, p)
	mustEcho(t, c)
	mustEcho(t, c)
}

func TestHang(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c)

	if err := p.Hang(); err != nil {
		t.Fatal(err)
	}
	if err := p.Hang(); err != nil { // idempotent
		t.Fatalf("second Hang: %v", err)
	}
	if _, err := roundTrip(c, "ping", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("round trip during Hang: err = %v, want a timeout", err)
	}
	// Still open: another read times out instead of returning EOF or a reset.
	if err := readErr(c, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("read during Hang: err = %v, want a timeout (connection must stay open)", err)
	}
	// New connections are accepted but carry nothing.
	c2 := dial(t, p)
	if _, err := roundTrip(c2, "ping", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("round trip on a new connection during Hang: err = %v, want a timeout", err)
	}

	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	// Observed (and what toxiproxy v2.12.0's source says): removing the timeout
	// toxic closes the links it was on, so the hung connections end with a FIN.
	for i, hc := range []net.Conn{c, c2} {
		if err := readErr(hc, 2*time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("hung connection %d after Heal: read err = %v, want io.EOF", i, err)
		}
	}
	mustEcho(t, dial(t, p))
}

func TestLatency(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c)

	if err := p.Latency(100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []net.Conn{c, dial(t, p)} {
		d, err := roundTrip(conn, "slow", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if d < 100*time.Millisecond {
			t.Errorf("round trip with 100ms latency took %v, want >= 100ms", d)
		}
		t.Logf("round trip with Latency(100ms, 0): %v", d)
	}

	// Replacing and removing the latency fault keeps the connection working.
	if err := p.Latency(10*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, c)
	if err := p.Latency(0, 0); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, c)
	if err := p.Latency(50*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, c) // latency alone does not kill connections on Heal

	if err := p.Latency(-time.Millisecond, 0); err == nil {
		t.Error("Latency(-1ms, 0) succeeded, want an error")
	}
}

func isResetOrEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func TestReset(t *testing.T) {
	p := newProxy(t)
	old := dial(t, p)
	mustEcho(t, old)

	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.Reset(); err != nil { // idempotent
		t.Fatalf("second Reset: %v", err)
	}
	// A connection opened before Reset: closed on its next data.
	if _, err := roundTrip(old, "x", 2*time.Second); !isResetOrEOF(err) {
		t.Fatalf("round trip on an existing connection after Reset: err = %v, want EOF or ECONNRESET", err)
	} else {
		t.Logf("existing connection after Reset: %v", err)
	}
	// A connection opened while Reset is active: aborted on its first data.
	fresh := dial(t, p)
	if _, err := roundTrip(fresh, "x", 2*time.Second); !isResetOrEOF(err) {
		t.Fatalf("round trip on a new connection during Reset: err = %v, want EOF or ECONNRESET", err)
	} else {
		t.Logf("new connection during Reset: %v", err)
	}

	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, dial(t, p))
}

func TestClose(t *testing.T) {
	p, err := New("close", startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	mustEcho(t, c)
	if err := p.Latency(time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}

	if err := p.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := readErr(c, 2*time.Second); !isResetOrEOF(err) {
		t.Errorf("proxied connection after Close: read err = %v, want EOF or ECONNRESET", err)
	}
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c2.Close()
		t.Error("dial after Close succeeded")
	}
	for name, f := range map[string]func() error{
		"Hang": p.Hang, "Reset": p.Reset, "Heal": p.Heal,
		"Latency": func() error { return p.Latency(time.Millisecond, 0) },
	} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

func TestNewBadUpstream(t *testing.T) {
	if p, err := New("bad", "no-port"); err == nil {
		_ = p.Close()
		t.Fatal("New with an upstream without a port succeeded")
	}
}

// TestLogEnv only checks that enabling logs does not break anything.
func TestLogEnv(t *testing.T) {
	if os.Getenv(LogEnv) == "" {
		t.Setenv(LogEnv, "error")
	}
	p := newProxy(t)
	mustEcho(t, dial(t, p))
}
