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

	// The two transitions of a term as a service sees them, once per term
	// each: not lines of the --events file, which records gates and terms.
	EventElected EventKind = "elected" // this node leads, its gate opened for the first time (Token set)
	EventRevoked EventKind = "revoked" // a term that was elected ended (Reason; Token: the ended term's)
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
	// Token: for elected, the term's token, valid while the gate that just
	// opened stays open (pass it to Fence, watch its Draining); for revoked,
	// the ended term's (no longer valid).
	Token Token

	// Dropped: for a queued observer (Elector.Observe without Synchronous),
	// how many events were dropped just before this one because its queue was
	// full.
	Dropped uint64
}

// ObserveOption changes how Elector.Observe delivers events.
type ObserveOption func(*observeOptions)

type observeOptions struct{ sync bool }

// Synchronous makes the engine call the observer itself, on its own goroutines,
// before it goes on: an event reaches the observer before anything the engine
// does next (the events file of `pgleader node --events` relies on this: a
// fenced write it records never precedes the term it records). Every
// microsecond the observer takes delays heartbeats and claims: it must return
// at once, must not block, and must not call back into the Elector (Scope.Do,
// Scope.Lead, Resign). Without it, an observer runs on a goroutine of its own.
func Synchronous() ObserveOption { return func(o *observeOptions) { o.sync = true } }

// observerQueueLen is how many events a queued observer may fall behind before
// events are dropped.
const observerQueueLen = 4096

// observers is the Elector's set of observers, replaced as a whole (copy on
// write) so that emitting reads it without a lock.
type observers struct {
	mu   sync.Mutex // serialises changes
	list atomic.Pointer[[]*observerEntry]
}

// observerEntry is one registration: synchronous when q is nil.
type observerEntry struct {
	o func(Event)
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
func (q *observerQueue) run(o func(Event), stopped <-chan struct{}, log *slog.Logger) {
	defer close(q.done)
	deliver := func(ev Event) {
		if ev.Dropped > 0 {
			log.Warn("observer fell behind: events dropped", "dropped", ev.Dropped, "queue", cap(q.ch))
		}
		o(ev)
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
func (os *observers) add(o func(Event), queued bool, stopped <-chan struct{}, log *slog.Logger) func() {
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
			e.o(ev)
		}
	}
}

func (os *observers) empty() bool {
	p := os.list.Load()
	return p == nil || len(*p) == 0
}
