package election

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A claim is queued only for a campaign waiting as a follower, once at a time; the
// announcement of a lost peer goes with the last claim batch queued; a lost
// session answers every claim still queued.
func TestBatchQueue(t *testing.T) {
	e := &Elector{cfg: DefaultConfig(), scopes: map[string]*Scope{}}
	var scopes []*Scope
	for i := range 600 {
		sc := &Scope{e: e, name: string(rune('a'+i%26)) + string(rune('0'+i/26)), sig: make(chan struct{}, 1)}
		scopes = append(scopes, sc)
	}
	s := &session{e: e, lost: make(chan struct{})}
	s.batch.init()

	scopes[0].setFollowing(false) // leading, resigning, cooling down: not claimed
	for _, sc := range scopes[1:] {
		sc.setFollowing(true)
	}
	s.requestClaims(scopes, "peer-1")
	s.requestClaims(scopes[1:3], "") // already queued: not twice
	if got := len(s.batch.claims); got != len(scopes)-1 {
		t.Fatalf("%d claims queued, want %d", got, len(scopes)-1)
	}

	// What runNext sends, round trip by round trip: releases first, then claims,
	// maxBatch at most, the announcement with the last claim batch.
	s.batch.releases = []releaseReq{{scope: "r1"}, {scope: "r2"}}
	var rounds []int
	var announcedWith int
	if rel, claims, announce := s.batch.take(); len(rel) != 2 || len(claims) != 0 || announce != "" {
		t.Fatalf("first round trip: %d releases, %d claims, announce %q; want the 2 releases alone", len(rel), len(claims), announce)
	}
	for {
		_, claims, announce := s.batch.take()
		if len(claims) == 0 && announce == "" {
			break
		}
		rounds = append(rounds, len(claims))
		if announce != "" {
			announcedWith = len(rounds)
		}
		for _, sc := range claims {
			sc.deliver(claimOutcome{sess: s, r: claimResult{scope: sc.name}})
		}
	}
	if len(rounds) != 3 || rounds[0] != maxBatch || rounds[2] != len(scopes)-1-2*maxBatch || announcedWith != 3 {
		t.Fatalf("rounds %v, announced with round %d; want 250, 250, 99 and the announcement with the last", rounds, announcedWith)
	}

	// Delivered: claimable again. Queued again, then the session is lost.
	s.requestClaims(scopes[1:2], "")
	if o := scopes[1].takeOutcome(); o == nil || o.err != nil {
		t.Fatalf("outcome %+v, want the delivered one", o)
	}
	close(s.lost)
	s.failQueued()
	o := scopes[1].takeOutcome()
	if o == nil || !errors.Is(o.err, errSessionLost) {
		t.Fatalf("outcome after the session was lost: %+v, want errSessionLost", o)
	}
	// A wake-up that reaches the lost session (a late notification, a heartbeat
	// answered just before the loss) must not mark the scope queued: no one would
	// answer, and the next session could never claim it.
	s.requestClaims(scopes[1:2], "peer-2")
	next := &session{e: e, lost: make(chan struct{})}
	next.batch.init()
	next.requestClaims(scopes[1:2], "")
	if len(next.batch.claims) != 1 {
		t.Fatalf("the next session queued %d claims of a scope woken on the lost one, want 1", len(next.batch.claims))
	}
}

// A campaign that ends while its claim is in flight waits for the outcome (settle)
// instead of leaving a won lock behind.
func TestSettleWaitsForTheClaimInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &Elector{cfg: DefaultConfig(), scopes: map[string]*Scope{}}
		sc := &Scope{e: e, name: "s", sig: make(chan struct{}, 1)}
		s := &session{e: e, lost: make(chan struct{})}
		s.batch.init()
		sc.setFollowing(true)
		s.requestClaims([]*Scope{sc}, "")
		settled := make(chan struct{})
		go func() {
			sc.settle()
			close(settled)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-settled:
			t.Fatal("settle returned while the claim was in flight")
		default:
		}
		// A lost claim: nothing to release; settle returns.
		sc.deliver(claimOutcome{sess: s, err: context.Canceled})
		synctest.Wait()
		select {
		case <-settled:
		default:
			t.Fatal("settle did not return after the outcome")
		}
		if sc.queueClaim(s) {
			t.Fatal("a settled scope accepted a new claim")
		}
	})
}

// A node that joins is watched by the node it follows in node_id order, at once.
func TestBetween(t *testing.T) {
	for _, tc := range []struct {
		a, x, b string
		want    bool
	}{
		{"n1", "n2", "n3", true},
		{"n1", "n4", "n3", false},
		{"n3", "n4", "n1", true}, // wraps around
		{"n3", "n0", "n1", true},
		{"n3", "n2", "n1", false},
		{"n1", "n2", "n1", true}, // alone with one peer: everyone else is between
	} {
		if got := between(tc.a, tc.x, tc.b); got != tc.want {
			t.Errorf("between(%s, %s, %s) = %v, want %v", tc.a, tc.x, tc.b, got, tc.want)
		}
	}
}
