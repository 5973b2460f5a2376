package child

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The main goroutine keeps the main thread (locked during init, it stays locked):
// Go never destroys the main thread, so a forking goroutine that ran there would
// leave its child alive. Left idle, the main thread ran such goroutines, and
// TestDeathSignalFollowsTheThread failed (once in a CI run, and within a
// -count=300 run here; 1,000 runs pass with the lock).
func init() { runtime.LockOSThread() }

func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// The hazard itself: a child's death signal follows the thread that forked it. A
// goroutine locked to its thread forks a child and returns without unlocking: Go
// destroys the thread, and the child is killed although this process lives on.
func TestDeathSignalFollowsTheThread(t *testing.T) {
	// Keep the forking goroutine off this goroutine's thread, which may be the main
	// thread: Go never destroys that one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := sleeper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- cmd.Start()
	}() // exits locked: the thread is destroyed
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err := make(chan error, 1)
	go func() { err <- cmd.Wait() }()
	select {
	case e := <-err:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v, want SIGKILL", e)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child outlived the thread that forked it: the hazard this package avoids is not there")
	}
}

// A child started through Start survives any number of threads being destroyed by
// other goroutines, and is reported when it exits.
func TestStartSurvivesOtherThreadsEnding(t *testing.T) {
	cmd := sleeper()
	waited, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			runtime.LockOSThread()
			time.Sleep(time.Millisecond)
		}) // each exits locked: its thread is destroyed
	}
	wg.Wait()
	select {
	case err := <-waited:
		t.Fatalf("child ended while this process lives: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported after kill")
	}
}
