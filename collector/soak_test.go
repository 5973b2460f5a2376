package collector

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestHealthyClusterSilent runs three real electors on two scopes for 50 seconds
// of resigns, elector stops and restarts, and terminated leadership backends: the
// normal life of a cluster. The critical checks must never fire: no split brain,
// no stale leader, no leader missing for NoLeaderAfter (default thresholds, so
// the test proves the defaults, read every 100 ms).
func TestHealthyClusterSilent(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	scopes := []string{"a", "b"}
	cfg := testConfig(t, dsn)
	cfg.PollInterval = 100 * time.Millisecond
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	ids := []string{"n1", "n2", "n3"}
	nodes := map[string]*testnode.Node{}
	for _, id := range ids {
		nodes[id] = testnode.Start(t, testnode.FastConfig(dsn, id, scopes...))
	}
	admin := pgtest.Connect(t, dsn)
	ctx := context.Background()
	leaderOf := func(scope string) *testnode.Node {
		for _, n := range nodes {
			if n != nil && n.Leads(scope) {
				return n
			}
		}
		return nil
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var resigns, restarts, terminations int
	var down string // the stopped elector, restarted on the next stop action
	// About 50 actions: every kind of fault several times over.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		scope := scopes[rng.IntN(len(scopes))]
		switch rng.IntN(3) {
		case 0:
			if l := leaderOf(scope); l != nil {
				if err := l.Scope(scope).Resign(ctx); err == nil {
					resigns++
				}
			}
		case 1:
			if down != "" {
				nodes[down] = testnode.Start(t, testnode.FastConfig(dsn, down, scopes...))
				down = ""
				restarts++
				break
			}
			down = ids[rng.IntN(len(ids))]
			nodes[down].Stop()
			nodes[down] = nil
		case 2:
			terminations += int(queryInt(t, admin,
				"SELECT count(*) FILTER (WHERE pg_terminate_backend(holder_pid)) FROM pgleader.leader_state WHERE scope = $1 AND holder_pid IS NOT NULL", scope))
		}
	}
	for _, scope := range scopes {
		pgtest.WaitFor(t, "a leader of "+scope, wait, func() bool { return leaderOf(scope) != nil })
	}
	s := settle(t, c, 3)

	elected := 0
	for _, e := range rec.all() {
		if e.Kind == EventElected {
			elected++
		}
		if e.Kind == EventAlertFiring && (e.Alert.Kind == AlertSplitBrain || e.Alert.Kind == AlertStaleLeader || e.Alert.Kind == AlertNoLeader) {
			t.Errorf("%s fired on a healthy cluster: %s (hint: %s)", e.Alert.Kind, e.Alert.Summary, e.Alert.Hint)
		}
	}
	reasons := map[string]int64{}
	rows, err := admin.Query(ctx, "SELECT release_reason, count(*) FROM pgleader.terms WHERE release_reason IS NOT NULL GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		reasons[r] = n
	}
	t.Logf("%d resigns, %d elector restarts, %d terminated leaders, %d elected events, terms ended by %v, %d polls",
		resigns, restarts, terminations, elected, reasons, s.Health.Polls)
	// The faults must really have happened, or the silence proves nothing.
	if resigns < 5 || restarts < 3 || terminations < 5 || reasons["resigned"] == 0 || reasons["shutdown"] == 0 || reasons["crashed"]+reasons["lost_connection"] == 0 {
		t.Fatalf("too few faults for a meaningful check: %d resigns, %d restarts, %d terminations, reasons %v", resigns, restarts, terminations, reasons)
	}
	if elected < resigns+terminations {
		t.Fatalf("%d elected events for %d resigns and %d terminations: events were missed", elected, resigns, terminations)
	}
	for _, name := range scopes {
		if sc := scope(t, s, name); sc.Verdict != VerdictOK && sc.Verdict != VerdictDegraded {
			t.Fatalf("scope %s ends %s: %+v", name, sc.Verdict, sc)
		}
	}
}
