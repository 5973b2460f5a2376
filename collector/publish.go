package collector

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultEventBuffer is the buffer of a Subscribe channel asked for with a
	// size of zero or less.
	DefaultEventBuffer = 256
	// maxBacklog bounds the events queued for one subscriber while its pump
	// waits to hand on the previous queue. A read, or one streamed transaction, brings two events per scope
	// of a failover at once (a batch claims up to 250 scopes; a read takes up to
	// 1000 audit rows), far more than a channel holds: a burst waits here, and
	// only a subscriber that stopped reading loses events.
	maxBacklog = 1 << 16
)

// hub hands snapshots and events to subscribers without ever waiting for one.
// Each event subscriber has a queue and a pump goroutine that moves the queue
// into its channel as fast as the subscriber reads; the hub owns the pumps and
// close waits for them.
type hub struct {
	mu      sync.Mutex
	closed  bool // Run returned: channels closed, new ones are returned closed
	seq     uint64
	latest  *Snapshot
	events  map[*eventSub]struct{}
	updates map[chan *Snapshot]struct{}
	pumps   sync.WaitGroup
	closing chan struct{} // closed by close
	dropped atomic.Uint64
	current atomic.Pointer[Snapshot]
}

// eventSub is one Subscribe: the events published for it and not yet in its
// channel. queue and missed are guarded by hub.mu.
type eventSub struct {
	ch       chan Event
	queue    []Event
	missed   uint64        // events dropped since the queue was last taken
	missedAt time.Time     // the last one's time
	wake     chan struct{} // buffer 1: the queue grew
	stop     chan struct{} // closed by cancel
	done     chan struct{} // closed when the pump returned (and ch is closed)
}

func newHub() *hub {
	return &hub{events: map[*eventSub]struct{}{}, updates: map[chan *Snapshot]struct{}{}, closing: make(chan struct{})}
}

// publish makes snap the latest snapshot (if not nil), then queues evs in order
// for every event subscriber, then offers snap to the update subscribers. Events
// get their Seq here, under the lock, so they are numbered in delivery order
// whoever emits them. It never waits for a subscriber.
func (h *hub) publish(snap *Snapshot, evs []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if snap != nil {
		h.latest = snap
		h.current.Store(snap)
	}
	for _, ev := range evs {
		h.seq++
		ev.Seq = h.seq
		if h.closed {
			continue
		}
		for sub := range h.events {
			h.enqueue(sub, ev)
		}
	}
	for sub := range h.events {
		if len(sub.queue) > 0 {
			select {
			case sub.wake <- struct{}{}:
			default:
			}
		}
	}
	if snap == nil || h.closed {
		return
	}
	for ch := range h.updates {
		offerLatest(ch, snap)
	}
}

// offerLatest puts s in ch (buffer 1), replacing a snapshot not yet taken. Only
// the hub sends on ch (under its lock), so the loop ends within two rounds.
func offerLatest(ch chan *Snapshot, s *Snapshot) {
	for {
		select {
		case ch <- s:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

func (h *hub) subscribeUpdates() (<-chan *Snapshot, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan *Snapshot, 1)
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	if h.latest != nil {
		ch <- h.latest
	}
	h.updates[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.updates[ch]; ok {
			delete(h.updates, ch)
			close(ch)
		}
	}
}

// enqueue queues ev for sub (under h.mu). A full queue drops ev and counts it;
// the pump follows what the queue held with an EventDropped that says how many
// events the subscriber missed there, so that a gap is never silent.
func (h *hub) enqueue(sub *eventSub, ev Event) {
	if len(sub.queue) >= maxBacklog {
		sub.missed++
		sub.missedAt = ev.At
		h.dropped.Add(1)
		return
	}
	sub.queue = append(sub.queue, ev)
}

// take returns sub's queue, followed by an EventDropped if events were dropped
// after it.
func (h *hub) take(sub *eventSub) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	batch := sub.queue
	sub.queue = nil
	if sub.missed > 0 {
		batch = append(batch, Event{At: sub.missedAt, Kind: EventDropped, Detail: fmt.Sprintf(
			"%d events after this point were not delivered to this subscriber: it stopped reading while %d queued up (Health.DroppedEvents counts them)",
			sub.missed, maxBacklog)})
		sub.missed = 0
	}
	return batch
}

func (h *hub) subscribeEvents(buffer int) (<-chan Event, func()) {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sub := &eventSub{ch: make(chan Event, buffer), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	if h.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	h.events[sub] = struct{}{}
	h.pumps.Go(func() { h.pump(sub) })
	return sub.ch, func() {
		h.mu.Lock()
		_, ok := h.events[sub]
		if ok {
			delete(h.events, sub)
			close(sub.stop)
		}
		h.mu.Unlock()
		<-sub.done
	}
}

// pump moves sub's queue into its channel, in order, waiting for the
// subscriber to read, until cancel. Once Run returned (closing), it puts what
// is still queued in the channel as far as it fits without waiting, counts the
// rest as dropped, and closes the channel.
func (h *hub) pump(sub *eventSub) {
	defer close(sub.done)
	defer close(sub.ch)
	closing := false
	for {
		batch := h.take(sub)
		if closing && len(batch) == 0 {
			return
		}
		for i := 0; i < len(batch); {
			select {
			case sub.ch <- batch[i]:
				i++
				continue
			default:
			}
			if closing {
				h.dropped.Add(uint64(len(batch) - i))
				return
			}
			select {
			case sub.ch <- batch[i]:
				i++
			case <-sub.stop:
				return // unsubscribed: nobody reads the rest
			case <-h.closing:
				closing = true
			}
		}
		if closing {
			continue // take what was queued before close
		}
		select {
		case <-sub.wake:
		case <-sub.stop:
			return
		case <-h.closing:
			closing = true
		}
	}
}

// close closes every subscriber channel, after the pumps put in them what
// fits of their queues; later subscriptions get closed channels. It returns
// once the pumps have returned.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	close(h.closing)
	clear(h.events)
	for ch := range h.updates {
		close(ch)
	}
	clear(h.updates)
	h.mu.Unlock()
	h.pumps.Wait()
}
