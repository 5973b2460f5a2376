// Package replica runs an example service as real processes for the examples'
// tests: build it, start replicas on free ports, ask each for its role through
// its /readyz (election.HealthHandler), and stop them.
package replica

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the example in the current directory and returns the binary.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Replica is one running process of an example.
type Replica struct {
	Cmd  *exec.Cmd
	Addr string        // its HTTP address (ADDR)
	Done chan struct{} // closed when it exited
	Err  error         // how it exited, once Done
}

// Start runs bin with DATABASE_URL=dsn and ADDR on a free loopback port; the
// test's cleanup kills it.
func Start(t *testing.T, bin, dsn string) *Replica {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "ADDR="+addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &Replica{Cmd: cmd, Addr: addr, Done: make(chan struct{})}
	go func() { r.Err = cmd.Wait(); close(r.Done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.Done })
	return r
}

// Role returns the replica's role in its (only) scope as /readyz reports it, ""
// when it does not answer.
func (r *Replica) Role() string {
	resp, err := http.Get("http://" + r.Addr + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct{ Scopes []struct{ Role string } }
	if json.NewDecoder(resp.Body).Decode(&h) != nil || len(h.Scopes) != 1 {
		return ""
	}
	return h.Scopes[0].Role
}

// Leader returns the replica among rs that reports leading, or nil.
func Leader(rs ...*Replica) *Replica {
	for _, r := range rs {
		if r.Role() == "leader" {
			return r
		}
	}
	return nil
}
