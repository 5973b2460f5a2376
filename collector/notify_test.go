package collector

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestNotifyBudget(t *testing.T) {
	cost := notifyCost(time.Second)
	if cost != 250*time.Millisecond || notifyCost(MinPollInterval) != minReadGap {
		t.Fatalf("cost %v at 1s, %v at %v", cost, notifyCost(MinPollInterval), MinPollInterval)
	}
	t.Run("BurstThenRefill", func(t *testing.T) {
		var b notifyBudget
		now := t0
		for i := range notifyBurst {
			if b.next(cost).After(now) {
				t.Fatalf("read %d of a burst after a quiet spell waits until %v", i+1, b.next(cost))
			}
			b.take(now, cost)
		}
		if got := b.next(cost); !got.Equal(now.Add(cost)) {
			t.Fatalf("after the burst the next read is at %v, want one cost (%v) later", got.Sub(now), cost)
		}
		b.refund(cost) // that read found news
		if b.next(cost).After(now) {
			t.Fatal("a refunded token is not available at once")
		}
		now = now.Add(notifyBurst * cost) // a quiet spell refills the bucket, and no more
		for range notifyBurst {
			if b.next(cost).After(now) {
				t.Fatal("the bucket did not refill during a quiet spell")
			}
			b.take(now, cost)
		}
		if !b.next(cost).After(now) {
			t.Fatal("the bucket holds more than notifyBurst after a long quiet spell")
		}
	})
	t.Run("StormBound", func(t *testing.T) {
		// A read is wanted every millisecond for ten seconds; none finds news.
		var b notifyBudget
		reads := 0
		for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(time.Millisecond) {
			if !now.Before(b.next(cost)) {
				b.take(now, cost)
				reads++
			}
		}
		if bound := notifyBurst + int(10*time.Second/cost); reads > bound || reads < bound-1 {
			t.Fatalf("%d reads in a 10 s storm, want %d (burst %d + one per %v)", reads, bound, notifyBurst, cost)
		}
	})
	t.Run("GenuineChangesNotSlowed", func(t *testing.T) {
		// Every read finds news: none ever waits.
		var b notifyBudget
		for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(minReadGap) {
			if b.next(cost).After(now) {
				t.Fatalf("a read at %v waits although every read found news", now.Sub(t0))
			}
			b.take(now, cost)
			b.refund(cost)
		}
	})
}

// forgedPayloads are what a role with nothing but CONNECT can send on the
// channel: lies about the state (a forged holder at a huge epoch, for the scope a
// real node is about to claim), garbage, and a payload near the server's 8000-byte
// limit. i makes them distinct: the server folds equal notifications of one
// transaction into one.
func forgedPayloads(i int) []string {
	return []string{
		fmt.Sprintf(`{"scope":"s","epoch":%d,"holder":"forged","event":"elected"}`, 999_999+i),
		fmt.Sprintf(`{"scope":"s","epoch":-%d,"holder":"","event":"released","reason":"forged"}`, i),
		fmt.Sprintf(`}{not json %d'; SELECT pg_terminate_backend(pg_backend_pid()); --`, i),
		fmt.Sprintf("%d%s", i, strings.Repeat("☠", 2600)), // 7,800 bytes
		fmt.Sprint(i),
	}
}

// flood sends forged notifications on leader_change from its own connection,
// as fast as the server takes them, until the returned stop is called; stop
// returns how many it sent.
func flood(t *testing.T, dsn string) (stop func() int64) {
	t.Helper()
	conn := pgtest.Connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			var batch []string
			for j := range 8 {
				batch = append(batch, forgedPayloads(i*8+j)...)
			}
			if _, err := conn.Exec(ctx, "SELECT pg_notify('leader_change', p) FROM unnest($1::text[]) p", batch); err != nil {
				if ctx.Err() == nil {
					done <- err
					return
				}
				break
			}
			sent.Add(int64(len(batch)))
		}
		done <- nil
	}()
	return func() int64 {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("flood: %v", err)
		}
		return sent.Load()
	}
}

// TestNotifyStorm: a flood of forged notifications from another connection
// raises the collector's reads by a bounded factor (notifyBudget), a real claim
// during the flood is still seen, and the lying payloads change nothing.
func TestNotifyStorm(t *testing.T) {
	pgtest.Slow(t)
	dsn, c, rec := liveNotifyCollector(t)

	// Idle: the poll alone, for the figures.
	idle := measureReads(t, c, 3*time.Second, func() {})

	stop := flood(t, dsn)
	var sent int64
	storm := measureReads(t, c, 3*time.Second, func() {
		// A real claim while the flood runs.
		time.Sleep(500 * time.Millisecond)
		testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		rec.waitEvent(t, "elected n1 during the flood", func(e Event) bool { return e.Kind == EventElected && e.Scope == "s" })
	})
	sent = stop()
	t.Logf("idle: %d reads in %v (%.1f/s); flood of %d notifications sent, %d received (%.0f/s), %d coalesced: %d reads in %v (%.1f/s)",
		idle.reads, idle.took.Round(time.Millisecond), idle.perSecond(), sent, storm.notifications,
		float64(storm.notifications)/storm.took.Seconds(), storm.coalesced, storm.reads, storm.took.Round(time.Millisecond), storm.perSecond())

	// Reads during the flood: the ticks, the budget, and one per read that
	// found news (each published at least one event; those reads are free).
	news := uint64(0)
	for _, e := range rec.all() {
		if !e.At.Before(storm.began) && e.At.Before(storm.began.Add(storm.took)) {
			news++
		}
	}
	ticks := uint64(storm.took/DefaultPollInterval) + 1
	budget := uint64(notifyBurst) + uint64(storm.took/notifyCost(DefaultPollInterval)) + 1
	if bound := ticks + budget + news; storm.reads > bound {
		t.Errorf("%d reads during %v of flood, bound %d (%d ticks + %d budgeted + %d that found news)",
			storm.reads, storm.took, bound, ticks, budget, news)
	}
	if storm.notifications < 20*(ticks+budget) {
		t.Fatalf("only %d notifications arrived in %v: the flood is too weak to test the bound", storm.notifications, storm.took)
	}
	// Every notification either waited for a read of its own or was coalesced.
	if own := storm.notifications - storm.coalesced; own > storm.reads+1 {
		t.Errorf("%d notifications not coalesced but only %d reads", own, storm.reads)
	}

	// The payloads were hints: nothing of them is in the picture, which is the
	// database's (n1 may have lost and won s again under load: the epoch is
	// the row's, not necessarily 1).
	admin := pgtest.Connect(t, dsn)
	var epoch int64
	s := waitSnap(t, c, "the picture of the database", func(s *Snapshot) bool {
		epoch = queryInt(t, admin, "SELECT epoch FROM pgleader.leader_state WHERE scope = 's'")
		sc, ok := s.Scope("s")
		return ok && sc.Epoch == epoch
	})
	if sc := scope(t, s, "s"); sc.Leader != "n1" && sc.Leader != "" || sc.Epoch < 1 || sc.Epoch >= 999_999 {
		t.Errorf("scope s: leader %q epoch %d (the database has epoch %d)", sc.Leader, sc.Epoch, epoch)
	}
	for _, e := range rec.all() {
		if e.Node == "forged" || e.Epoch >= 999_999 || e.Epoch < 0 || e.Reason == "forged" {
			t.Errorf("event from a forged payload: %+v", e)
		}
	}
}

// readRate is what the collector did during a measured window.
type readRate struct {
	began                           time.Time
	took                            time.Duration
	reads, notifications, coalesced uint64
}

func (r readRate) perSecond() float64 { return float64(r.reads) / r.took.Seconds() }

// measureReads runs during (then waits out the rest of d) and reports the
// collector's reads and notifications meanwhile, from its Health.
func measureReads(t *testing.T, c *Collector, d time.Duration, during func()) readRate {
	t.Helper()
	h0 := settle(t, c, 1).Health
	began := time.Now()
	during()
	time.Sleep(time.Until(began.Add(d)))
	h1 := c.Snapshot().Health
	return readRate{began: began, took: time.Since(began), reads: h1.Polls - h0.Polls,
		notifications: h1.Notifications - h0.Notifications, coalesced: h1.NotificationsCoalesced - h0.NotificationsCoalesced}
}

// A flood of large notifications costs the listener at most its budget per
// listening spell: past it, it closes its connection (dropping the server's queue
// for it), polls for a while and listens again; a real election during the flood
// is still published (by the poll).
func TestNotifyFloodBounded(t *testing.T) {
	pgtest.Slow(t)
	dsn, c, rec := liveNotifyCollector(t)

	ctx, stop := context.WithCancel(context.Background())
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			conn := pgtest.Connect(t, dsn)
			for ctx.Err() == nil {
				if _, err := conn.Exec(ctx, "SELECT pg_notify('leader_change', g::text || repeat('x', 7000)) FROM generate_series(1, 100) g"); err != nil {
					return
				}
				sent.Add(100)
			}
		})
	}
	flood := measureReads(t, c, 4*time.Second, func() {
		time.Sleep(500 * time.Millisecond)
		testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		rec.waitEvent(t, "elected n1 during the flood", func(e Event) bool { return e.Kind == EventElected && e.Scope == "s" })
	})
	stop()
	wg.Wait()
	h := c.Snapshot().Health
	t.Logf("flood of %d notifications of 7000 bytes in %v: %d received, %d reads; listener: %s",
		sent.Load(), flood.took.Round(time.Millisecond), flood.notifications, flood.reads, h.LastError)
	// Listening spells during the flood: the first, then one after each deaf
	// period (1 s, 2 s, …), each at most a budget's worth of bytes.
	spells := uint64(1 + flood.took/time.Second)
	if bound := spells * (listenBudgetBytes/7000 + 1); flood.notifications > bound {
		t.Errorf("%d notifications received in %v of flood, bound %d (%d listening spells)", flood.notifications, flood.took, bound, spells)
	}
	if uint64(sent.Load()) < 4*spells*(listenBudgetBytes/7000+1) {
		t.Fatalf("only %d notifications sent: the flood is too weak to test the bound", sent.Load())
	}
	if !strings.Contains(h.LastError, "notification flood") {
		t.Errorf("Health does not name the flood: %q", h.LastError)
	}
}

// liveNotifyCollector runs a collector in notify mode on a fresh migrated
// database and waits until it listens.
func liveNotifyCollector(t *testing.T) (string, *Collector, *recorder) {
	t.Helper()
	dsn := pgtest.MigratedDSN(t)
	cfg := testConfig(t, dsn)
	cfg.Source = SourceModeNotify
	cfg.PollInterval = DefaultPollInterval
	c := newCollector(t, cfg)
	rec := record(t, c)
	run(t, c)
	waitSnap(t, c, "live", func(s *Snapshot) bool { return s.Health.Source == SourceLive })
	return dsn, c, rec
}
