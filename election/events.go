package election

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind names a fine-grained engine event. The values are the `event` field of
// `pgleader node --events` lines (docs/design.md, "The CLI contract").
type EventKind string

// Engine events, in the order a term normally produces them.
const (
	EventAcquired        EventKind = "acquired"         // won the lock and a new epoch; gate still closed
	EventGateOpen        EventKind = "gate_open"        // the gate opened (TrustUntilMonoNS set)
	EventHeartbeatOK     EventKind = "heartbeat_ok"     // one heartbeat round trip succeeded; Terms extended to TrustUntilMonoNS
	EventHeartbeatFailed EventKind = "heartbeat_failed" // one heartbeat round trip failed (Err, Reason); Terms end
	EventGateClosed      EventKind = "gate_closed"      // the gate closed (Reason)
	EventLost            EventKind = "lost"             // the term ended without a clean release (Reason)
	EventResigned        EventKind = "resigned"         // the term was released cleanly (Reason)
	EventObserved        EventKind = "leader_observed"  // a follower saw another holder
)

// TermRef names one term: a scope and the epoch this node holds it with.
type TermRef struct {
	Scope string
	Epoch int64
}

// Event is one engine event. MonoNS and TrustUntilMonoNS are CLOCK_MONOTONIC
// nanoseconds, comparable between processes on one host.
//
// A heartbeat is one round trip for every scope of the node, so heartbeat_ok and
// heartbeat_failed come once per round trip, for followers too (a follower's
// heartbeat proves it reaches the database): Terms lists the terms the round trip
// confirmed (or, when it failed, the terms that end with it), empty for a node
// that leads nothing, and Scope and Epoch are zero. Every other event concerns
// one term, named by Scope and Epoch.
type Event struct {
	Kind             EventKind
	Scope            string
	Node             string
	Epoch            int64
	MonoNS           int64
	Time             time.Time
	TrustUntilMonoNS int64         // gate_open, heartbeat_ok
	Reason           Reason        // gate_closed, lost, resigned, heartbeat_failed
	Err              error         // heartbeat_failed: what failed
	Latency          time.Duration // heartbeat_ok, heartbeat_failed: round-trip time
	Holder           string        // leader_observed: who leads now
	Terms            []TermRef     // heartbeat_ok, heartbeat_failed: the terms of the round trip

	// Dropped: for an observer added with Elector.Observe, how many events were
	// dropped just before this one because its queue was full (see Observe).
	Dropped uint64
}

// Observer receives engine events. Register one with Elector.Observe (queued:
// it cannot delay the engine), or with Config.Observer or Elector.ObserveSync
// (synchronous: called on the engine's goroutines before the engine goes on).
// Events of one scope arrive in order. An observer must not call back into the
// Elector.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// observerQueueLen is how many events a queued observer (Elector.Observe) may fall
// behind before events are dropped.
const observerQueueLen = 4096

// observers is the Elector's set of observers, replaced as a whole (copy on
// write) so that emitting reads it without a lock.
type observers struct {
	mu   sync.Mutex // serialises changes
	list atomic.Pointer[[]*observerEntry]
}

// observerEntry is one registration: synchronous when q is nil.
type observerEntry struct {
	o Observer
	q *observerQueue
}

// observerQueue delivers a queued observer's events on its own goroutine,
// started by the first event (an Elector that never runs leaves none behind).
// Invariant: emitting never blocks on it; an event that does not fit is counted
// in dropped, and the count rides on the next event that fits (Event.Dropped).
type observerQueue struct {
	ch      chan Event
	dropped atomic.Uint64 // dropped and not yet reported
	quit    chan struct{} // closed by remove
	done    chan struct{} // closed when the goroutine has returned
	once    sync.Once     // starts the goroutine
	start   func()        // the goroutine's body (run, bound to its observer)
}

func (q *observerQueue) offer(ev Event) {
	q.once.Do(func() { go q.start() })
	ev.Dropped = q.dropped.Swap(0)
	select {
	case q.ch <- ev:
	default:
		q.dropped.Add(ev.Dropped + 1)
	}
}

// run delivers until remove (quit) or until the Elector has stopped (stopped),
// then delivers what is queued and returns. A drop still unreported at the end
// is logged.
func (q *observerQueue) run(o Observer, stopped <-chan struct{}, log *slog.Logger) {
	defer close(q.done)
	deliver := func(ev Event) {
		if ev.Dropped > 0 {
			log.Warn("observer fell behind: events dropped", "dropped", ev.Dropped, "queue", cap(q.ch))
		}
		o.Observe(ev)
	}
	for {
		select {
		case ev := <-q.ch:
			deliver(ev)
			continue
		case <-q.quit:
		case <-stopped:
		}
		for {
			select {
			case ev := <-q.ch:
				deliver(ev)
			default:
				if n := q.dropped.Swap(0); n > 0 {
					log.Warn("observer fell behind: events dropped at the end", "dropped", n, "queue", cap(q.ch))
				}
				return
			}
		}
	}
}

// add registers o; a queued observer gets its goroutine at its first event,
// which ends at remove or once stopped is closed (the Elector has stopped:
// nothing more is emitted).
func (os *observers) add(o Observer, queued bool, stopped <-chan struct{}, log *slog.Logger) func() {
	entry := &observerEntry{o: o}
	if queued {
		q := &observerQueue{ch: make(chan Event, observerQueueLen), quit: make(chan struct{}), done: make(chan struct{})}
		q.start = func() { q.run(o, stopped, log) }
		entry.q = q
	}
	os.mu.Lock()
	defer os.mu.Unlock()
	var cur []*observerEntry
	if p := os.list.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*observerEntry(nil), cur...), entry)
	os.list.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			os.mu.Lock()
			cur := *os.list.Load()
			next := make([]*observerEntry, 0, len(cur))
			for _, e := range cur {
				if e != entry {
					next = append(next, e)
				}
			}
			os.list.Store(&next)
			os.mu.Unlock()
			if q := entry.q; q != nil {
				close(q.quit)
				q.once.Do(func() { close(q.done) }) // never started: nothing to wait for
				<-q.done
			}
		})
	}
}

func (os *observers) emit(ev Event) {
	p := os.list.Load()
	if p == nil {
		return
	}
	for _, e := range *p {
		if e.q != nil {
			e.q.offer(ev)
		} else {
			e.o.Observe(ev)
		}
	}
}

func (os *observers) empty() bool {
	p := os.list.Load()
	return p == nil || len(*p) == 0
}

// TransitionKind is the kind of a leadership transition.
type TransitionKind int

// Transition kinds.
const (
	// Elected: this node became leader of Scope with Epoch and its gate opened.
	Elected TransitionKind = iota + 1
	// Revoked: this node's term Epoch of Scope ended (Reason says why).
	Revoked
	// LeaderObserved: another node (Holder) leads Scope with Epoch.
	LeaderObserved
)

// String returns the kind's name: elected, revoked or leader_observed.
func (k TransitionKind) String() string {
	switch k {
	case Elected:
		return "elected"
	case Revoked:
		return "revoked"
	case LeaderObserved:
		return "leader_observed"
	}
	return "unknown"
}

// Transition is a change of leadership as one node sees it.
type Transition struct {
	Kind   TransitionKind
	Scope  string
	Epoch  int64
	Holder string // the leader (this node for Elected and Revoked)
	Reason Reason // Revoked: why the term ended (protocol.ReasonResigned, protocol.ReasonShutdown, protocol.ReasonLostConnection, …)
	// Token is the term's token: for Elected, valid while the gate that just
	// opened stays open (pass it to Fence); for Revoked, the ended term's (no
	// longer valid). Zero for LeaderObserved.
	Token Token
	At    time.Time
	// Missed counts transitions dropped before this one because the subscriber
	// fell more than Config.SubscriberBuffer behind.
	Missed int
}

// broker fans transitions out to subscribers without ever blocking the publisher.
type broker struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	limit  int
	closed bool // after closeAll: new subscriptions get a closed channel
}

type subscriber struct {
	mu      sync.Mutex
	queue   []Transition
	wake    chan struct{}
	out     chan Transition
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func newBroker(limit int) *broker {
	return &broker{subs: map[*subscriber]struct{}{}, limit: max(limit, 1)}
}

func (b *broker) subscribe() (<-chan Transition, func()) {
	s := &subscriber{wake: make(chan struct{}, 1), out: make(chan Transition),
		done: make(chan struct{}), stopped: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	go s.deliver() // owned by the subscription: ends on cancel or closeAll
	cancel := func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
		s.stop()
	}
	return s.out, cancel
}

func (s *subscriber) deliver() {
	defer close(s.stopped)
	defer close(s.out)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		t := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.out <- t:
		case <-s.done:
			return
		}
	}
}

func (s *subscriber) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
}

func (b *broker) publish(t Transition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.mu.Lock()
		if len(s.queue) >= b.limit {
			// Drop the oldest queued; the next one delivered reports the gap.
			dropped := s.queue[0]
			s.queue = s.queue[1:]
			if len(s.queue) > 0 {
				s.queue[0].Missed += dropped.Missed + 1
			} else {
				t.Missed += dropped.Missed + 1
			}
		}
		s.queue = append(s.queue, t)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// closeAll ends every subscription (their channels are closed).
func (b *broker) closeAll() {
	b.mu.Lock()
	subs := b.subs
	b.subs = map[*subscriber]struct{}{}
	b.closed = true
	b.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}
