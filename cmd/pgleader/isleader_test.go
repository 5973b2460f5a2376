package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestIsLeader: exit 0 while the node leads, 1 when it does not (or no node
// answers), 2 for bad input — a scope the node does not run included, which
// is a wrong flag, not "another node leads".
func TestIsLeader(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	sock := filepath.Join(t.TempDir(), "api.sock")
	addr := freeAddr(t)
	startBinary(t, "node", "--dsn", dsn, "--scope", "il", "--id", "il-a", "--listen", "unix:"+sock)
	startBinary(t, "node", "--dsn", dsn, "--scope", "il", "--id", "il-b", "--listen", addr, "--priority", "0")
	pgtest.WaitFor(t, "il-a to lead", 30*time.Second, func() bool {
		return pgleader(t, nil, "is-leader", "--api", "unix:"+sock, "--scope", "il").code == 0
	})
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"Leader", nil, []string{"--api", "unix:" + sock, "--scope", "il"}, 0, "il-a leads"},
		{"LeaderFromEnvironment", []string{"PGLEADER_LISTEN=unix:" + sock, "PGLEADER_SCOPE=il"}, nil, 0, "il-a leads"},
		{"Follower", nil, []string{"--api", addr, "--scope", "il"}, 1, "il-b is follower"},
		{"NoNode", nil, []string{"--api", "unix:" + sock + ".gone", "--scope", "il"}, 1, "no node answers"},
		{"UnknownScope", nil, []string{"--api", "unix:" + sock, "--scope", "nope"}, cli.ExitBadInput, `does not campaign for scope "nope"; check --scope`},
		{"UnknownScopeFollower", nil, []string{"--api", addr, "--scope", "nope"}, cli.ExitBadInput, "check --scope"},
		{"NoScope", nil, []string{"--api", addr}, cli.ExitBadInput, "needs --api ADDR"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := pgleader(t, tt.env, append([]string{"is-leader"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", r.code, r.stdout, r.stderr, tt.code, tt.want)
			}
			if r.code == cli.ExitBadInput && strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("bad input: stderr %q; want one line", r.stderr)
			}
		})
	}
}

// TestTransitionsFrozenNode: a watcher of /v1/transitions tells a frozen node
// by its silence. A live node's stream carries a line at least every second
// (keepalives, and a leader's trust events); stopped with SIGSTOP, it falls
// silent, and a watcher that treats more than 1 s of silence as "not leader"
// stops acting; SIGCONT brings the lines back.
func TestTransitionsFrozenNode(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	addr := freeAddr(t)
	p := startBinary(t, "node", "--dsn", dsn, "--scope", "fz", "--id", "fz-a", "--listen", addr)
	pgtest.WaitFor(t, "the node to lead", 30*time.Second, func() bool {
		r, err := http.Get("http://" + addr + "/v1/leader/fz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
	resp, err := http.Get("http://" + addr + "/v1/transitions?format=ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan map[string]any, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	// next is the next line, or nil after silence of d.
	next := func(d time.Duration) map[string]any {
		select {
		case m := <-lines:
			return m
		case <-time.After(d):
			return nil
		}
	}
	for trusts := 0; trusts < 3; {
		m := next(30 * time.Second)
		if m == nil {
			t.Fatal("a live leader's stream was silent for 30s")
		}
		if m["event"] == "trust" && m["trust_remaining_ms"].(float64) > 0 {
			trusts++
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.cmd.Process.Signal(syscall.SIGCONT)
	// Lines written before the stop may still be in flight; then silence.
	for inFlight := 0; next(1500*time.Millisecond) != nil; inFlight++ {
		if inFlight > 100 {
			t.Fatal("the stream of a stopped node never fell silent")
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if m := next(30 * time.Second); m == nil {
		t.Fatal("no line within 30s of SIGCONT")
	}
	select {
	case err := <-p.exited:
		t.Fatalf("the node exited: %v", err)
	default:
	}
}
