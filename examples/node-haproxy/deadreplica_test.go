package nodehaproxy

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgleader/pgleader/examples/internal/pgrun"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// stallBound is what haproxy.cfg promises clients when the leader's whole
// replica dies: every client is answered again within it.
const stallBound = 500 * time.Millisecond

// request is one submission a client sent through HAProxy.
type request struct {
	start, end time.Time
	ok         bool
	status     string // the status line, or the error
}

// TestHAProxyDeadReplica kills the leader's whole replica — its front and its
// pgleader run, kill -9 both — while clients submit through HAProxy without
// pause (a failed request is sent again after 10 ms), and measures how long
// each client stalls: from the kill to its first submission answered 200 after
// it. haproxy.cfg's short timeout connect, retries with option redispatch and
// on-marked-down shutdown-sessions bound it; the test asserts stallBound, and
// that every submission was executed exactly once.
func TestHAProxyDeadReplica(t *testing.T) {
	pgtest.Slow(t)
	x := start(t)
	first, l1 := x.settle()

	const clients = 4
	results := make([][]request, clients)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := request{start: time.Now()}
				resp, err := x.client.Post("http://"+x.bind+"/submit", "text/plain", strings.NewReader(fmt.Sprintf("client %d job %d", c, i)))
				r.end = time.Now()
				if err != nil {
					r.status = err.Error()
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.ok, r.status = resp.StatusCode == http.StatusOK, resp.Status
				}
				results[c] = append(results[c], r)
				time.Sleep(20 * time.Millisecond) // the client's pace (and its retry after a failure)
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	pgtest.WaitFor(t, "the first leader's executions", 20*time.Second, func() bool {
		return x.count("SELECT count(*) FROM executions WHERE epoch = $1", l1.Epoch) >= 20
	})

	// The leader's host dies: its front and its pgleader run (whose guard
	// kills its executor).
	killed := time.Now()
	first.frontProc.Kill9(t)
	first.run.Kill9(t)

	// Every client answered again, then a second more of traffic.
	answeredAfter := func(rs []request) (request, bool) {
		for _, r := range rs {
			if r.ok && r.start.After(killed) {
				return r, true
			}
		}
		return request{}, false
	}
	// Two seconds of traffic after the kill (stallBound four times over), then
	// the clients stop; results is read only after they have.
	time.Sleep(time.Until(killed.Add(2 * time.Second)))
	close(stop)
	wg.Wait()

	var stalls []time.Duration
	var failed []string
	var longest time.Duration
	for c, rs := range results {
		r, ok := answeredAfter(rs)
		if !ok {
			var after []string
			for _, q := range rs {
				if q.end.After(killed) {
					after = append(after, q.status)
				}
			}
			t.Errorf("client %d was not answered within %v of the kill: %v", c, time.Since(killed).Round(time.Millisecond), summary(after))
			continue
		}
		stalls = append(stalls, r.end.Sub(killed))
		for _, q := range rs {
			if q.end.After(killed) && q.start.Before(r.end) {
				longest = max(longest, q.end.Sub(q.start))
				if !q.ok {
					failed = append(failed, q.status)
				}
			}
		}
	}
	if len(stalls) == 0 {
		t.FailNow()
	}
	slices.Sort(stalls)
	worst := stalls[len(stalls)-1]
	t.Logf("HAProxy inter %v fall %d rise %d; pgleader run %s", x.inter, x.fall, x.rise, strings.Join(pgrun.Fast, " "))
	t.Logf("kill -9 of %s's front and pgleader run (epoch %d): %d clients stalled %v (each: %v); the longest request %v; %d requests failed meanwhile %v",
		first.name, l1.Epoch, clients, worst.Round(time.Millisecond), stalls, longest.Round(time.Millisecond), len(failed), summary(failed))
	if worst > stallBound {
		t.Errorf("a client stalled %v after the kill, beyond %v", worst.Round(time.Millisecond), stallBound)
	}

	// Exactly once: every stored submission executed once; every accepted one stored.
	pgtest.WaitFor(t, "every submission executed", 20*time.Second, func() bool {
		return x.count("SELECT count(*) FROM submissions WHERE done_at IS NULL") == 0
	})
	accepted := 0
	for _, rs := range results {
		for _, r := range rs {
			if r.ok {
				accepted++
			}
		}
	}
	if n := x.count("SELECT count(*) FROM submissions"); n < accepted {
		t.Errorf("%d submissions stored, %d accepted", n, accepted)
	}
	if n := x.count("SELECT count(*) FROM (SELECT submission_id FROM executions GROUP BY submission_id HAVING count(*) > 1) x"); n != 0 {
		t.Errorf("%d submissions executed more than once", n)
	}
	if n := x.count("SELECT count(*) FROM submissions s WHERE NOT EXISTS (SELECT 1 FROM executions x WHERE x.submission_id = s.id)"); n != 0 {
		t.Errorf("%d submissions never executed", n)
	}
}

// summary counts failures by kind.
func summary(failed []string) map[string]int {
	out := map[string]int{}
	for _, f := range failed {
		if i := strings.LastIndex(f, ": "); i >= 0 && !strings.HasPrefix(f, "5") {
			f = f[i+2:]
		}
		out[f]++
	}
	return out
}
