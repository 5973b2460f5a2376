package demo

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// startEcho starts a TCP echo server on 127.0.0.1; cleanup closes it and waits
// for its goroutines.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
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
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
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

// noLeaks checks, after every cleanup of t, that no goroutine started during t
// is left.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

func dialLink(t *testing.T, l *link) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echo writes msg and reads it back within timeout.
func echo(c net.Conn, msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo mismatch: " + string(buf))
	}
	return nil
}

func readErr(c net.Conn, timeout time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var b [64]byte
	_, err := c.Read(b[:])
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLinkHang: the H key's fault — silence without a close while hung, the
// hung connections closed by Heal, new ones forwarded — the behaviour
// lab/faultnet's TestHang holds toxiproxy to.
func TestLinkHang(t *testing.T) {
	noLeaks(t)
	l, err := newLink(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if host, _, err := net.SplitHostPort(l.Addr()); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", l.Addr())
	}
	c := dialLink(t, l)
	if err := echo(c, "hello", 2*time.Second); err != nil {
		t.Fatalf("echo before the hang: %v", err)
	}

	for range 2 { // idempotent
		if err := l.Hang(); err != nil {
			t.Fatal(err)
		}
	}
	if err := echo(c, "ping", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("echo while hung: %v, want a timeout", err)
	}
	if err := readErr(c, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("read while hung: %v, want a timeout (the connection stays open)", err)
	}
	c2 := dialLink(t, l)
	if err := echo(c2, "ping", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("echo on a connection made while hung: %v, want a timeout", err)
	}

	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	for i, hc := range []net.Conn{c, c2} {
		if err := readErr(hc, 2*time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("hung connection %d after Heal: %v, want io.EOF", i, err)
		}
	}
	if err := echo(dialLink(t, l), "again", 2*time.Second); err != nil {
		t.Fatalf("echo after Heal: %v", err)
	}
}

// TestLinkClose: Close ends every connection and refuses later faults; a second
// Close is a no-op.
func TestLinkClose(t *testing.T) {
	noLeaks(t)
	l, err := newLink(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dialLink(t, l)
	if err := echo(c, "hello", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := readErr(c, 2*time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("read after Close: %v, want io.EOF", err)
	}
	if err := l.Hang(); !errors.Is(err, errLinkClosed) {
		t.Errorf("Hang after Close: %v, want errLinkClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := newLink("no-port"); err == nil {
		t.Error("newLink(\"no-port\") succeeded")
	}
}
