package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// replica is one running process of the service.
type replica struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when it exited
	err  error         // how it exited, once done
}

func startReplica(t *testing.T, bin, dsn string) *replica {
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
	r := &replica{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.done })
	return r
}

// role returns the replica's role in "invoices" as its /readyz reports it.
func (r *replica) role() string {
	resp, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct {
		Scopes []struct{ Role string }
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil || len(h.Scopes) != 1 {
		return ""
	}
	return h.Scopes[0].Role
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHandover runs the service as two replicas, the way the README describes
// it: kill -9 of the leader hands the work to the other; SIGTERM of a leader
// exits 0 after handing over; every epoch's writes come from one process.
func TestHandover(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	bin := filepath.Join(t.TempDir(), "service")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	runs := func(where string, args ...any) int {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM invoice_runs "+where, args...).Scan(&n); err != nil {
			return 0 // the table appears with the first replica
		}
		return n
	}

	a, b := startReplica(t, bin, dsn), startReplica(t, bin, dsn)
	leaderOf := func(rs ...*replica) *replica {
		for _, r := range rs {
			if r.role() == "leader" {
				return r
			}
		}
		return nil
	}
	waitFor(t, "a leader", func() bool { return leaderOf(a, b) != nil })
	first := leaderOf(a, b)
	other := map[*replica]*replica{a: b, b: a}[first]
	waitFor(t, "the leader's first runs", func() bool { return runs("WHERE pid = $1", first.cmd.Process.Pid) >= 2 })

	// kill -9: the other replica takes over and runs the job.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	waitFor(t, "the survivor to lead and run", func() bool {
		return other.role() == "leader" && runs("WHERE pid = $1", other.cmd.Process.Pid) >= 2
	})

	// A new replica joins as a follower; SIGTERM to the leader hands over and exits 0.
	c := startReplica(t, bin, dsn)
	waitFor(t, "the new replica to follow", func() bool { return c.role() == "follower" })
	if err := other.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other.done:
		if other.err != nil {
			t.Fatalf("the leader exited with %v after SIGTERM, want 0", other.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30s of SIGTERM")
	}
	waitFor(t, "the follower to take over and run", func() bool {
		return runs("WHERE pid = $1", c.cmd.Process.Pid) >= 2
	})

	// Every epoch's writes come from one process, and three processes led.
	rows, err := conn.Query(context.Background(),
		"SELECT epoch, count(DISTINCT pid), min(pid) FROM invoice_runs GROUP BY epoch ORDER BY epoch")
	if err != nil {
		t.Fatal(err)
	}
	var epochs []string
	leaders := map[int]bool{}
	for rows.Next() {
		var epoch int64
		var pids, pid int
		if err := rows.Scan(&epoch, &pids, &pid); err != nil {
			t.Fatal(err)
		}
		if pids != 1 {
			t.Errorf("epoch %d was written by %d processes", epoch, pids)
		}
		leaders[pid] = true
		epochs = append(epochs, fmt.Sprint(epoch))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(leaders) != 3 {
		t.Errorf("%d processes wrote (epochs %v), want 3: first leader, survivor, successor", len(leaders), epochs)
	}
}
