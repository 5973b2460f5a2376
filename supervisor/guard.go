package supervisor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/monotime"
)

// The guard is a small process between the supervisor and the child. It exists
// because the supervisor may die in ways that run none of its code (kill -9, the
// OOM killer), and the child must not run on without a leader:
//
//   - It reads commands from a pipe whose only writer is the supervisor. The
//     kernel closes that pipe when the supervisor dies, however it dies; the
//     guard reads EOF and kills the child's whole process group.
//   - It holds a deadline: the supervisor's gate deadline (CLOCK_MONOTONIC,
//     shared by every process of the host), renewed after each heartbeat. A
//     supervisor that is frozen (SIGSTOP, a stalled VM is different: it freezes
//     the guard too) cannot renew it, and the guard kills the group when the
//     trust window ends — before any successor may be elected.
//   - It is the child's parent and a child subreaper: when the child exits, the
//     rest of its process group and any descendant reparented to the guard are
//     killed, so nothing the command started outlives its term.
//   - The child gets PR_SET_PDEATHSIG=SIGKILL from the guard's (locked) thread:
//     should the guard itself be killed, the child dies with it, and the
//     supervisor, seeing the guard's report pipe close, kills the group.
//
// Commands, one line each on fd 3: "start <json env list>", "deadline <mono ns>"
// (0 disarms), "term" (SIGTERM to the group), "kill" (SIGKILL to the group).
// Reports, one line each on fd 4: "started <pid>", "failed <message>",
// "exited <code> <cause> <mono ns> <reaped ns>" where code is the exit status or
// 128+signal, cause is exit, signal, deadline, kill or supervisor_gone, mono ns
// (CLOCK_MONOTONIC) is when the guard sent SIGKILL to the group, or, for a child
// that ended otherwise, when the guard reaped it, and reaped ns is when it
// reaped it (the group killed).

// GuardArg is the hidden argument that makes the pgleader binary run as a guard
// (`pgleader <GuardArg> -- COMMAND ARGS…`).
const GuardArg = "internal-guard"

// RunGuard runs the guard for the command in args and returns the process's exit
// code. The caller must not have started any other work.
func RunGuard(args []string) int {
	// Never unlocked: the child's death signal follows the thread that forked it,
	// and this thread lives as long as the process.
	runtime.LockOSThread()
	// The guard acts on the supervisor's commands and its pipe's EOF only; a
	// terminal's SIGINT or a stray SIGTERM must not end it. Caught, not ignored:
	// an ignored signal stays ignored across exec, and a shell child could then
	// not trap the SIGTERM that asks it to drain.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	cmds := os.NewFile(3, "commands")
	reports := os.NewFile(4, "reports")
	if cmds == nil || reports == nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "pgleader: internal-guard is started by pgleader run, not by hand")
		return 2
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	g := &guard{args: args, reports: reports}
	return g.loop(cmds)
}

type guard struct {
	args    []string
	reports io.Writer
	pid     int // the running child's pid (and process group), 0 if none
	cause   string
	env     []string // the running child's environment
	killed  int64    // mono ns when the child's group was first sent SIGKILL (0: not yet)
}

func (g *guard) report(format string, a ...any) {
	fmt.Fprintf(g.reports, format+"\n", a...)
}

func (g *guard) loop(cmds io.Reader) int {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(cmds)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	deadline := time.NewTimer(time.Hour)
	deadline.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok { // the supervisor is gone
				g.supervisorGone()
				return 0
			}
			g.command(line, deadline)
		case <-deadline.C:
			g.killAll("deadline")
		case <-chld:
		}
		g.reap()
	}
}

func (g *guard) command(line string, deadline *time.Timer) {
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "start":
		g.start(arg)
	case "deadline":
		mono, err := strconv.ParseInt(arg, 10, 64)
		deadline.Stop()
		if err == nil && mono > 0 {
			deadline.Reset(time.Duration(mono - monotime.Now()))
		}
	case "term":
		if g.pid > 0 {
			_ = syscall.Kill(-g.pid, syscall.SIGTERM)
		}
	case "kill":
		g.killAll("kill")
	}
}

func (g *guard) start(envJSON string) {
	if g.pid > 0 {
		g.report("failed a child is already running (pid %d)", g.pid)
		return
	}
	var env []string
	if err := json.Unmarshal([]byte(envJSON), &env); err != nil {
		g.report("failed bad start command: %v", err)
		return
	}
	cmd := exec.Command(g.args[0], g.args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		g.report("failed %s", strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	g.pid = cmd.Process.Pid
	g.cause, g.env, g.killed = "", env, 0
	_ = cmd.Process.Release() // reaped by wait4 below, with every adopted descendant
	g.report("started %d", g.pid)
}

// supervisorGone kills the child's group, reaps the child (for at most a
// second) and, when the child's environment names an events file, records its
// exit there: nobody else is left to.
func (g *guard) supervisorGone() {
	pid := g.pid
	g.killAll("supervisor_gone")
	reaped := drain(pid)
	if pid == 0 {
		return
	}
	g.recordExit(pid, 128+int(syscall.SIGKILL), "supervisor_gone", g.endedAt(), reaped)
}

// recordExit appends the child's child_exited line to the events file its
// environment names (PGLEADER_EVENTS), for the exits the supervisor may never
// record: it died (supervisor_gone), or it is frozen (deadline) and may be
// killed before it thaws. The supervisor records every other exit.
func (g *guard) recordExit(pid, code int, cause string, mono, reaped int64) {
	env := map[string]string{}
	for _, kv := range g.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	path := env["PGLEADER_EVENTS"]
	if path == "" {
		return
	}
	epoch, _ := strconv.ParseInt(env["PGLEADER_EPOCH"], 10, 64)
	if w, err := eventlog.Open(path, env["PGLEADER_NODE_ID"]); err == nil {
		w.Child("child_exited", env["PGLEADER_SCOPE"], epoch, pid, code, cause, mono, reaped)
		_ = w.Close()
	}
}

// drain kills and reaps every descendant until none is left (for at most a
// second): as a child subreaper the guard adopts, one by one as their parents
// die, whatever the child started, even in a session of its own. It returns
// when pid (if not 0) was reaped.
func drain(pid int) (reaped int64) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err != nil: // ECHILD: no child left
			if reaped == 0 {
				reaped = monotime.Now()
			}
			return reaped
		case p > 0:
			if p == pid {
				reaped = monotime.Now()
			}
			continue
		}
		killDescendants()
		time.Sleep(time.Millisecond)
	}
	if reaped == 0 {
		reaped = monotime.Now()
	}
	return reaped
}

// killAll kills the child's process group and every other descendant, at once.
func (g *guard) killAll(cause string) {
	if g.pid > 0 {
		if g.cause == "" {
			g.cause = cause
		}
		if g.killed == 0 {
			g.killed = monotime.Now()
		}
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
	}
	killDescendants()
}

// endedAt is when the child stopped executing: when SIGKILL was sent to its
// group, if it was (a killed process runs no instruction after the signal is
// delivered, microseconds later; reaping it may take milliseconds more), else now.
func (g *guard) endedAt() int64 {
	if g.killed != 0 {
		return g.killed
	}
	return monotime.Now()
}

// reap collects every exited descendant; when the child itself has exited, it
// kills what remains of its group and its adopted descendants, and reports.
func (g *guard) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if pid != g.pid {
			if g.pid == 0 {
				killDescendants() // a straggler's death may have orphaned more
			}
			continue
		}
		code, cause := ws.ExitStatus(), "exit"
		if ws.Signaled() {
			code, cause = 128+int(ws.Signal()), "signal"
		}
		if g.cause != "" {
			cause = g.cause
		}
		_ = syscall.Kill(-g.pid, syscall.SIGKILL) // the rest of its group
		killDescendants()
		mono, reaped := g.endedAt(), monotime.Now()
		if cause == "deadline" {
			g.recordExit(g.pid, code, cause, mono, reaped)
		}
		g.pid = 0
		g.report("exited %d %s %d %d", code, cause, mono, reaped)
	}
}

// killDescendants SIGKILLs every process whose parent is this guard: as a child
// subreaper it adopts whatever the child started and left behind, including
// processes that moved to a session or group of their own.
func killDescendants() {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentOf(pid) == self {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentOf reads a process's parent pid from /proc/PID/stat (0 if unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
