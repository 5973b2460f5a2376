package election

import (
	"log/slog"
	"testing"
)

// TestQueuedObserverNeverBlocks: an observer stuck in Observe delays no emit;
// the events that do not fit in its queue are dropped and counted on the next
// event it receives; events arrive in order; remove waits for the goroutine.
func TestQueuedObserverNeverBlocks(t *testing.T) {
	var os observers
	got := make(chan Event, observerQueueLen+2)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	remove := os.add(func(ev Event) {
		if first {
			first = false
			close(entered)
			<-release
		}
		got <- ev
	}, true, make(chan struct{}), slog.New(slog.DiscardHandler))

	os.emit(Event{Epoch: 0})
	<-entered // the observer holds event 0 and is stuck
	const extra = 5
	for i := range observerQueueLen + extra {
		os.emit(Event{Epoch: int64(i + 1)}) // returns at once: the test would hang otherwise
	}
	close(release)
	for i := range observerQueueLen + 1 {
		if ev := <-got; ev.Epoch != int64(i) || ev.Dropped != 0 {
			t.Fatalf("event %d: epoch %d, dropped %d; want epoch %d, none dropped", i, ev.Epoch, ev.Dropped, i)
		}
	}
	os.emit(Event{Epoch: -1})
	if ev := <-got; ev.Epoch != -1 || ev.Dropped != extra {
		t.Fatalf("the event after the overflow: epoch %d, dropped %d; want -1 and %d", ev.Epoch, ev.Dropped, extra)
	}
	remove()
	os.emit(Event{Epoch: -2})
	select {
	case ev := <-got:
		t.Fatalf("event %d delivered after remove", ev.Epoch)
	default:
	}
}

// TestQueuedObserverEndsWithElector: once the Elector has stopped, the
// observer's goroutine delivers what is queued and returns by itself.
func TestQueuedObserverEndsWithElector(t *testing.T) {
	var os observers
	stopped := make(chan struct{})
	var n int
	os.add(func(Event) { n++ }, true, stopped, slog.New(slog.DiscardHandler))
	entry := (*os.list.Load())[0]
	for range 3 {
		os.emit(Event{})
	}
	close(stopped)
	<-entry.q.done
	if n != 3 {
		t.Fatalf("%d events delivered before the goroutine ended, want the 3 queued", n)
	}
}

// TestSyncObserverRunsBeforeEmitReturns: an observer added with Synchronous is
// called on the emitting goroutine.
func TestSyncObserverRunsBeforeEmitReturns(t *testing.T) {
	var os observers
	var seen int64
	os.add(func(ev Event) { seen = ev.Epoch }, false, nil, nil)
	os.emit(Event{Epoch: 7})
	if seen != 7 {
		t.Fatalf("after emit returned the sync observer saw epoch %d, want 7", seen)
	}
}
