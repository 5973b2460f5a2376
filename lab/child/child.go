// Package child starts the lab's child processes (nodes, PostgreSQL, benchmark
// holders) so that they die with the process that started them and only then.
//
// Linux delivers a child's parent-death signal (SysProcAttr.Pdeathsig) when the
// *thread* that forked it exits, not the process. Go destroys a thread when a
// goroutine locked to it (runtime.LockOSThread) exits, and any goroutine may fork
// from any thread; so a child forked by an unlocked goroutine dies as soon as some
// unrelated goroutine that later locked that thread returns. That killed chaos
// nodes at random when the harness restarted PostgreSQL: the goroutine that had
// started the old postmaster, locked to its thread, ended with it, and the nodes
// forked earlier from that thread got SIGKILL.
//
// Start forks from a goroutine locked to its thread for the child's whole life, so
// the thread ends only after the child, and nothing else forks from it.
package child

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Start starts cmd (with whatever SysProcAttr it has, Pdeathsig included) and
// returns a channel that receives cmd.Wait's result once the child has exited. Do
// not call cmd.Wait yourself.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, after the child,
		// so its death signal can reach no one else.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// Alive reports whether pid is a live process: it exists and is not a zombie
// (a killed process that nobody reaped yet runs nothing).
func Alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}
