package election_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestHoldGuardOnLoss: a node whose leadership session is terminated keeps its
// guard until its Lead function has returned, so the successor's gate opens only
// after that (pgleader run relies on it: no two children at once). Without the
// hold, the successor may open while the old function still runs.
func TestHoldGuardOnLoss(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	for _, tc := range []struct {
		name string
		hold time.Duration
	}{{"Held", time.Second}, {"NotHeld", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			scope := "hold-" + tc.name
			rec := &recorder{}
			cfgA := testnode.FastConfig(dsn, "hold-a-"+tc.name, scope)
			cfgA.HoldGuardOnLoss = tc.hold
			a := testnode.Start(t, cfgA, rec.Observe)
			if _, err := a.Scope(scope).Await(context.Background()); err != nil {
				t.Fatal(err)
			}
			var returned atomic.Int64 // mono ns when a's Lead function returned
			leadCtx, stopLead := context.WithCancel(context.Background())
			defer stopLead()
			entered := make(chan struct{})
			release := make(chan struct{}) // NotHeld: a's function returns only when the test says
			if tc.hold > 0 {
				close(release)
			}
			go a.Scope(scope).Lead(leadCtx, func(ctx context.Context, tok election.Token) error {
				if returned.Load() != 0 {
					<-ctx.Done()
					return ctx.Err()
				}
				close(entered)
				<-ctx.Done()
				<-release
				time.Sleep(150 * time.Millisecond) // the work takes its time to stop
				returned.Store(monotime.Now())
				return ctx.Err()
			})
			<-entered
			cfgB := testnode.FastConfig(dsn, "hold-b-"+tc.name, scope)
			b := testnode.Start(t, cfgB, rec.Observe)
			pgtest.WaitFor(t, "b following a", 10*time.Second, func() bool {
				node, _ := b.Scope(scope).Leader()
				return node == cfgA.NodeID
			})
			exec(t, dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", "pgleader leadership "+cfgA.NodeID)
			pgtest.WaitFor(t, "b leading", 10*time.Second, func() bool { return b.Leads(scope) })
			if tc.hold == 0 {
				// Nothing holds the guard: b leads although a's function has not
				// returned (and will not, until released).
				if returned.Load() != 0 {
					t.Fatal("a's function returned before it was released")
				}
				close(release)
				pgtest.WaitFor(t, "a's function to return", 5*time.Second, func() bool { return returned.Load() != 0 })
				return
			}
			var opened int64
			for _, ev := range rec.snapshot() {
				if ev.Node == cfgB.NodeID && ev.Kind == election.EventGateOpen && ev.Scope == scope {
					opened = ev.MonoNS
				}
			}
			ret := returned.Load()
			if opened == 0 {
				t.Fatal("no gate_open of b recorded")
			}
			if ret == 0 {
				t.Fatal("b's gate opened while a's Lead function was still running, with HoldGuardOnLoss")
			}
			if opened < ret {
				t.Fatalf("b's gate opened %v before a's Lead function returned, with HoldGuardOnLoss", time.Duration(ret-opened))
			}
			t.Logf("b's gate opened %v after a's function returned", time.Duration(opened-ret))
		})
	}
}
