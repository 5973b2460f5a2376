// Package pgrun runs `pgleader run` and the programs of the examples in other
// languages (shell, Python, Node.js) as real processes, for those examples'
// tests: build pgleader, find the tools an example needs (skipped without
// them, except in CI), start processes with their output in files, kill them
// with SIGKILL, ask the local API who leads, and tell whether a process is
// gone.
package pgrun

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fast are timing flags for a test: heartbeats every 100 ms, a 300 ms trust
// window, a 400 ms session lease (I + T < W < L, as the engine requires).
var Fast = []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "100ms",
	"--trust-window", "300ms", "--session-lease", "400ms"}

// SessionLease and HeartbeatInterval are Fast's lease and interval, for bounds
// derived from them.
const (
	SessionLease      = 400 * time.Millisecond
	HeartbeatInterval = 100 * time.Millisecond
)

// Need returns the path of each program (a name looked up on PATH, or an
// absolute path). A missing one skips the test, except in CI (CI set), where it
// fails it: there a missing tool must not pass silently. install says how to
// get them (.ci/install-deps does it for CI).
func Need(t *testing.T, install string, programs ...string) []string {
	t.Helper()
	paths := make([]string, len(programs))
	for i, p := range programs {
		path, err := exec.LookPath(p)
		if err != nil && !strings.Contains(p, "/") {
			// A daemon such as haproxy lives in /usr/sbin, which a PATH may lack.
			path, err = exec.LookPath(filepath.Join("/usr/sbin", p))
		}
		if err != nil {
			Missing(t, fmt.Sprintf("%s not found (%v); %s", p, err, install))
		}
		paths[i] = path
	}
	return paths
}

// Missing skips the test for a missing tool or library, or fails it in CI.
func Missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("in CI: %s", why)
	}
	t.Skip(why)
}

// Build compiles pgleader into the test's temporary directory and returns it.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgleader")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/pgleader/pgleader/cmd/pgleader")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build pgleader: %v\n%s", err, out)
	}
	return bin
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proc is one running process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Done chan struct{} // closed when it exited
	Err  error         // how it exited, once Done
	log  string
}

// Start runs argv with env added to the test's environment, its stdout and
// stderr in a file (printed when the test fails). The test's cleanup stops it:
// SIGTERM, then SIGKILL after 10 s.
func Start(t *testing.T, name string, env []string, argv ...string) *Proc {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Done: make(chan struct{}), log: log}
	go func() { p.Err = cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.Done
		}
		if t.Failed() {
			t.Logf("--- %s (%s) output:\n%s", name, strings.Join(argv, " "), p.Output())
		}
	})
	return p
}

// Output returns what the process printed so far.
func (p *Proc) Output() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Kill9 sends SIGKILL to the process alone (not its children) and waits until
// it is reaped.
func (p *Proc) Kill9(t *testing.T) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", p.Name, err)
	}
	<-p.Done
}

// Wait waits up to d for the process to exit and returns its exit code.
func (p *Proc) Wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v; output:\n%s", p.Name, d, p.Output())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Children returns the ids of pid's child processes (from /proc).
func Children(pid int) []int {
	var kids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range dirs {
		_, ppid, ok := procStat(stat)
		if ok && ppid == pid {
			id, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
			kids = append(kids, id)
		}
	}
	return kids
}

// Gone reports whether process pid has exited: it no longer exists, or only as a
// zombie that nobody reaped yet (it runs no code).
func Gone(pid int) bool {
	state, _, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	return !ok || state == "Z" || state == "X"
}

// procStat reads a process's state and parent from /proc/PID/stat.
func procStat(path string) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

// Leader is the body of GET /v1/leader/{scope} on pgleader's local API.
type Leader struct {
	Node       string `json:"node"`
	Leading    bool   `json:"leading"`
	Leader     string `json:"leader"`
	Epoch      int64  `json:"epoch"`
	Supervisor struct {
		State string `json:"state"`
		PID   int    `json:"pid"`
		Epoch int64  `json:"epoch"`
	} `json:"supervisor"`
}

// client opens a connection per request: none is left idle, to a process the
// test killed, when the test binary checks for leaked goroutines.
var client = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// Ask asks the local API at addr (HOST:PORT) about scope. It fails when the API
// does not answer, or answers against its contract (200 exactly while leading).
func Ask(addr, scope string) (Leader, error) {
	var l Leader
	resp, err := client.Get("http://" + addr + "/v1/leader/" + scope)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return l, fmt.Errorf("GET /v1/leader/%s: %s: %w", scope, resp.Status, err)
	}
	if (resp.StatusCode == http.StatusOK) != l.Leading {
		return l, fmt.Errorf("GET /v1/leader/%s: %s with leading=%v", scope, resp.Status, l.Leading)
	}
	return l, nil
}

// Python returns Debian's /usr/bin/python3 once it can import psycopg2; the
// test is skipped otherwise, saying why (failed in CI, as Missing does).
func Python(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	Need(t, "install Debian's python3 (.ci/install-deps)", python)
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		Missing(t, "psycopg2 missing for "+python+": apt-get install -y python3-psycopg2 (.ci/install-deps): "+strings.TrimSpace(string(out)))
	}
	return python
}
