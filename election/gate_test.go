package election

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
)

func testScope(w time.Duration, obs func(Event)) *Scope {
	e := &Elector{cfg: Config{NodeID: "n", TrustWindow: w, Logger: slog.New(slog.DiscardHandler)},
		log: slog.New(slog.DiscardHandler), stopped: make(chan struct{})}
	if obs != nil {
		e.obs.add(obs, false, nil, nil)
	}
	return newScope(e, "s", 1)
}

// TestGateTiming drives a term through heartbeats on synctest's fake clock: the gate
// is open exactly while now < start of the last successful heartbeat + W, only
// after the term is allowed to open, and never again once the term ended.
func TestGateTiming(t *testing.T) {
	const W = 300 * time.Millisecond
	type step struct {
		at      time.Duration // fake time since the claim started
		do      string        // "open", "confirm", "end", "check"
		hbStart time.Duration // confirm: when the heartbeat started
		want    bool          // gate open after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"ClosedUntilPredecessorSafe", []step{
			{at: 0, do: "check", want: false},
			{at: 50 * time.Millisecond, do: "confirm", hbStart: 40 * time.Millisecond, want: false},
			{at: 100 * time.Millisecond, do: "open", want: true},
		}},
		{"OpenUntilClaimPlusW", []step{
			{at: 0, do: "open", want: true},
			{at: W - time.Millisecond, do: "check", want: true},
			{at: W, do: "check", want: false},
		}},
		{"HeartbeatsExtend", []step{
			{at: 0, do: "open", want: true},
			{at: 200 * time.Millisecond, do: "confirm", hbStart: 150 * time.Millisecond, want: true},
			{at: 449 * time.Millisecond, do: "check", want: true},
			{at: 450 * time.Millisecond, do: "check", want: false},
		}},
		{"StaleHeartbeatDoesNotReopen", []step{
			{at: 0, do: "open", want: true},
			{at: 400 * time.Millisecond, do: "check", want: false},
			// A heartbeat that started at 50ms answers at 400ms: 50+300 < 400.
			{at: 400 * time.Millisecond, do: "confirm", hbStart: 50 * time.Millisecond, want: false},
		}},
		{"FreshHeartbeatReopensAfterPause", []step{
			{at: 0, do: "open", want: true},
			{at: 500 * time.Millisecond, do: "check", want: false}, // paused past W
			{at: 510 * time.Millisecond, do: "confirm", hbStart: 500 * time.Millisecond, want: true},
			{at: 799 * time.Millisecond, do: "check", want: true},
			{at: 800 * time.Millisecond, do: "check", want: false},
		}},
		{"EndClosesAtOnce", []step{
			{at: 0, do: "open", want: true},
			{at: 10 * time.Millisecond, do: "end", want: false},
			{at: 20 * time.Millisecond, do: "confirm", hbStart: 15 * time.Millisecond, want: false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := testScope(W, nil)
				begin := time.Now()
				claimStart := monoAt(begin)
				tm := newTerm(sc, 7, nil, claimStart)
				for i, st := range tc.steps {
					time.Sleep(st.at - time.Since(begin))
					switch st.do {
					case "open":
						tm.open()
					case "confirm":
						tm.confirm(claimStart + int64(st.hbStart))
					case "end":
						tm.end("resigned", true)
					}
					_, err := sc.Require(context.Background())
					if got := err == nil; got != st.want {
						t.Fatalf("step %d (%s at %v): gate open = %v, want %v", i, st.do, st.at, got, st.want)
					}
				}
				tm.end("test over", true)
			})
		})
	}
}

func monoAt(time.Time) int64 { return monotime.Now() }

// TestPeriodContextEndsWithTrust: Do's context is cancelled when the trust window
// runs out without a heartbeat, with no goroutine polling the clock.
func TestPeriodContextEndsWithTrust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed []string
		sc := testScope(300*time.Millisecond, func(e Event) {
			if e.Kind == EventGateClosed {
				closed = append(closed, string(e.Reason))
			}
		})
		tm := newTerm(sc, 1, nil, monotime.Now())
		tm.open()
		began := time.Now()
		err := sc.Do(context.Background(), func(ctx context.Context, tok Token) error {
			<-ctx.Done()
			if tok.Valid() {
				t.Error("token valid after its period's context ended")
			}
			return ctx.Err()
		})
		if err != context.Canceled {
			t.Fatalf("Do returned %v, want context.Canceled", err)
		}
		if d := time.Since(began); d != 300*time.Millisecond {
			t.Fatalf("context ended after %v, want exactly the trust window (300ms)", d)
		}
		if len(closed) != 1 || closed[0] != "trust_expired" {
			t.Fatalf("gate_closed events %v, want [trust_expired]", closed)
		}
		tm.end("test over", true)
	})
}

func TestDrainWaitsForInflight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := testScope(time.Hour, nil)
		tm := newTerm(sc, 1, nil, monotime.Now())
		tm.open()
		release := make(chan struct{})
		go sc.Do(context.Background(), func(ctx context.Context, _ Token) error { <-release; return nil })
		synctest.Wait()
		began := time.Now()
		go func() { time.Sleep(40 * time.Millisecond); close(release) }()
		tm.drain(time.Second)
		if d := time.Since(began); d != 40*time.Millisecond {
			t.Fatalf("drain returned after %v, want when the in-flight call returned (40ms)", d)
		}
		if _, err := sc.Require(context.Background()); err != ErrNotLeader {
			t.Fatalf("Require while draining: %v, want ErrNotLeader", err)
		}
		// A call that never returns is cut off at the deadline.
		tm2 := newTerm(sc, 2, nil, monotime.Now())
		tm2.open()
		go sc.Do(context.Background(), func(ctx context.Context, _ Token) error { <-ctx.Done(); return nil })
		synctest.Wait()
		began = time.Now()
		tm2.drain(250 * time.Millisecond)
		if d := time.Since(began); d != 250*time.Millisecond {
			t.Fatalf("drain with stuck work returned after %v, want the 250ms deadline", d)
		}
		tm.end("over", true)
		tm2.end("over", true)
	})
}

// BenchmarkGate measures the gate check (Require and Token.Valid): the targets are
// ≤ 50 ns/op and 0 allocs/op.
func BenchmarkGate(b *testing.B) {
	sc := testScope(time.Hour, nil)
	tm := newTerm(sc, 1, nil, monotime.Now())
	tm.open()
	defer tm.end("over", true)
	ctx := context.Background()
	b.Run("Require", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sc.Require(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	tok, _ := sc.Require(ctx)
	b.Run("Valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !tok.Valid() {
				b.Fatal("invalid")
			}
		}
	})
}
