package election

import (
	"errors"
	"testing"
	"time"
)

// leadOnly is a session with only its leadership loop: enough for leadDo.
func leadOnly(t *testing.T) *session {
	t.Helper()
	s := &session{lost: make(chan struct{}), leadReqs: make(chan leadReq)}
	s.loops.Go(s.leadLoop)
	t.Cleanup(func() {
		select {
		case <-s.lost:
		default:
			close(s.lost)
		}
		s.loops.Wait()
	})
	return s
}

func TestLeadDo(t *testing.T) {
	t.Run("OneAtATimeOnTheLoop", func(t *testing.T) {
		s := leadOnly(t)
		var running, most int // written only by leadLoop's requests
		done := make(chan error)
		for range 8 {
			go func() {
				done <- s.leadDo(func() {
					running++
					most = max(most, running)
					time.Sleep(time.Millisecond)
					running--
				})
			}()
		}
		for range 8 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if most != 1 {
			t.Fatalf("%d requests ran at once, want 1", most)
		}
	})

	t.Run("AfterLossReturnsAtOnce", func(t *testing.T) {
		s := leadOnly(t)
		close(s.lost)
		s.loops.Wait()
		ran := false
		if err := s.leadDo(func() { ran = true }); !errors.Is(err, errSessionLost) || ran {
			t.Fatalf("leadDo after the loss: err %v, ran %v; want errSessionLost, not run", err, ran)
		}
	})

	t.Run("InFlightAnsweredAfterLoss", func(t *testing.T) {
		s := leadOnly(t)
		started, release := make(chan struct{}), make(chan struct{})
		finished := false
		done := make(chan error)
		go func() {
			done <- s.leadDo(func() {
				close(started)
				<-release // the statement in flight when the session is lost
				finished = true
			})
		}()
		<-started
		close(s.lost)
		select {
		case err := <-done:
			t.Fatalf("leadDo returned (%v) before its request did", err)
		case <-time.After(20 * time.Millisecond):
		}
		close(release)
		if err := <-done; err != nil || !finished {
			t.Fatalf("in-flight request: err %v, finished %v; want nil, true", err, finished)
		}
		s.loops.Wait() // and the loop has returned
	})

	t.Run("NoAllocation", func(t *testing.T) {
		if raceEnabled {
			t.Skip("the race detector drops pooled reply channels")
		}
		s := leadOnly(t)
		n := 0
		count := func() { n++ }
		if a := testing.AllocsPerRun(200, func() { _ = s.leadDo(count) }); a != 0 {
			t.Fatalf("leadDo allocates %v times per request, want 0 (the caller's closure aside)", a)
		}
	})
}
