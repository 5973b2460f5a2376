package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/cluster"
)

// A liveness test here asserts who leads next: after a handover, a failback, a
// stop. Its nodes run the fast timing of nodeArgs, race-built, on a machine of
// two cores that other work shares. When that machine stalls a node for longer
// than the heartbeat timeout, the node closes its gate and gives the scope up
// — the engine doing its job — and the scope goes to whoever claims first. The
// assertion then fails for a reason the test does not examine. Such an attempt
// is inconclusive, not passed: its safety is still checked (checkSafety), and
// conclusively runs the test again on a new cluster. A deterministic fault
// fails every attempt, or fails one without a stall, and either fails the test.

// stallAfter bounds a healthy heartbeat of nodeArgs: a heartbeat slower than
// this means the machine stalled the node or its server. Heartbeats here take
// 2–5 ms at the median and under 50 ms at the most (lab/cluster under -race,
// an idle machine). (Gaps between heartbeats tell nothing: a lease-mode
// follower writes no heartbeat_ok.)
const stallAfter = 2 * hbInterval

// stall names the first sign since mono time from that the machine starved a
// node: a heartbeat that failed (any reason: with no fault injected, a session
// ends only when the node stopped heartbeating on it for a session lease), or
// one slower than stallAfter. It returns "" when there is none.
func stall(c *cluster.Cluster, from int64) string {
	if _, err := c.Poll(); err != nil {
		return ""
	}
	for _, r := range c.Events() {
		if r.MonoNS < from || (r.Event != "heartbeat_ok" && r.Event != "heartbeat_failed") {
			continue
		}
		switch {
		case r.Event == "heartbeat_failed":
			return fmt.Sprintf("%s's heartbeat failed (%s) after %v", r.Node, r.Reason, time.Duration(r.LatencyNS).Round(time.Millisecond))
		case time.Duration(r.LatencyNS) > stallAfter:
			return fmt.Sprintf("a heartbeat of %s took %v (healthy: under %v)", r.Node, time.Duration(r.LatencyNS).Round(time.Millisecond), stallAfter)
		}
	}
	return ""
}

// astray fails t for leadership that went elsewhere than the test expected,
// unless the machine stalled since from: then the attempt is inconclusive — its
// safety is checked (checkSafety) and it is skipped, for conclusively to run it
// again.
func astray(t *testing.T, c *cluster.Cluster, dsn string, from int64, format string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(format, args...)
	if why := stall(c, from); why != "" {
		checkSafety(t, c, dsn)
		t.Skipf("inconclusive: %s, but %s: the leadership moved for that; safety checked, the attempt is run again", what, why)
	}
	t.Fatal(what)
}

// conclusively runs body in a subtest, again after an attempt that astray
// found inconclusive, three attempts at most; three inconclusive attempts in a
// row fail t (a machine that stalls every time tests nothing).
func conclusively(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		skipped := false
		t.Run(fmt.Sprintf("attempt%d", i), func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			body(t)
		})
		if !skipped {
			return
		}
	}
	t.Fatal("three attempts in a row were inconclusive: the machine stalled the nodes each time (see each attempt's skip)")
}
