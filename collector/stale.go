package collector

import (
	"context"
	"slices"
	"time"
)

// Holder is a scope's holder as a snapshot showed it. An action meant for it
// applies only while it still holds the scope: the same epoch, node and
// leadership backend.
type Holder struct {
	Scope string
	Node  string
	Epoch int64
	PID   int // leader_state.holder_pid
}

// Evictor ends the leadership of a stale holder for Config.EvictStale by
// terminating its leadership backend (operator.Operator is the one pgleader
// has). It terminates nothing, and says why, when h no longer holds h.Scope.
// The collector only decides; the write is the Evictor's.
type Evictor interface {
	EvictHolder(ctx context.Context, h Holder, reason string) error
}

// staleReason is the reason an automatic eviction records.
const staleReason = "stale leader"

// autoEvict evicts a stale holder (Config.EvictStale) and reports a failure as
// an event; a success is reported by the audit row's event.
func (c *Collector) autoEvict(ctx context.Context, h Holder) {
	c.log.Warn("evicting stale leader", "scope", h.Scope, "node", h.Node, "epoch", h.Epoch,
		"pid", h.PID, "after", c.cfg.EvictAfter)
	err := c.cfg.EvictStale.EvictHolder(ctx, h, staleReason)
	if err == nil || ctx.Err() != nil {
		return
	}
	c.log.Error("could not evict stale leader", "scope", h.Scope, "node", h.Node, "epoch", h.Epoch,
		"pid", h.PID, "err", err)
	c.hub.publish(nil, []Event{{At: time.Now(), Kind: EventEvictFailed, Scope: h.Scope, Node: h.Node,
		Epoch: h.Epoch, Reason: err.Error()}})
}

// evictOrder decides the automatic eviction of a stale holder: once per term,
// EvictAfter after its stale-leader alert began, only while its own backend holds
// the lock.
func (st *state) evictOrder(cfg *Config, sc *Scope, now time.Time) (Holder, bool) {
	if cfg.EvictStale == nil || st.evicted[sc.Name] == sc.Epoch || !slices.Contains(sc.LockPIDs, sc.HolderPID) {
		return Holder{}, false
	}
	for _, a := range sc.Alerts {
		if a.Kind == AlertStaleLeader && now.Sub(a.Since) >= cfg.EvictAfter {
			st.evicted[sc.Name] = sc.Epoch
			return Holder{Scope: sc.Name, Node: sc.Leader, Epoch: sc.Epoch, PID: sc.HolderPID}, true
		}
	}
	return Holder{}, false
}
