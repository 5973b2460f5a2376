package election

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestWatchSocket: the watcher reports the peer closing a plain TCP connection and
// a TLS-wrapped one (it must look through tls.Conn to the socket), and stop ends it
// without a report.
func TestWatchSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"TCP", func(c net.Conn) net.Conn { return c }},
		{"TLS", func(c net.Conn) net.Conn { return tls.Client(c, &tls.Config{InsecureSkipVerify: true}) }},
	} {
		t.Run(tc.name+"PeerClose", func(t *testing.T) {
			c, s := pair()
			defer c.Close()
			fired := make(chan struct{})
			w := watchSocket(tc.wrap(c), func() { close(fired) })
			if w == nil {
				t.Fatal("no watcher for this connection")
			}
			defer w.stop()
			select {
			case <-fired:
				t.Fatal("fired before the peer closed")
			case <-time.After(20 * time.Millisecond):
			}
			s.Close()
			select {
			case <-fired:
			case <-time.After(5 * time.Second):
				t.Fatal("peer close not reported")
			}
		})
		t.Run(tc.name+"Stop", func(t *testing.T) {
			c, s := pair()
			defer s.Close()
			fired := make(chan struct{}, 1)
			w := watchSocket(tc.wrap(c), func() { fired <- struct{}{} })
			w.stop()
			w.stop()                          // twice is fine
			if err := c.Close(); err != nil { // not blocked by the watcher
				t.Fatal(err)
			}
			select {
			case <-fired:
				t.Fatal("stopped watcher reported a close")
			case <-time.After(20 * time.Millisecond):
			}
		})
	}
}
