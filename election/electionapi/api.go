// Package electionapi serves a node's leadership over local HTTP, for programs
// in any language and for load balancers: `pgleader node --listen` and
// `pgleader run --listen`, or any Go service that embeds an Elector.
//
// Endpoints (JSON bodies; times in milliseconds):
//
//	GET  /v1/leader/{scope}   200 while this node's gate for the scope is open,
//	                          503 otherwise (404: not a scope of this node);
//	                          the body names the leader either way. For
//	                          HAProxy's option httpchk and readiness probes.
//	GET  /v1/ready/{scope}    200 while this node leads the scope AND its work is
//	                          up (Options.Ready: under pgleader run, the child
//	                          runs), 503 otherwise: for a load balancer that
//	                          must not route to a leader whose command is
//	                          crash-looping
//	GET  /v1/scopes           every scope: role, epoch, leader, trust remaining
//	GET  /v1/transitions      a stream: one "state" event per scope, then every
//	                          transition (elected, draining, ended,
//	                          leader_observed); a "trust" event per scope whose
//	                          gate is open every StreamInterval (500 ms) and
//	                          whenever its trust changes (one more, with 0, when
//	                          the gate closes); a keepalive every
//	                          StreamInterval. As Server-Sent Events (the
//	                          keepalive is the comment ": keepalive"), or as
//	                          newline-delimited JSON with ?format=ndjson (the
//	                          keepalive is {"event":"keepalive","at":TIME})
//	POST /v1/resign/{scope}   resign the scope (403 unless Options.AllowResign);
//	                          the request must carry X-Pgleader (RequestHeader)
//
// trust_remaining_ms is computed when the answer or the event is written, from
// the gate's own deadline: a client that acts outside the database may bound
// its action by it (less its own clock's error and the time since the answer).
//
// An answer is true when it is written, not after. Right before a side effect
// outside the database (an HTTP call, a payment, a message), check
// /v1/leader/{scope} again, or take the trust_remaining_ms of the latest trust
// event less its age; a stream that carries no line for more than 1 s (twice
// StreamInterval) means a node frozen, gone or cut off: treat it as not
// leading. The API tells; it does not fence. A client that writes to the
// database fences each write with SELECT pgleader.fence(scope, epoch) in its
// own transaction.
//
// Who may ask. Every process that can reach the address can read the API, so
// it listens on loopback or a Unix socket (mode 0660) unless told otherwise.
// A request whose Host is not a loopback address, localhost, the address the
// connection arrived at or a name of Options.Hosts is answered 421: a web page
// that had its own name resolved to 127.0.0.1 (DNS rebinding) reads nothing. A
// request that changes state must carry X-Pgleader and must not come from
// another site (Sec-Fetch-Site, Origin): a browser cannot send such a request
// from a web page without a CORS preflight, which the API never grants. Serve
// holds at most DefaultMaxConns connections and a Handler DefaultMaxStreams
// streams; more are answered 503 at once, and slow or idle clients are cut off
// (see Serve).
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package electionapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/pgleader/pgleader/election"
)

// Options configure the Handler.
type Options struct {
	// AllowResign enables POST /v1/resign/{scope}. Off by default: anyone who can
	// reach the address could end the term.
	AllowResign bool
	// Extra, if set, adds its result under "supervisor" in /v1/scopes and
	// /v1/leader/{scope} (pgleader run: the child's command, pid and state).
	Extra func() any
	// Ready, if set, says whether the node's work for a scope is up (pgleader
	// run: its child runs); /v1/ready/{scope} answers 200 only while the node
	// leads and Ready says so. Nil: /v1/ready is /v1/leader.
	Ready func(scope string) bool
	// Hosts are names, besides loopback addresses, "localhost" and the address
	// a connection arrived at, that a request's Host header may carry (the
	// host of --listen when it is a name). Any other Host is refused with 421:
	// a web page that had its own name resolved to this address (DNS
	// rebinding) must not read the API.
	Hosts []string
	// MaxStreams bounds the /v1/transitions streams open at once
	// (DefaultMaxStreams when ≤ 0); one more is answered 503.
	MaxStreams int
	// Log receives one line per resign request and per failed stream write.
	Log *slog.Logger
}

// DefaultMaxStreams is how many /v1/transitions streams a Handler serves at
// once by default.
const DefaultMaxStreams = 32

// ScopeState is one scope as this node sees it, at the moment of the request.
type ScopeState struct {
	Scope string `json:"scope"`
	Node  string `json:"node"` // this node
	// Role: leader (gate open), pending (holds the term, gate closed), follower.
	Role    election.Role `json:"role"`
	Leading bool          `json:"leading"` // Role == leader: the gate is open now
	// Leader and Epoch: the leader as this node last saw it ("" before any).
	Leader string `json:"leader"`
	Epoch  int64  `json:"epoch"`
	// TrustRemainingMS: how long the gate stays open without a further
	// heartbeat, at the moment of the answer; 0 unless Leading.
	TrustRemainingMS float64 `json:"trust_remaining_ms"`
	Supervisor       any     `json:"supervisor,omitempty"`
}

// State returns the scope's state now.
func State(e *election.Elector, sc *election.Scope) ScopeState {
	st := ScopeState{Scope: sc.Name(), Node: e.NodeID(), Role: sc.Role()}
	st.Leader, st.Epoch = sc.Leader()
	if st.Role == election.RoleLeader {
		st.Leading = true
		st.TrustRemainingMS = float64(sc.TrustRemaining().Microseconds()) / 1000
	}
	return st
}

// Handler returns the API of e.
func Handler(e *election.Elector, opt Options) http.Handler {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.MaxStreams <= 0 {
		opt.MaxStreams = DefaultMaxStreams
	}
	h := &handler{e: e, opt: opt, cop: http.NewCrossOriginProtection()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/leader/{scope}", h.leader)
	mux.HandleFunc("GET /v1/ready/{scope}", h.ready)
	mux.HandleFunc("GET /v1/scopes", h.scopes)
	mux.HandleFunc("GET /v1/transitions", h.transitions)
	mux.HandleFunc("POST /v1/resign/{scope}", h.resign)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint: " + r.Method + " " + r.URL.Path +
			"; try GET /v1/leader/{scope}, GET /v1/ready/{scope}, GET /v1/scopes, GET /v1/transitions, POST /v1/resign/{scope}"})
	})
	h.mux = mux
	return h
}

type handler struct {
	e   *election.Elector
	opt Options
	mux *http.ServeMux
	cop *http.CrossOriginProtection

	streams atomic.Int64 // /v1/transitions streams open
}

// RequestHeader is the header a request that changes state (POST) must carry,
// with any value (X-Pgleader: 1). A browser sends a custom header cross-site
// only after a CORS preflight, which the API never grants.
const RequestHeader = "X-Pgleader"

// ServeHTTP checks who a request is addressed to and, for a request that
// changes state, where it comes from, before the endpoints see it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r) {
		writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": fmt.Sprintf(
			"Host %q is not a name of this node's API (a web page may have pointed its own name here: DNS rebinding); address it as 127.0.0.1, localhost or its --listen host", r.Host)})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	default:
		if err := h.cop.Check(r); err != nil {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-site request refused (" + err.Error() + "): a web page may not change this node's leadership; send the request from a script or tool, with the header " + RequestHeader + ": 1"})
			return
		}
		if r.Header.Get(RequestHeader) == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": r.Method + " needs the header " + RequestHeader + ": 1 (which a web page cannot send cross-site), e.g. curl -X POST -H '" + RequestHeader + ": 1' …"})
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether r is addressed to this API: no Host (HTTP/1.0,
// which no browser sends), a loopback address, localhost, the address the
// connection arrived at, or a name of Options.Hosts. A connection over a
// Unix socket is not checked: a browser cannot open one.
func (h *handler) hostAllowed(r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local != nil && local.Network() == "unix" {
		return true
	}
	host := r.Host
	if hp, _, err := net.SplitHostPort(host); err == nil {
		host = hp
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.WithZone("").Unmap()
		if ip.IsLoopback() {
			return true
		}
		if ta, ok := local.(*net.TCPAddr); ok {
			if lip, ok := netip.AddrFromSlice(ta.IP); ok && lip.Unmap() == ip {
				return true
			}
		}
		return false
	}
	for _, name := range h.opt.Hosts {
		if strings.EqualFold(host, name) {
			return true
		}
	}
	return false
}

func (h *handler) scope(w http.ResponseWriter, r *http.Request) *election.Scope {
	name := r.PathValue("scope")
	for _, sc := range h.e.Scopes() {
		if sc.Name() == name {
			return sc
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("node %s does not campaign for scope %q", h.e.NodeID(), name)})
	return nil
}

func (h *handler) state(sc *election.Scope) ScopeState {
	st := State(h.e, sc)
	if h.opt.Extra != nil {
		st.Supervisor = h.opt.Extra()
	}
	return st
}

func (h *handler) leader(w http.ResponseWriter, r *http.Request) {
	sc := h.scope(w, r)
	if sc == nil {
		return
	}
	st := h.state(sc)
	code := http.StatusServiceUnavailable
	if st.Leading {
		code = http.StatusOK
	}
	writeJSON(w, code, st)
}

func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	sc := h.scope(w, r)
	if sc == nil {
		return
	}
	st := h.state(sc)
	code := http.StatusServiceUnavailable
	if st.Leading && (h.opt.Ready == nil || h.opt.Ready(sc.Name())) {
		code = http.StatusOK
	}
	writeJSON(w, code, st)
}

func (h *handler) scopes(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Node       string       `json:"node"`
		Scopes     []ScopeState `json:"scopes"`
		Supervisor any          `json:"supervisor,omitempty"`
	}{Node: h.e.NodeID(), Scopes: []ScopeState{}}
	for _, sc := range h.e.Scopes() {
		out.Scopes = append(out.Scopes, State(h.e, sc))
	}
	if h.opt.Extra != nil {
		out.Supervisor = h.opt.Extra()
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) resign(w http.ResponseWriter, r *http.Request) {
	if !h.opt.AllowResign {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "resigning through the API is off; start the node with --listen-allow-resign"})
		return
	}
	sc := h.scope(w, r)
	if sc == nil {
		return
	}
	h.opt.Log.Info("resign requested through the local API", "scope", sc.Name(), "remote", r.RemoteAddr)
	err := sc.Resign(r.Context())
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, h.state(sc))
	case errors.Is(err, election.ErrNotLeader):
		writeJSON(w, http.StatusConflict, map[string]string{"error": fmt.Sprintf("node %s does not lead %q", h.e.NodeID(), sc.Name())})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}
