package election

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
)

// Role is what this node is in a scope's election, at one moment.
type Role string

// Roles of a node in a scope.
const (
	// RoleLeader: this node leads the scope and its gate is open.
	RoleLeader Role = "leader"
	// RolePending: this node holds the scope's term but its gate is closed (it
	// waits out its predecessor, drains, or missed a heartbeat).
	RolePending Role = "pending"
	// RoleFollower: another node leads, or nobody does yet.
	RoleFollower Role = "follower"
)

// Role returns this node's role in the scope right now.
func (s *Scope) Role() Role {
	if s == nil || s.e == nil {
		return RoleFollower
	}
	if _, err := s.current(); err == nil {
		return RoleLeader
	}
	if s.term.Load() != nil {
		return RolePending
	}
	return RoleFollower
}

// Leader returns the leader of the scope as this node last saw it, and its
// epoch: this node's id while it leads, another node's as heartbeats and claims
// report it, "" before any leader was seen. It reads local state only (the etcd
// election's Leader verb, without a round trip); the database decides.
func (s *Scope) Leader() (node string, epoch int64) {
	if s == nil || s.e == nil {
		return "", 0
	}
	if t := s.term.Load(); t != nil {
		return s.e.cfg.NodeID, t.epoch
	}
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	return s.observedHolder, s.observedEpoch
}

// Health is a node's view of itself, for probes and diagnostics.
type Health struct {
	Node string `json:"node"`
	// Running: started and not yet stopped.
	Running bool `json:"running"`
	// Session: the leadership session is open.
	Session bool `json:"session"`
	// LastHeartbeat: when the last heartbeat succeeded (zero before the first).
	// Leaders and followers heartbeat alike, so a recent one proves the node
	// reaches the database.
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	// Healthy: running, with a heartbeat within the trust window (always, in
	// standalone mode and for electiontest's Elector).
	Healthy bool          `json:"healthy"`
	Scopes  []ScopeHealth `json:"scopes"`
}

// ScopeHealth is one scope in Health.
type ScopeHealth struct {
	Scope          string        `json:"scope"`
	Role           Role          `json:"role"`
	Leader         string        `json:"leader,omitempty"` // as this node last saw it
	Epoch          int64         `json:"epoch,omitempty"`
	TrustRemaining time.Duration `json:"trust_remaining_ns,omitempty"`
}

// Health reports the node's state now. It reads local state only.
func (e *Elector) Health() Health {
	h := Health{Node: e.cfg.NodeID}
	select {
	case <-e.stopped:
	default:
		h.Running = e.started.Load()
	}
	h.Session = e.currentSession() != nil
	if hb := e.lastHeartbeat.Load(); hb != nil {
		h.LastHeartbeat = hb.wall
		h.Healthy = h.Running && monotime.Now()-hb.mono < int64(e.cfg.TrustWindow)
	}
	if e.mode.sessionless() {
		h.Session, h.Healthy = h.Running, h.Running
	}
	for _, s := range e.order {
		leader, epoch := s.Leader()
		h.Scopes = append(h.Scopes, ScopeHealth{Scope: s.name, Role: s.Role(), Leader: leader, Epoch: epoch,
			TrustRemaining: s.TrustRemaining()})
	}
	return h
}

// HealthHandler serves Health as JSON: 200 when Healthy, 503 otherwise. Mount it
// as a readiness probe (a replica that cannot reach the database is not ready;
// restarting it would not help, so it is a poor liveness probe: for liveness, the
// process serving it is enough). Only GET and HEAD are answered.
func (e *Elector) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := e.Health()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !h.Healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(h)
		}
	})
}

// heartbeatMark is the time of a successful heartbeat, both clocks.
type heartbeatMark struct {
	mono int64
	wall time.Time
}
