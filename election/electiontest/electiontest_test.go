package electiontest_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electiontest"
	"github.com/pgleader/pgleader/protocol"
)

func config(scopes ...string) election.Config {
	return election.Config{NodeID: "node-1", Scopes: scopes, DrainTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)}
}

// start runs e until the test ends (then waits for the drain).
func start(t *testing.T, e *election.Elector) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := e.Wait(); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	return cancel
}

// call records one call of a Lead function.
type call struct {
	epoch int64
	cause error // why its context ended (nil: it returned on its own)
}

// TestLead: fn runs once per term with the term's token; losing the term cancels
// its context at once with a LostError; the next term calls it again.
func TestLead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		start(t, e)
		calls := make(chan call, 10)
		done := make(chan error, 1)
		go func() {
			done <- e.Scope("billing").Lead(context.Background(), func(ctx context.Context, tok election.Token) error {
				<-ctx.Done()
				calls <- call{tok.Epoch, context.Cause(ctx)}
				return ctx.Err()
			})
		}()
		synctest.Wait()
		if len(calls) != 0 {
			t.Fatal("fn ran before this node led")
		}
		ctl.Lead("billing")
		synctest.Wait()
		ctl.Lose("billing", protocol.ReasonLostConnection)
		c := <-calls
		var lost *election.LostError
		if c.epoch != 1 || !errors.As(c.cause, &lost) || lost.Reason != protocol.ReasonLostConnection || lost.Epoch != 1 {
			t.Fatalf("first call: epoch %d, cause %v; want epoch 1, a LostError for lost_connection", c.epoch, c.cause)
		}
		ctl.Elsewhere("billing", "node-2") // epoch 2 elsewhere
		ctl.Lead("billing")                // epoch 3 here
		synctest.Wait()
		ctl.Lose("billing", protocol.ReasonEvicted)
		if c := <-calls; c.epoch != 3 || !errors.Is(c.cause, election.ErrLeadershipLost) {
			t.Fatalf("second call: %+v, want epoch 3 ended by lost leadership", c)
		}
		select {
		case err := <-done:
			t.Fatalf("Lead returned %v while the Elector runs", err)
		default:
		}
	})
}

// TestLeadReturns: fn's nil while leading waits for the next term; its error while
// leading is Lead's; an error because leadership ended is not.
func TestLeadReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		start(t, e)
		boom := errors.New("boom")
		var mu sync.Mutex
		var epochs []int64
		done := make(chan error, 1)
		go func() {
			done <- e.Scope("billing").Lead(context.Background(), func(ctx context.Context, tok election.Token) error {
				mu.Lock()
				epochs = append(epochs, tok.Epoch)
				n := len(epochs)
				mu.Unlock()
				switch n {
				case 1:
					return nil // work done for this term
				case 2:
					<-ctx.Done()
					return errors.New("the database said no") // because leadership ended: not Lead's error
				}
				return boom
			})
		}()
		ctl.Lead("billing")
		synctest.Wait()
		mu.Lock()
		if len(epochs) != 1 {
			t.Fatalf("fn ran %d times in one term after returning nil, want 1", len(epochs))
		}
		mu.Unlock()
		ctl.Lose("billing", protocol.ReasonHeartbeatTimeout)
		ctl.Lead("billing")
		synctest.Wait()
		ctl.Lose("billing", protocol.ReasonHeartbeatTimeout)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Lead returned %v after fn failed because leadership ended", err)
		default:
		}
		ctl.Lead("billing")
		if err := <-done; !errors.Is(err, boom) {
			t.Fatalf("Lead = %v, want fn's error", err)
		}
		if want := []int64{1, 2, 3}; len(epochs) != 3 || epochs[0] != 1 || epochs[2] != 3 {
			t.Fatalf("fn ran at epochs %v, want %v", epochs, want)
		}
	})
}

// TestLeadDrainsOnShutdown: cancelling Start's context tells fn through
// tok.Draining, keeps its context and the term (its writes fenced) until fn
// returns, and Lead returns nil; fn that ignores Draining is cut after
// DrainTimeout.
func TestLeadDrainsOnShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		obey     bool
		wantCut  bool
		minAlive time.Duration
	}{
		{"Obeys", true, false, 0},
		{"Ignores", false, true, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, ctl := electiontest.New(t, config("billing"))
				ctx, cancel := context.WithCancel(context.Background())
				if err := e.Start(ctx); err != nil {
					t.Fatal(err)
				}
				type result struct {
					fenced, cut bool
					alive       time.Duration
				}
				res := make(chan result, 1)
				done := make(chan error, 1)
				go func() {
					// The same context as Start's, as a service would pass its signal context.
					done <- e.Scope("billing").Lead(ctx, func(fctx context.Context, tok election.Token) error {
						<-tok.Draining()
						began := time.Now()
						if tc.obey {
							res <- result{fenced: election.Fence(fctx, nil, tok) != nil, alive: time.Since(began)}
							return nil
						}
						<-fctx.Done()
						res <- result{fenced: election.Fence(context.Background(), nil, tok) != nil, cut: true, alive: time.Since(began)}
						return fctx.Err()
					})
				}()
				ctl.Lead("billing")
				synctest.Wait()
				cancel()
				r := <-res
				if r.cut != tc.wantCut || r.alive < tc.minAlive {
					t.Fatalf("fn: %+v, want cut %v after at least %v", r, tc.wantCut, tc.minAlive)
				}
				if tc.obey && r.fenced {
					t.Fatal("a draining term's token was fenced before fn returned")
				}
				if err := <-done; err != nil {
					t.Fatalf("Lead = %v, want nil at shutdown", err)
				}
				if err := e.Wait(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestLeadContextEnds: Lead's own context ending while the Elector runs drains fn
// the same way, with ctx's cause; the node keeps leading.
func TestLeadContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		start(t, e)
		ctx, cancel := context.WithCancelCause(context.Background())
		stopWork := errors.New("work moved elsewhere")
		causes := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			done <- e.Scope("billing").Lead(ctx, func(fctx context.Context, tok election.Token) error {
				<-tok.Draining()
				<-fctx.Done()
				causes <- context.Cause(fctx)
				return nil
			})
		}()
		ctl.Lead("billing")
		synctest.Wait()
		began := time.Now()
		cancel(stopWork)
		if c := <-causes; !errors.Is(c, stopWork) || time.Since(began) < time.Second {
			t.Fatalf("fn's context ended with %v after %v, want %v after DrainTimeout (1s)", c, time.Since(began), stopWork)
		}
		if err := <-done; err != nil {
			t.Fatalf("Lead = %v, want nil", err)
		}
		if e.Scope("billing").Role() != election.RoleLeader {
			t.Fatal("the node stopped leading when one Lead call ended")
		}
	})
}

// TestAwait: Await returns the token once the gate opens, ctx's error when it
// ends first, ErrClosed once the Elector stopped.
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		cancelRun := start(t, e)
		s := e.Scope("billing")
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := s.Await(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await before leading = %v, want the deadline", err)
		}
		got := make(chan election.Token, 1)
		go func() {
			tok, err := s.Await(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- tok
		}()
		synctest.Wait()
		ctl.Lead("billing")
		if tok := <-got; tok.Epoch != 1 || !tok.Valid() || tok.Holder != "node-1" {
			t.Fatalf("Await = %+v, want a valid token of epoch 1", tok)
		}
		if s.GateBlocked() != 0 {
			t.Fatalf("Await counted %d refusals", s.GateBlocked())
		}
		ctl.Lose("billing", protocol.ReasonLostConnection)
		cancelRun()
		if err := e.Wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Await(context.Background()); !errors.Is(err, election.ErrClosed) {
			t.Fatalf("Await after stop = %v, want ErrClosed", err)
		}
	})
}

// TestFence: a token is fenced (in memory) once another term began.
func TestFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		start(t, e)
		ctl.Lead("billing")
		tok, err := e.Scope("billing").Require(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := election.Fence(context.Background(), nil, tok); err != nil {
			t.Fatalf("Fence of the current term: %v", err)
		}
		ctl.Elsewhere("billing", "node-2")
		if err := election.Fence(context.Background(), nil, tok); !errors.Is(err, election.ErrFenced) {
			t.Fatalf("Fence after another node took over = %v, want ErrFenced", err)
		}
		if tok.Valid() {
			t.Fatal("token still valid after the term was lost")
		}
		if leader, epoch := e.Scope("billing").Leader(); leader != "node-2" || epoch != 2 || ctl.Epoch("billing") != 2 {
			t.Fatalf("Leader() = %s, %d; want node-2, 2", leader, epoch)
		}
	})
}

// TestTransitionsAndResign: elected and revoked carry the term's token; Resign
// releases cleanly (resigned).
func TestTransitionsAndResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ctl := electiontest.New(t, config("billing"))
		trs := make(chan election.Event, 8)
		stop := e.Observe(func(ev election.Event) {
			if ev.Kind == election.EventElected || ev.Kind == election.EventRevoked {
				trs <- ev
			}
		})
		defer stop()
		start(t, e)
		ctl.Lead("billing")
		el := <-trs
		if el.Kind != election.EventElected || el.Token.Epoch != 1 || !el.Token.Valid() {
			t.Fatalf("first event %+v, want elected with a valid token", el)
		}
		if err := e.Scope("billing").Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		rv := <-trs
		if rv.Kind != election.EventRevoked || rv.Reason != protocol.ReasonResigned || rv.Token.Valid() {
			t.Fatalf("second event %+v, want revoked (resigned) with an ended token", rv)
		}
		h := e.Health()
		if !h.Healthy || len(h.Scopes) != 1 || h.Scopes[0].Role != election.RoleFollower {
			t.Fatalf("Health after resigning: %+v", h)
		}
	})
}
