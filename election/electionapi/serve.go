package electionapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrRemote reports a --listen address that is not loopback.
var ErrRemote = errors.New("not a loopback address")

// Listen opens ADDR: "unix:PATH" (a Unix socket file of mode 0660, replacing a
// stale socket file but never a live one or any other file) or HOST:PORT, which
// must be a loopback address unless allowRemote. An abstract socket
// ("unix:@NAME") is refused: it has no file, so no permission keeps any local
// user out.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return listenUnix(path)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%q: want HOST:PORT (e.g. 127.0.0.1:8008) or unix:PATH", addr)
	}
	if !allowRemote {
		ip, err := netip.ParseAddr(host)
		if host == "localhost" {
			err, ip = nil, netip.MustParseAddr("127.0.0.1")
		}
		if err != nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("%s is %w: the API can resign and tells who leads; listen on 127.0.0.1 or unix:PATH, or pass --listen-allow-remote", net.JoinHostPort(host, port), ErrRemote)
		}
		host = ip.String()
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

// listenUnix creates the socket where no other user can reach it, then moves
// it into place: bind(2) creates the file with the umask's mode (0777 under
// umask 000), and a chmod after it leaves a moment in which anyone may
// connect. The socket is bound in a fresh 0700 directory beside PATH,
// narrowed to 0660 there, and renamed to PATH (atomic: PATH never exists with
// another mode); the directory is removed.
func listenUnix(path string) (net.Listener, error) {
	switch {
	case path == "":
		return nil, errors.New("empty socket path: use unix:/run/pgleader/NAME.sock")
	case strings.HasPrefix(path, "@"):
		return nil, fmt.Errorf("unix:%s is an abstract socket, which any local user can connect to (it has no file permissions): use a path, e.g. unix:/run/pgleader/%s.sock", path, strings.TrimPrefix(path, "@"))
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: choose another path", path)
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process listens on %s: stop it or choose another path", path)
		}
		// A stale socket of a process that died: the rename below replaces it.
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".pgleader-sock-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the socket beside %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // its name moves; socketListener unlinks PATH
	err = os.Chmod(tmp, 0o660)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Lstat(path)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &socketListener{UnixListener: ln, path: path, file: fi}, nil
}

// socketListener is a Unix listener whose socket file was renamed into place:
// Close removes the file, unless another has taken its path since.
type socketListener struct {
	*net.UnixListener
	path string
	file os.FileInfo
	once sync.Once
}

// Addr is the socket's path (not the temporary name it was bound under).
func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops listening and removes the socket file.
func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.file) {
			_ = os.Remove(l.path)
		}
	})
	return err
}

// Limits of the server Serve runs. A client of the local API is any process
// of the host (or, with --listen-allow-remote, of the network): whatever it
// opens, the node keeps file descriptors and memory for its database
// sessions.
const (
	// DefaultMaxConns is how many connections Serve holds at once by default.
	DefaultMaxConns = 128
	// refusers bounds the connections being answered 503 at once; beyond it an
	// excess connection is closed without an answer.
	refusers = 64
	// refuseWait bounds how long a refused connection may take to send its
	// request head before it is answered.
	refuseWait = time.Second
	// readTimeout bounds reading a request (the API takes no body worth the
	// name), writeTimeout writing an answer; a stream lifts both for itself
	// and bounds each of its writes by streamWriteTimeout.
	readTimeout  = 5 * time.Second
	writeTimeout = 5 * time.Second
	// idleTimeout closes a kept-alive connection that sends nothing more.
	idleTimeout = 10 * time.Second
	// maxHeaderBytes bounds a request head (net/http's default is 1 MiB).
	maxHeaderBytes = 16 << 10
)

// Serve serves h on ln until ctx ends, then closes the listener and every
// stream within a second. It holds at most maxConns connections at once
// (DefaultMaxConns when maxConns ≤ 0): a connection beyond them is answered 503
// at once and closed, never queued. A request must arrive within 5 s of its
// connection's start, an idle kept-alive connection is closed after 10 s, and
// request heads are limited to 16 KiB.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, maxConns int) error {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	lim := &connLimit{Listener: ln, max: maxConns, slots: make(chan struct{}, maxConns), refusing: make(chan struct{}, refusers)}
	defer lim.wg.Wait() // every refusal ends within refuseWait
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(io.Discard, "", 0), // a client's broken connection is not the node's news
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lim) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	<-done
	return err
}

// connLimit admits at most max connections at once (a slot each, freed when
// the server closes the connection). A connection beyond them is answered 503
// by one of at most refusers goroutines, or closed at once when they are all
// busy: the accept loop never waits, and the node never holds more than
// max + refusers descriptors for the API.
type connLimit struct {
	net.Listener
	max      int
	slots    chan struct{}
	refusing chan struct{}
	wg       sync.WaitGroup // refusals under way
}

// Accept returns the next connection that has a slot, refusing the others.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
		}
		select {
		case l.refusing <- struct{}{}:
			l.wg.Go(func() {
				defer func() { <-l.refusing }()
				l.refuse(c)
			})
		default:
			c.Close()
		}
	}
}

// refuse answers c 503 and closes it. It reads the request head first
// (briefly): closing a connection with unread data resets it, and the client
// might lose the answer.
func (l *connLimit) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	br := bufio.NewReaderSize(c, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil || len(bytes.TrimSpace(line)) == 0 {
			break
		}
	}
	body := fmt.Sprintf(`{"error":"too many connections to this node's local API (%d open): try again later, and close the connections you do not use (the limit is --listen-max-conns)"}`+"\n", l.max)
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// slotConn frees its slot once, when closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

// Close closes the connection and frees its slot.
func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// CloseWrite half-closes a TCP or Unix connection, as net/http does before it
// closes one whose request it did not read to the end (so the client gets the
// answer, not a reset).
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
