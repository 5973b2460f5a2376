package reaper

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestServeCleansUpAfterEOF(t *testing.T) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	dir := t.TempDir() + "/scratch"
	if err := os.MkdirAll(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	in := fmt.Sprintf("pid %d %s\ndir %s\n", victim.Process.Pid, startTime(victim.Process.Pid), dir)
	var log strings.Builder
	Serve(strings.NewReader(in), &log) // EOF without "done": the parent died
	if err := victim.Wait(); err == nil {
		t.Fatal("the registered process was not killed")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still exists (%v)", dir, err)
	}
	if !strings.Contains(log.String(), "killing orphan process") {
		t.Errorf("log: %q", log.String())
	}
}

func TestServeDoneLeavesEverything(t *testing.T) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	dir := t.TempDir()
	Serve(strings.NewReader(fmt.Sprintf("pid %d %s\ndir %s\ndone\n", victim.Process.Pid, startTime(victim.Process.Pid), dir)), io.Discard)
	if startTime(victim.Process.Pid) == "" {
		t.Fatal("process killed after done")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dir removed after done: %v", err)
	}
}

func TestServeSparesReusedPid(t *testing.T) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	// Same pid, another start time: a different process now.
	Serve(strings.NewReader(fmt.Sprintf("pid %d 1\n", victim.Process.Pid)), io.Discard)
	if startTime(victim.Process.Pid) == "" {
		t.Fatal("killed a process whose start time did not match")
	}
}
