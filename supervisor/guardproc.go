package supervisor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// guardProc is the supervisor's end of a guard process (guard.go).
type guardProc struct {
	cmd     *exec.Cmd
	mu      sync.Mutex // serialises writes to cmds
	cmds    *os.File
	reports chan string // closed when the guard's report pipe closes
	exited  chan error  // the guard process's own exit
}

// startGuard starts argv (the pgleader binary with GuardArg, "--", COMMAND…) as
// the guard of one command.
func startGuard(argv []string) (*guardProc, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{cmdR, repW} // fds 3 and 4
	// No death signal: it follows the forking thread, not this process, and the
	// guard learns of the supervisor's death from its command pipe, reliably.
	err = cmd.Start()
	cmdR.Close()
	repW.Close()
	if err != nil {
		cmdW.Close()
		repR.Close()
		return nil, fmt.Errorf("start the guard process: %w", err)
	}
	g := &guardProc{cmd: cmd, cmds: cmdW, reports: make(chan string, 16), exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(repR)
		for sc.Scan() {
			g.reports <- sc.Text()
		}
		repR.Close()
		close(g.reports)
	}()
	go func() { g.exited <- cmd.Wait() }()
	return g, nil
}

func (g *guardProc) send(line string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.cmds.WriteString(line + "\n")
	return err
}

func (g *guardProc) start(env []string) error {
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return g.send("start " + string(b))
}

func (g *guardProc) deadline(mono int64) error {
	return g.send("deadline " + strconv.FormatInt(mono, 10))
}
func (g *guardProc) term() error { return g.send("term") }
func (g *guardProc) kill() error { return g.send("kill") }

// close ends the guard: it kills whatever still runs and exits.
func (g *guardProc) close() error {
	g.mu.Lock()
	err := g.cmds.Close()
	g.mu.Unlock()
	if werr := <-g.exited; werr != nil && err == nil {
		err = fmt.Errorf("guard process: %w", werr)
	}
	for range g.reports {
	}
	return err
}

// report is one parsed line of the guard's reports.
type report struct {
	kind   string // started, failed, exited; "" when the guard is gone
	pid    int
	code   int
	cause  string
	mono   int64 // exited: when the child stopped executing (SIGKILL sent, or reaped)
	reaped int64 // exited: when the guard reaped it
	msg    string
}

func parseReport(line string) report {
	kind, rest, _ := strings.Cut(line, " ")
	r := report{kind: kind}
	switch kind {
	case "started":
		r.pid, _ = strconv.Atoi(rest)
	case "failed":
		r.msg = rest
	case "exited":
		f := strings.Fields(rest)
		if len(f) >= 3 {
			r.code, _ = strconv.Atoi(f[0])
			r.cause = f[1]
			r.mono, _ = strconv.ParseInt(f[2], 10, 64)
			if len(f) >= 4 {
				r.reaped, _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
	}
	return r
}

// killGroup SIGKILLs a process group directly, without the round trip through
// the guard: the supervisor's fastest path when the gate closes. pgid is a group
// the guard reported started and not yet exited, so it names no other process.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
