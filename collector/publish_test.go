package collector

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHubEvents(t *testing.T) {
	// A burst far beyond the channel's buffer reaches a subscriber that reads
	// only after it was published, in order, nothing dropped.
	t.Run("BurstBeyondBuffer", func(t *testing.T) {
		h := newHub()
		defer h.close()
		ch, cancel := h.subscribeEvents(8)
		defer cancel()
		const n = 1000
		evs := make([]Event, n)
		for i := range evs {
			evs[i] = Event{Kind: EventElected, Scope: fmt.Sprintf("s%d", i)}
		}
		h.publish(nil, evs)
		for i := range n {
			ev := recv(t, ch)
			if ev.Seq != uint64(i+1) || ev.Scope != evs[i].Scope {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
		if d := h.dropped.Load(); d != 0 {
			t.Fatalf("dropped %d", d)
		}
	})

	// A subscriber that stopped reading loses events once maxBacklog queued
	// up, and is told so: an EventDropped with the count, where the gap in Seq
	// is.
	t.Run("StalledSubscriberIsTold", func(t *testing.T) {
		h := newHub()
		defer h.close()
		ch, cancel := h.subscribeEvents(4)
		defer cancel()
		const n = 3 * maxBacklog
		for range n {
			h.publish(nil, []Event{{Kind: EventHeartbeatLate}})
		}
		var got, told, toldSince uint64
		last := uint64(0)
		for {
			ev := recv(t, ch)
			if ev.Kind == EventDropped {
				var k uint64
				if _, err := fmt.Sscanf(ev.Detail, "%d events", &k); err != nil || !strings.Contains(ev.Detail, "not delivered") {
					t.Fatalf("EventDropped detail %q", ev.Detail)
				}
				told += k
				toldSince += k
				h.publish(nil, []Event{{Kind: EventElected}}) // read again: the last one
				continue
			}
			if ev.Seq != last+1+toldSince {
				t.Fatalf("Seq %d after %d, told of %d dropped between", ev.Seq, last, toldSince)
			}
			last, toldSince = ev.Seq, 0
			got++
			if ev.Kind == EventElected {
				break
			}
		}
		if got+told != n+1 || told == 0 || told != h.dropped.Load() {
			t.Fatalf("got %d events, told of %d dropped (hub counted %d), want %d in all, some dropped", got, told, h.dropped.Load(), n+1)
		}
	})

	// Run returning closes the channel after what was queued and fits; cancel
	// after that is harmless, and later subscriptions are closed at once.
	t.Run("Close", func(t *testing.T) {
		h := newHub()
		ch, cancel := h.subscribeEvents(4)
		h.publish(nil, []Event{{Kind: EventElected}, {Kind: EventElected}})
		h.close()
		cancel()
		n := 0
		for range ch {
			n++
		}
		if n != 2 {
			t.Fatalf("%d events before the close, want 2", n)
		}
		late, _ := h.subscribeEvents(1)
		if _, ok := <-late; ok {
			t.Fatal("a subscription after close is open")
		}
	})
}

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return ev
	case <-time.After(wait):
		t.Fatal("no event")
	}
	return Event{}
}
