//go:build linux

package bench

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgleader/pgleader/internal/monotime"
)

// exitWatch times process exits: each process's pidfd, opened before the
// fault, polls readable when the process exits; a goroutine per process
// records that moment (monotonic).
type exitWatch struct {
	done map[string]chan int64
}

// watchExits starts timing the exits of pids (by name); a process that cannot
// be watched (already gone) is left out.
func watchExits(pids map[string]int) *exitWatch {
	w := &exitWatch{done: map[string]chan int64{}}
	for name, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		ch := make(chan int64, 1)
		w.done[name] = ch
		go func() {
			defer unix.Close(fd)
			deadline := monotime.Now() + int64(10*time.Second)
			for monotime.Now() < deadline {
				n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000)
				if err == unix.EINTR || (err == nil && n == 0) {
					continue
				}
				if err == nil {
					ch <- monotime.Now()
				}
				break
			}
			close(ch)
		}()
	}
	return w
}

// wait returns, for every watched process that exited within d, when.
func (w *exitWatch) wait(d time.Duration) map[string]int64 {
	out := map[string]int64{}
	timeout := time.After(d)
	for name, ch := range w.done {
		select {
		case at, ok := <-ch:
			if ok {
				out[name] = at
			}
		case <-timeout:
			return out
		}
	}
	return out
}
