package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/pgtest"
)

// binary is the pgleader executable built once by TestMain.
var binary string

// buildDirPrefix names the build directories of this test binary. pgtest.Main
// exits the process, so a run cannot remove its own directory afterwards; each
// run removes the directories of runs whose process is gone instead.
const buildDirPrefix = "pgleader-cmdtest-"

func TestMain(m *testing.M) {
	removeStaleBuilds()
	dir, err := os.MkdirTemp("", buildDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err == nil {
		binary = filepath.Join(dir, "pgleader")
		args := []string{"build", "-o", binary}
		if raceEnabled {
			args = append(args, "-race") // the engine's goroutines run in the child
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err = cmd.Run()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "building pgleader: %v\n", err)
		os.Exit(1)
	}
	pgtest.Main(m)
}

func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildDirPrefix+"*"))
	for _, d := range dirs {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), buildDirPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// cleanEnv is the environment of the child without any database setting of the
// test's own environment, plus extra. A race-enabled child skips the race
// runtime's one-second pause at a successful exit.
func cleanEnv(extra ...string) []string {
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// pgleader runs the binary to completion (at most a minute) with args.
func pgleader(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running pgleader %q: %v", args, err)
	}
	return r
}
