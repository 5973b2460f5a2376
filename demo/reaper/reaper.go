// Package reaper cleans up after a process that may die without running its
// deferred cleanup (kill -9, a panic in a goroutine, an OOM kill): the demo starts
// a reaper child, tells it every process and directory it creates, and says "done"
// after its own orderly teardown. If the demo dies first, the reaper sees its stdin
// reach EOF without "done", kills the processes still alive and removes the
// directories. Processes are identified by pid and start time, so a reused pid is
// never killed.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package reaper

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command is the hidden subcommand of the pgleader binary that runs Serve.
const Command = "__reap"

// Reaper is the parent's handle on its reaper child.
type Reaper struct {
	mu  sync.Mutex
	w   io.WriteCloser
	cmd *exec.Cmd
}

// Start runs `bin __reap` in its own process group (a Ctrl-C meant for the parent
// must not kill it before it can clean up).
func Start(bin string) (*Reaper, error) {
	cmd := exec.Command(bin, Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start reaper: %w", err)
	}
	return &Reaper{w: w, cmd: cmd}, nil
}

// Process registers pid to be killed (SIGKILL) if the parent dies.
func (r *Reaper) Process(pid int) {
	if st := startTime(pid); st != "" {
		r.send(fmt.Sprintf("pid %d %s", pid, st))
	}
}

// Dir registers a directory to be removed if the parent dies (after the processes
// are gone).
func (r *Reaper) Dir(path string) { r.send("dir " + path) }

// Done tells the reaper the parent cleaned up itself, and waits for it to exit.
func (r *Reaper) Done() {
	r.send("done")
	r.mu.Lock()
	_ = r.w.Close()
	r.mu.Unlock()
	_ = r.cmd.Wait()
}

func (r *Reaper) send(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.w, line)
}

// Serve is the reaper's side: it reads registrations from in until EOF. After
// "done" it exits quietly; otherwise it kills the registered processes that are
// still the same processes, waits up to 10s for them to disappear, and removes the
// registered directories. log receives one line per action.
func Serve(in io.Reader, log io.Writer) {
	type proc struct {
		pid   int
		start string
	}
	var (
		procs []proc
		dirs  []string
	)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "done":
			return
		case len(f) == 3 && f[0] == "pid":
			if pid, err := strconv.Atoi(f[1]); err == nil {
				procs = append(procs, proc{pid, f[2]})
			}
		case len(f) >= 2 && f[0] == "dir":
			dirs = append(dirs, strings.TrimPrefix(sc.Text(), "dir "))
		}
	}
	var alive []int
	for _, p := range procs {
		if startTime(p.pid) == p.start {
			fmt.Fprintf(log, "reaper: killing orphan process %d\n", p.pid)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			alive = append(alive, p.pid)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range alive {
		for startTime(pid) != "" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, d := range dirs {
		fmt.Fprintf(log, "reaper: removing %s\n", d)
		_ = os.RemoveAll(d)
	}
}

// startTime returns field 22 of /proc/pid/stat (start time in clock ticks since
// boot), or "" when the process does not exist (or is a zombie).
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may contain spaces
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}
