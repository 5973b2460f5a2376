package demo

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// link is a node's path to PostgreSQL in the demo: a TCP forwarder on
// 127.0.0.1:<free port> whose traffic the H key can silence. It does only what
// the demo needs — hang and heal — with the semantics of lab/faultnet's Hang and
// Heal, without toxiproxy: the demo ships in the production binary, which must
// not link the fault lab (chaos keeps faultnet and its other faults).
//
// While hung, every chunk read from either endpoint is discarded: writes succeed,
// reads block, no FIN and no RST arrive, and the link's own sockets keep
// acknowledging, so only application-level timeouts (heartbeats, deadlines)
// notice. A connection accepted during the hang is dialled through and carries
// nothing. Heal closes every connection that was open during the hang (its byte
// stream lost data and can never be consistent again), on both sides; later
// connections are forwarded untouched. A close on one side propagates to the
// other, hung or not.
type link struct {
	ln       net.Listener
	upstream string
	hung     atomic.Bool
	wg       sync.WaitGroup // the accept loop and every connection's copiers

	mu     sync.Mutex
	conns  map[*linkConn]bool // open connections → open during a hang
	closed bool
}

// linkConn is one forwarded connection: the client's socket and the upstream's.
type linkConn struct {
	client, server net.Conn
	once           sync.Once
}

func (c *linkConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// newLink starts a link listening on 127.0.0.1 at a free port, forwarding to
// upstream (host:port).
func newLink(upstream string) (*link, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, upstream: upstream, conns: map[*linkConn]bool{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the address clients connect to, "127.0.0.1:port".
func (l *link) Addr() string { return l.ln.Addr().String() }

func (l *link) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", l.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &linkConn{client: client, server: server}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.close()
			return
		}
		l.conns[c] = l.hung.Load()
		l.wg.Add(2)
		l.mu.Unlock()
		go l.copy(c, c.server, c.client)
		go l.copy(c, c.client, c.server)
	}
}

// copy forwards src to dst until either fails, discarding what it reads while
// the link hangs; then it closes both sides.
func (l *link) copy(c *linkConn, dst, src net.Conn) {
	defer l.wg.Done()
	defer func() {
		c.close()
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.hung.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF, a reset, or closed by Heal or Close
		}
	}
}

// errLinkClosed is returned by Hang and Heal after Close.
var errLinkClosed = errors.New("demo: link closed")

// Hang silences the link in both directions. Calling it while hung does nothing.
func (l *link) Hang() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLinkClosed
	}
	l.hung.Store(true)
	for c := range l.conns {
		l.conns[c] = true
	}
	return nil
}

// Heal ends the hang: the connections open during it are closed, new ones are
// forwarded. Calling it on a link that does not hang does nothing.
func (l *link) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLinkClosed
	}
	l.hung.Store(false)
	for c, hung := range l.conns {
		if hung {
			c.close()
		}
	}
	return nil
}

// Close stops listening, closes every connection and returns once every
// goroutine of the link has ended. Later calls do nothing.
func (l *link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.ln.Close()
	for c := range l.conns {
		c.close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
