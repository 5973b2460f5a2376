package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDemo runs a headless demo in the background and returns it once its nodes
// run, with the processes and directories it created.
func startDemo(t *testing.T) (cmd *exec.Cmd, pids []int, dirs []string, out *syncBuffer) {
	t.Helper()
	cmd = exec.Command(binary, "demo", "--headless", "--duration", "2m", "--listen", "off")
	cmd.Env = cleanEnv()
	out = &syncBuffer{}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pgLine := regexp.MustCompile(`throwaway PostgreSQL pid (\d+) in (\S+)`)
	scratchLine := regexp.MustCompile(`scratch (\S+) \(ready`)
	lines := make(chan string, 10000)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	var scratch string
	for scratch == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended early:\n%s", out.String())
			}
			if m := pgLine.FindStringSubmatch(l); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pids = append(pids, pid)
				dirs = append(dirs, m[2])
			}
			if m := scratchLine.FindStringSubmatch(l); m != nil {
				scratch = m[1]
				dirs = append(dirs, scratch)
			}
		case <-deadline:
			t.Fatalf("demo not ready within 60s:\n%s", out.String())
		}
	}
	if len(pids) != 1 {
		t.Fatalf("no PostgreSQL pid in the output:\n%s", out.String())
	}
	// The node processes: their command lines name the scratch directory.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), scratch) && strings.Contains(string(b), "node") {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			pids = append(pids, pid)
		}
	}
	if len(pids) < 4 { // PostgreSQL + 3 nodes
		t.Fatalf("found %d processes (%v), want PostgreSQL and 3 nodes", len(pids), pids)
	}
	return cmd, pids, dirs, out
}

// gone waits up to d until none of pids runs and none of dirs exists.
func gone(t *testing.T, pids []int, dirs []string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var left []string
		for _, pid := range pids {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
				left = append(left, "pid "+strconv.Itoa(pid))
			}
		}
		for _, dir := range dirs {
			if _, err := os.Stat(dir); err == nil {
				left = append(left, dir)
			}
		}
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("still there %v after the demo ended: %v", d, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDemoTeardown: SIGTERM ends the demo in order; kill -9 of the demo itself
// leaves no orphan process or directory either (its reaper cleans up).
func TestDemoTeardown(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	t.Run("SIGTERM", func(t *testing.T) {
		cmd, pids, dirs, out := startDemo(t)
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("demo after SIGTERM: %v\n%s", err, out.String())
		}
		exited := time.Since(start)
		gone(t, pids, dirs, 5*time.Second)
		t.Logf("SIGTERM → exit in %v", exited)
	})
	t.Run("KILL", func(t *testing.T) {
		cmd, pids, dirs, _ := startDemo(t)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		took := gone(t, pids, dirs, 15*time.Second)
		t.Logf("kill -9 of the demo → everything gone in %v", took)
	})
}
