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
	Missed           int           `json:"missed,omitempty"` // transitions dropped before this one (a slow reader)
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

// trustChanges reports, without blocking, that some term's trust changed: its
// gate opened or closed, or a heartbeat extended or ended it.
func trustChanges(e *election.Elector) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	remove := e.ObserveSync(election.ObserverFunc(func(ev election.Event) {
		switch ev.Kind {
		case election.EventHeartbeatOK, election.EventHeartbeatFailed:
			if len(ev.Terms) == 0 {
				return // a follower's heartbeat
			}
		case election.EventGateOpen, election.EventGateClosed, election.EventLost, election.EventResigned:
		default:
			return
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}))
	return ch, remove
}

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
	// Subscribe first, then send the current state: no transition falls between.
	ch, cancel := h.e.Subscribe()
	defer cancel()
	changed, unobserve := trustChanges(h.e)
	defer unobserve()
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
	ctx := r.Context()
	tick := time.NewTicker(StreamInterval)
	defer tick.Stop()
	for {
		var ev Event
		select {
		case <-ctx.Done():
			return
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
		case t, ok := <-ch:
			if !ok {
				return // the Elector stopped
			}
			ev = Event{Event: t.Kind.String(), Scope: t.Scope, Epoch: t.Epoch, Leader: t.Holder, At: t.At, Missed: t.Missed}
			switch t.Kind {
			case election.Revoked:
				ev.Event, ev.Reason, ev.Lost = "ended", string(t.Reason), !released(t.Reason)
			case election.Elected:
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
