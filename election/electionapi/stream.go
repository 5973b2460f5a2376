package electionapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/protocol"
)

// Event is one line of /v1/transitions.
type Event struct {
	// Event: state, elected, draining, ended, leader_observed, trust.
	Event  string    `json:"event"`
	Scope  string    `json:"scope"`
	Epoch  int64     `json:"epoch"`
	Leader string    `json:"leader"`
	Reason string    `json:"reason,omitempty"` // ended: why the term ended
	Lost   bool      `json:"lost,omitempty"`   // ended suddenly (not resigned, shut down or handed over)
	At     time.Time `json:"at"`
	// Role and TrustRemainingMS: for state and trust events, computed when
	// the line is written.
	Role             election.Role `json:"role,omitempty"`
	TrustRemainingMS *float64      `json:"trust_remaining_ms,omitempty"`
	Missed           int           `json:"missed,omitempty"` // engine events dropped before this one (a slow reader)
}

// Keepalive is the line /v1/transitions?format=ndjson sends every
// StreamInterval ({"event":"keepalive","at":"…"}); a Server-Sent Events
// stream sends the comment ": keepalive" instead.
type Keepalive struct {
	Event string    `json:"event"` // "keepalive"
	At    time.Time `json:"at"`
}

// StreamInterval is how often /v1/transitions sends a keepalive and, for each
// scope whose gate is open, a trust event. A watcher that hears nothing for
// twice as long (1 s) must take the node for frozen or gone: not leading.
const StreamInterval = 500 * time.Millisecond

// released reasons end a term on request; every other reason is a loss.
func released(r election.Reason) bool {
	return r == protocol.ReasonResigned || r == protocol.ReasonShutdown || r == protocol.ReasonHandedOver
}

// streamWriteTimeout bounds each write of a stream: a client that stops
// reading is dropped once the socket's buffers are full for that long.
const streamWriteTimeout = 5 * time.Second

func (h *handler) transitions(w http.ResponseWriter, r *http.Request) {
	if n := h.streams.Add(1); n > int64(h.opt.MaxStreams) {
		h.streams.Add(-1)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf(
			"too many /v1/transitions streams (%d open): close one (the limit is --listen-max-streams)", h.opt.MaxStreams)})
		return
	}
	defer h.streams.Add(-1)
	// The server's read and write timeouts bound a request; a stream lives on,
	// and bounds each of its writes instead. (net/http's background read, which
	// ends the request when the client hangs up, runs without a deadline.)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	ndjson := r.URL.Query().Get("format") == "ndjson" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	ctx := r.Context()
	// Observe first, then send the current state: no transition falls between.
	// The observer runs on a goroutine of its own (it cannot delay the engine)
	// and hands the stream its transitions, and a wake-up when some term's trust
	// changed (its gate opened or closed, a heartbeat extended or ended it); it
	// waits for the stream, so a slow client makes the engine drop events for
	// this stream alone, which the next transition reports (Missed).
	transitions := make(chan election.Event)
	changed := make(chan struct{}, 1)
	quit := make(chan struct{}) // closed when the stream ends, before unobserve waits for the observer
	var missed uint64           // the observer's goroutine alone
	unobserve := h.e.Observe(func(ev election.Event) {
		missed += ev.Dropped
		switch ev.Kind {
		case election.EventElected, election.EventRevoked, election.EventObserved:
			ev.Dropped, missed = missed, 0
			select {
			case transitions <- ev:
			case <-quit:
			}
			return
		case election.EventHeartbeatOK, election.EventHeartbeatFailed:
			if len(ev.Terms) == 0 {
				return // a follower's heartbeat
			}
		case election.EventGateOpen, election.EventGateClosed, election.EventLost, election.EventResigned:
		default:
			return
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer func() { close(quit); unobserve() }()
	if ndjson {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	write := func(name string, v any) error {
		b, _ := json.Marshal(v)
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		var err error
		switch {
		case ndjson:
			_, err = fmt.Fprintf(w, "%s\n", b)
		case name == "keepalive":
			_, err = fmt.Fprint(w, ": keepalive\n\n")
		default:
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		}
		if err != nil {
			return err
		}
		return rc.Flush()
	}
	send := func(ev Event) error { return write(ev.Event, ev) }
	// open: the scopes whose gate was open at their last state or trust
	// event; one more trust event tells a watcher when it closes.
	open := map[string]bool{}
	scopeState := func(kind string, sc *election.Scope) Event {
		st := State(h.e, sc)
		open[st.Scope] = st.Leading
		trust := st.TrustRemainingMS
		return Event{Event: kind, Scope: st.Scope, Epoch: st.Epoch, Leader: st.Leader, At: time.Now(), Role: st.Role, TrustRemainingMS: &trust}
	}
	sendTrust := func() error {
		for _, sc := range h.e.Scopes() {
			if !open[sc.Name()] && sc.Role() != election.RoleLeader {
				continue
			}
			if err := send(scopeState("trust", sc)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, sc := range h.e.Scopes() {
		if send(scopeState("state", sc)) != nil {
			return
		}
	}
	draining := make(chan Event, 16)
	tick := time.NewTicker(StreamInterval)
	defer tick.Stop()
	for {
		var ev Event
		select {
		case <-ctx.Done():
			return
		case <-h.e.Done():
			return // the Elector stopped
		case <-tick.C:
			if write("keepalive", Keepalive{Event: "keepalive", At: time.Now()}) != nil || sendTrust() != nil {
				return
			}
			continue
		case <-changed:
			if sendTrust() != nil {
				return
			}
			continue
		case ev = <-draining:
		case t := <-transitions:
			ev = Event{Event: string(t.Kind), Scope: t.Scope, Epoch: t.Epoch, Leader: t.Holder, At: t.Time, Missed: int(t.Dropped)}
			switch t.Kind {
			case election.EventRevoked:
				ev.Event, ev.Reason, ev.Lost = "ended", string(t.Reason), !released(t.Reason)
			case election.EventElected:
				// Draining is a moment within the term: watch the token for it.
				go func(tok election.Token) {
					select {
					case <-tok.Draining():
						select {
						case draining <- Event{Event: "draining", Scope: tok.Scope, Epoch: tok.Epoch, Leader: tok.Holder, At: time.Now()}:
						case <-ctx.Done():
						}
					case <-tok.Context().Done():
					case <-ctx.Done():
					}
				}(t.Token)
			}
		}
		if send(ev) != nil {
			h.opt.Log.Debug("transitions stream closed by the client", "remote", r.RemoteAddr)
			return
		}
	}
}
