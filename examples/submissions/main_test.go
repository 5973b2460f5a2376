package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/replica"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func submitThrough(r *replica.Replica, payload, delay string) error {
	resp, err := http.Post("http://"+r.Addr+"/submit?delay="+delay, "text/plain", strings.NewReader(payload))
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

// TestExactlyOnceAcrossLeaderKill submits work through the followers only, kills
// the leader with SIGKILL while submissions keep coming (some due at once, some
// later), and checks that every submission ran exactly once, under the epoch
// that marked it done.
func TestExactlyOnceAcrossLeaderKill(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	bin := replica.Build(t)
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

	rs := []*replica.Replica{replica.Start(t, bin, dsn), replica.Start(t, bin, dsn), replica.Start(t, bin, dsn)}
	leader := func() *replica.Replica { return replica.Leader(rs...) }
	pgtest.WaitFor(t, "a leader", 30*time.Second, func() bool { return leader() != nil })

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
			var via *replica.Replica
			for _, r := range rs {
				if r.Role() == "follower" {
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
				err = submitThrough(via, fmt.Sprintf("job %d", i), delay)
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
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.Done
	<-submitted
	mu.Lock()
	if len(submitErrs) > 0 {
		t.Fatalf("%d submissions failed, first: %v", len(submitErrs), submitErrs[0])
	}
	mu.Unlock()
	pgtest.WaitFor(t, "every submission done", 60*time.Second, func() bool {
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
	               WHERE x.epoch <> s.Done_epoch OR x.node <> s.Done_by`); n != 0 {
		t.Errorf("%d executions disagree with the epoch or node that marked their submission done", n)
	}
	if n := count("SELECT count(DISTINCT epoch) FROM executions"); n < 2 {
		t.Errorf("executions under %d epoch(s), want the killed leader's and its successor's", n)
	}
}
