package election

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sockWatch notices the peer closing a connection (the server terminating our
// backend, an idle-session timeout, a restart) at once, without reading from the
// connection: it polls the socket for POLLRDHUP in a goroutine of its own, so it
// works between statements and during them alike and never competes with pgx.
type sockWatch struct {
	pipe [2]int
	done chan struct{}
	once sync.Once
}

// watchSocket starts watching c and calls onClose (from the watcher's goroutine,
// after it has finished) when the peer closes. It returns nil when c exposes no
// file descriptor; heartbeats then remain the only detector.
func watchSocket(c net.Conn, onClose func()) *sockWatch {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &sockWatch{done: make(chan struct{})}
	if err := unix.Pipe2(w.pipe[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil
	}
	go func() {
		fired := false
		// Control holds a reference on the descriptor, so net.Conn.Close waits for
		// this poll to return: stop() must run before a deliberate close.
		_ = rc.Control(func(fd uintptr) {
			for {
				fds := []unix.PollFd{
					{Fd: int32(fd), Events: unix.POLLRDHUP},
					{Fd: int32(w.pipe[0]), Events: unix.POLLIN},
				}
				_, err := unix.Poll(fds, -1)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil || fds[1].Revents != 0 {
					return
				}
				if fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
					fired = true
					return
				}
			}
		})
		close(w.done)
		if fired {
			onClose()
		}
	}()
	return w
}

// stop ends the watcher and waits for it. Safe to call more than once and from
// onClose.
func (w *sockWatch) stop() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		_, _ = unix.Write(w.pipe[1], []byte{1})
		<-w.done
		unix.Close(w.pipe[0])
		unix.Close(w.pipe[1])
	})
}
