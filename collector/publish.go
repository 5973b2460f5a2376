package collector

import (
	"sync"
	"sync/atomic"
)

// DefaultEventBuffer is the buffer of a Subscribe channel asked for with a size of
// zero or less.
const DefaultEventBuffer = 256

// hub hands snapshots and events to subscribers without ever waiting for one.
type hub struct {
	mu      sync.Mutex
	closed  bool // Run returned: channels closed, new ones are returned closed
	seq     uint64
	latest  *Snapshot
	events  map[chan Event]struct{}
	updates map[chan *Snapshot]struct{}
	dropped atomic.Uint64
	current atomic.Pointer[Snapshot]
}

func newHub() *hub {
	return &hub{events: map[chan Event]struct{}{}, updates: map[chan *Snapshot]struct{}{}}
}

// publish makes snap the latest snapshot (if not nil), then delivers evs in order,
// then snap to the update subscribers. Events get their Seq here, under the lock,
// so they are numbered in delivery order whoever emits them.
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
		for ch := range h.events {
			select {
			case ch <- ev:
			default:
				h.dropped.Add(1)
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

func (h *hub) subscribeEvents(buffer int) (<-chan Event, func()) {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan Event, buffer)
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	h.events[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.events[ch]; ok {
			delete(h.events, ch)
			close(ch)
		}
	}
}

// close closes every subscriber channel; later subscriptions get closed channels.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.events {
		close(ch)
	}
	for ch := range h.updates {
		close(ch)
	}
	clear(h.events)
	clear(h.updates)
}
