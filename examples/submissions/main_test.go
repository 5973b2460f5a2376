package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type replica struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
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
	go func() { _ = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.done })
	return r
}

func (r *replica) role() string {
	resp, err := http.Get("http://" + r.addr + "/readyz")
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

func (r *replica) submit(payload, delay string) error {
	resp, err := http.Post("http://"+r.addr+"/submit?delay="+delay, "text/plain", strings.NewReader(payload))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExactlyOnceAcrossLeaderKill submits work through the followers only, kills
// the leader with SIGKILL while submissions keep coming (some due at once, some
// later), and checks that every submission ran exactly once, under the epoch
// that marked it done.
func TestExactlyOnceAcrossLeaderKill(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	bin := filepath.Join(t.TempDir(), "submissions")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	count := func(sql string) int {
		var n int
		if err := conn.QueryRow(context.Background(), sql).Scan(&n); err != nil {
			return -1
		}
		return n
	}

	rs := []*replica{startReplica(t, bin, dsn), startReplica(t, bin, dsn), startReplica(t, bin, dsn)}
	leader := func() *replica {
		for _, r := range rs {
			if r.role() == "leader" {
				return r
			}
		}
		return nil
	}
	waitFor(t, "a leader", 30*time.Second, func() bool { return leader() != nil })

	const total = 300
	var mu sync.Mutex
	var submitErrs []error
	submitted := make(chan struct{})
	killAt := make(chan struct{})
	go func() {
		defer close(submitted)
		for i := range total {
			if i == total/3 {
				close(killAt)
			}
			// Through a follower: whichever replica does not lead right now.
			var via *replica
			for _, r := range rs {
				if r.role() == "follower" {
					via = r
					break
				}
			}
			delay := "0s"
			if i%4 == 0 {
				delay = "700ms" // due after the kill for some: the next leader must find them
			}
			err := fmt.Errorf("no follower to submit through")
			if via != nil {
				err = via.submit(fmt.Sprintf("job %d", i), delay)
			}
			if err != nil {
				mu.Lock()
				submitErrs = append(submitErrs, err)
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	<-killAt
	victim := leader()
	if victim == nil {
		t.Fatal("no leader to kill")
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	<-submitted
	mu.Lock()
	if len(submitErrs) > 0 {
		t.Fatalf("%d submissions failed, first: %v", len(submitErrs), submitErrs[0])
	}
	mu.Unlock()
	waitFor(t, "every submission done", 60*time.Second, func() bool {
		return count("SELECT count(*) FROM submissions WHERE done_at IS NULL") == 0
	})

	if n := count("SELECT count(*) FROM submissions"); n != total {
		t.Fatalf("%d submissions stored, want %d", n, total)
	}
	if n := count("SELECT count(*) FROM executions"); n != total {
		t.Errorf("%d executions for %d submissions, want exactly one each", n, total)
	}
	if n := count(`SELECT count(*) FROM (SELECT submission_id FROM executions GROUP BY submission_id HAVING count(*) > 1) x`); n != 0 {
		t.Errorf("%d submissions ran more than once", n)
	}
	if n := count(`SELECT count(*) FROM submissions s JOIN executions x ON x.submission_id = s.id
	               WHERE x.epoch <> s.done_epoch OR x.node <> s.done_by`); n != 0 {
		t.Errorf("%d executions disagree with the epoch or node that marked their submission done", n)
	}
	if n := count("SELECT count(DISTINCT epoch) FROM executions"); n < 2 {
		t.Errorf("executions under %d epoch(s), want the killed leader's and its successor's", n)
	}
}
