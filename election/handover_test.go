package election_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// handoverCooldown is long against everything else the handover does (fast
// timing: heartbeats every 50 ms), so that a takeover well within it can only come
// from the target ending its cooldown early.
const handoverCooldown = 5 * time.Second

func coolingConfig(dsn, id string, mode election.Mode) election.Config {
	cfg := testnode.FastConfig(dsn, id, "s")
	cfg.ResignCooldown = handoverCooldown
	cfg.Mode = mode
	return cfg
}

// requestHandover calls pgleader.request_handover as `pgleader handover` does
// (to "" picks the best candidate) and returns its error.
func requestHandover(t testing.TB, dsn, to string) error {
	t.Helper()
	var err error
	withConn(t, dsn, func(ctx context.Context, c *pgx.Conn) error {
		var target any
		if to != "" {
			target = to
		}
		_, err = c.Exec(ctx, "SELECT * FROM pgleader.request_handover('s', $1, 10000, 'test')", target)
		return nil
	})
	return err
}

// TestHandoverBackToCoolingNode: a hands s to b, and the operator at once hands
// it back to a, which cools down after its handover: the request is accepted and
// a leads promptly, far within its cooldown (an explicit, reserved handover has
// no free-for-all for the cooldown to keep a out of). A request without a target
// still never picks the cooling node. In lock mode a learns of the reservation
// from the release's notification, in lease mode from its next heartbeat.
func TestHandoverBackToCoolingNode(t *testing.T) {
	pgtest.Slow(t)
	for _, mode := range []election.Mode{election.ModeLock, election.ModeLease} {
		t.Run(string(mode), func(t *testing.T) { testHandoverBackToCoolingNode(t, mode) })
	}
}

func testHandoverBackToCoolingNode(t *testing.T, mode election.Mode) {
	dsn := pgtest.MigratedDSN(t)
	rec := &recorder{}
	cfgA, cfgB := coolingConfig(dsn, "a", mode), coolingConfig(dsn, "b", mode)
	a := testnode.Start(t, cfgA, rec.Observe)
	pgtest.WaitFor(t, "a leads", 5*time.Second, func() bool { return a.Leads("s") })
	b := testnode.Start(t, cfgB, rec.Observe)
	// b is a live candidate once its session registered it.
	pgtest.WaitFor(t, "the handover to b accepted", 5*time.Second, func() bool { return requestHandover(t, dsn, "b") == nil })
	pgtest.WaitFor(t, "b leads", 5*time.Second, func() bool { return b.Leads("s") })

	// a cools down now; without a target only a could be chosen: refused.
	if err := requestHandover(t, dsn, ""); err == nil || !strings.Contains(err.Error(), "cooling down") {
		t.Fatalf("handover without a target while the only other node cools down: %v, want a refusal naming the cooldown", err)
	}
	t0 := time.Now()
	if err := requestHandover(t, dsn, "a"); err != nil {
		t.Fatalf("handover --to a, which cools down: %v", err)
	}
	pgtest.WaitFor(t, "a leads again", handoverCooldown, func() bool { return a.Leads("s") })
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("a led %v after the handover back to it: it sat out its cooldown (%v)", took, handoverCooldown)
	}
	if got := queryString(t, dsn, "SELECT release_reason || ' to ' || handed_to FROM pgleader.terms WHERE scope = 's' ORDER BY epoch DESC OFFSET 1 LIMIT 1"); got != "handed_over to a" {
		t.Fatalf("b's term ended %q, want handed_over to a", got)
	}
	assertNoOverlap(t, rec, "s")
}

// TestResignKeepsCooldown: a plain resign still keeps the resigner out for its
// cooldown. a resigns (b takes over), then b resigns at once: the scope stays
// free rather than going back to a before a's cooldown has passed, and an early
// wake-up does not come from b's release (it reserves the scope for nobody).
func TestResignKeepsCooldown(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	a := testnode.Start(t, coolingConfig(dsn, "a", election.ModeLock))
	pgtest.WaitFor(t, "a leads", 5*time.Second, func() bool { return a.Leads("s") })
	cfgB := coolingConfig(dsn, "b", election.ModeLock)
	cfgB.ResignCooldown = 0
	b := testnode.Start(t, cfgB)
	pgtest.WaitFor(t, "b registered", 5*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT count(*) FROM pgleader.nodes WHERE node_id = 'b' AND stopped_at IS NULL") == 1
	})
	resigned := time.Now()
	if err := a.Scope("s").Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "b leads", 5*time.Second, func() bool { return b.Leads("s") })
	// b gives s up at once and, with no cooldown of its own, would take it back
	// at once too: stop it instead, so that only a can lead s again.
	b.Stop()
	for time.Since(resigned) < handoverCooldown-500*time.Millisecond {
		if a.Leads("s") {
			t.Fatalf("a led s again %v after resigning it, within its cooldown (%v)", time.Since(resigned), handoverCooldown)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pgtest.WaitFor(t, "a leads after its cooldown", 5*time.Second, func() bool { return a.Leads("s") })
}
