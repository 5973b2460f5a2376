package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgleader/pgleader/election/electionapi"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// openFDs counts the open file descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rssMB is the resident set size of process pid, in MB.
func rssMB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// admitted is a stream the node served.
type admitted struct {
	c  net.Conn
	br *bufio.Reader
}

// streamOutcome is what one attacking connection got.
type streamOutcome int

const (
	gotStream streamOutcome = iota // 200: a stream
	got503                         // refused with 503
	gotClosed                      // closed without an answer
	gotOther                       // any other answer
)

// attackStream opens a connection to addr and asks for /v1/transitions. The
// connection stays open (the caller closes it). An answer that does not come
// within 20 s is a failure: excess connections must be refused, not queued.
func attackStream(addr string) (net.Conn, *bufio.Reader, streamOutcome, error) {
	c, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		return nil, nil, gotClosed, err
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /v1/transitions?format=ndjson HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		return c, nil, gotClosed, nil
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return c, nil, gotClosed, fmt.Errorf("no answer within 20s: the connection was queued")
	case err != nil:
		return c, nil, gotClosed, nil
	case resp.StatusCode == 200:
		_ = c.SetDeadline(time.Time{})
		return c, br, gotStream, nil
	case resp.StatusCode == 503:
		return c, nil, got503, nil
	}
	return c, nil, gotOther, fmt.Errorf("answered %s", resp.Status)
}

// TestListenHostile replays the attacker's trial against a real node: thousands
// of /v1/transitions connections once took every file descriptor of the node,
// which then could not reconnect after its session was lost and dropped out.
// The node runs with a limit of 1024 descriptors (the trial's 20k connections
// against a host's 20k, scaled down). Excess connections and streams are
// refused with 503 at once; the node's descriptors stay bounded; it keeps
// leading, and when its leadership session is terminated in the middle of the
// attack it reconnects and leads again; afterwards the API answers.
func TestListenHostile(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	addr := freeAddr(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	const fdLimit, attack = 1024, 3000
	p := startCommand(t, exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fdLimit), binary,
		"node", "--dsn", dsn, "--scope", "hostile", "--id", "hostile-node", "--listen", addr,
		"--events", events, "--events-heartbeats=false", "--log-level", "info"), "node")
	p.cmd.Env = cleanEnv()
	pid := p.cmd.Process.Pid
	db := pgtest.Connect(t, dsn)
	ctx := context.Background()

	// leader waits until the node leads the scope on a backend other than not.
	leader := func(what string, not int) (epoch int64, backend int) {
		t.Helper()
		pgtest.WaitFor(t, what, 60*time.Second, func() bool {
			var holder *string
			err := db.QueryRow(ctx, "SELECT holder, epoch, holder_pid FROM pgleader.leader_state WHERE scope = 'hostile'").Scan(&holder, &epoch, &backend)
			return err == nil && holder != nil && *holder == "hostile-node" && backend != 0 && backend != not
		})
		return epoch, backend
	}
	epoch1, backend1 := leader("the node to lead", 0)
	pgtest.WaitFor(t, "the API to answer", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/v1/leader/hostile")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	fdsBefore, rssBefore := openFDs(t, pid), rssMB(t, pid)

	// The attack: every connection asks for a stream and keeps its socket.
	var (
		mu       sync.Mutex
		held     []net.Conn
		streams  []admitted
		outcomes [4]int
		failures []string
	)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for range attack {
		sem <- struct{}{}
		mu.Lock()
		hopeless := len(failures) >= 20 // queued connections: no need to wait out the rest
		mu.Unlock()
		if hopeless {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c, br, got, err := attackStream(addr)
			mu.Lock()
			defer mu.Unlock()
			if c != nil {
				held = append(held, c)
			}
			if err != nil {
				failures = append(failures, err.Error())
			}
			outcomes[got]++
			if got == gotStream {
				streams = append(streams, admitted{c, br})
			}
		})
	}
	wg.Wait()
	fdsAttack, rssAttack := openFDs(t, pid), rssMB(t, pid)
	t.Logf("%d connections asking for a stream, all held open: %d streams, %d answered 503, %d closed unanswered, %d other",
		attack, outcomes[gotStream], outcomes[got503], outcomes[gotClosed], outcomes[gotOther])
	t.Logf("node descriptors %d → %d (limit %d), RSS %.1f → %.1f MB", fdsBefore, fdsAttack, fdLimit, rssBefore, rssAttack)
	if len(failures) > 0 {
		t.Errorf("%d connections failed, e.g.: %s", len(failures), failures[0])
	}
	if outcomes[gotStream] == 0 || outcomes[gotStream] > electionapi.DefaultMaxStreams {
		t.Errorf("%d streams served; want between 1 and the limit of %d", outcomes[gotStream], electionapi.DefaultMaxStreams)
	}
	if outcomes[got503] == 0 {
		t.Error("no connection was answered 503")
	}
	// The API's share: its connections and the refusals under way (64).
	if bound := fdsBefore + electionapi.DefaultMaxConns + 64; fdsAttack > bound {
		t.Errorf("the node holds %d descriptors during the attack; want at most %d", fdsAttack, bound)
	}

	// The attack alone changed nothing: the same term, on the same session.
	var holder string
	var epoch, backend int64
	if err := db.QueryRow(ctx, "SELECT holder, epoch, holder_pid FROM pgleader.leader_state WHERE scope = 'hostile'").Scan(&holder, &epoch, &backend); err != nil ||
		holder != "hostile-node" || epoch != epoch1 || backend != int64(backend1) {
		t.Errorf("after the attack: holder %q epoch %d backend %d (%v); want hostile-node still leading epoch %d on backend %d", holder, epoch, backend, err, epoch1, backend1)
	}

	// While the attack goes on (new connections all the time), the node's
	// leadership session is terminated: it must reconnect and lead again.
	stop := make(chan struct{})
	var churn, churn503 atomic.Int64
	var cwg sync.WaitGroup
	endChurn := sync.OnceFunc(func() { close(stop); cwg.Wait() })
	defer endChurn() // also when the test fails before
	for range 8 {
		cwg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, _, got, _ := attackStream(addr)
				if c != nil {
					c.Close()
				}
				churn.Add(1)
				if got == got503 {
					churn503.Add(1)
				}
			}
		})
	}
	if _, err := db.Exec(ctx, "SELECT pg_terminate_backend($1)", backend1); err != nil {
		t.Fatal(err)
	}
	epoch2, _ := leader("the node to lead again on a new session after pg_terminate_backend", backend1)
	endChurn()
	fdsAfter := openFDs(t, pid)
	t.Logf("after the termination: leading again (epoch %d) while %d more connections came (%d answered 503); descriptors %d",
		epoch2, churn.Load(), churn503.Load(), fdsAfter)
	if bound := fdsBefore + electionapi.DefaultMaxConns + 64; fdsAfter > bound {
		t.Errorf("the node holds %d descriptors after reconnecting; want at most %d", fdsAfter, bound)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("the node exited during the attack: %v", err)
	default:
	}

	// A stream that was admitted tells of the new term.
	if len(streams) > 0 {
		st := streams[0]
		_ = st.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			line, err := st.br.ReadBytes('\n')
			if err != nil {
				t.Fatalf("an admitted stream ended before telling of epoch %d: %v", epoch2, err)
			}
			var ev electionapi.Event
			if json.Unmarshal(line, &ev) == nil && ev.Event == "elected" && ev.Epoch == epoch2 {
				break
			}
		}
	}

	for _, c := range held {
		c.Close()
	}
	held = nil
	pgtest.WaitFor(t, "the API to answer once the attack ends", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/v1/leader/hostile")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	t.Logf("after the attack: descriptors %d, RSS %.1f MB", openFDs(t, pid), rssMB(t, pid))
}
