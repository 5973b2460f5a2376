package conformance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/history"
)

// events a node's file may carry (docs/design.md §5; leader_observed is the
// reference node's own addition, and harmless).
var knownEvents = []string{"acquired", "gate_open", "heartbeat_ok", "heartbeat_failed", "gate_closed", "lost",
	"resigned", "leader_observed", string(eventlog.ActionOK), string(eventlog.ActionRejected), string(eventlog.ActionUnknown)}

// recordChecks holds the foreign node's events file to its contract
// (docs/protocol.md §16): every line names the node and the scope, a known
// event and a time; acquired, gate_open, heartbeat_ok and action outcomes
// carry an epoch; gate_open and heartbeat_ok a trust_until_mono_ns no later
// than the line's mono_ns plus the trust window w the node registered (the
// trust counts from the start of a round trip, which precedes the line); each
// gate_open follows its term's acquired; each action outcome carries a
// request id and follows the gate_open of its term. A check that fails is
// reported once, with its first few lines and a count.
func recordChecks(rs []eventlog.Record, node, scope string, w time.Duration) []string {
	own := node + ".jsonl"
	type finding struct {
		lines []string
		n     int
	}
	found := map[string]*finding{}
	var order []string
	add := func(rule string, r eventlog.Record, detail string) {
		f := found[rule]
		if f == nil {
			f = &finding{}
			found[rule] = f
			order = append(order, rule)
		}
		f.n++
		if len(f.lines) < 3 {
			f.lines = append(f.lines, fmt.Sprintf("mono_ns %d %s epoch %d: %s", r.MonoNS, r.Event, r.Epoch, detail))
		}
	}
	acquired := map[int64]bool{}
	opened := map[int64]bool{}
	for _, r := range rs {
		if r.Source != own || r.Event == history.ProcessExit {
			continue
		}
		if r.Node != node {
			add("every line names the node (\"node\": its --id)", r, fmt.Sprintf("node %q", r.Node))
		}
		if r.MonoNS <= 0 {
			add("every line has mono_ns, CLOCK_MONOTONIC in nanoseconds", r, "missing or not positive")
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
			add("every line has time, RFC 3339", r, fmt.Sprintf("time %q", r.Time))
		}
		if !slices.Contains(knownEvents, r.Event) {
			add("every event is one of "+strings.Join(knownEvents, ", "), r, fmt.Sprintf("event %q", r.Event))
			continue
		}
		if r.Scope != scope && !(r.Event == "heartbeat_failed" && r.Scope == "") {
			add("every line names its scope", r, fmt.Sprintf("scope %q", r.Scope))
		}
		switch r.Event {
		case "acquired", "gate_open", "heartbeat_ok", string(eventlog.ActionOK), string(eventlog.ActionRejected), string(eventlog.ActionUnknown):
			if r.Epoch <= 0 {
				add("acquired, gate_open, heartbeat_ok and action outcomes carry their term's epoch", r, "no epoch")
			}
		}
		switch r.Event {
		case "acquired":
			acquired[r.Epoch] = true
		case "gate_open", "heartbeat_ok":
			if r.TrustUntilMonoNS <= 0 {
				add("gate_open and heartbeat_ok carry trust_until_mono_ns", r, "missing")
			} else if w > 0 && r.TrustUntilMonoNS > r.MonoNS+int64(w) {
				add("the gate is bounded by the trust window: trust_until_mono_ns ≤ the round trip's start + W", r,
					fmt.Sprintf("trust until %v after the line, trust window %v", time.Duration(r.TrustUntilMonoNS-r.MonoNS), w))
			}
			if r.Event == "gate_open" {
				if !acquired[r.Epoch] {
					add("a gate opens only after its term's acquired line", r, "no acquired line before it")
				}
				opened[r.Epoch] = true
			}
		case string(eventlog.ActionOK), string(eventlog.ActionRejected), string(eventlog.ActionUnknown):
			if r.RequestID == "" {
				add("action outcomes carry the request_id written into pgleader.demo_actions", r, "no request_id")
			}
			if !opened[r.Epoch] {
				add("a fenced write of a term follows the gate_open of that term", r, "no gate_open of this epoch before it")
			}
		}
	}
	var out []string
	for _, rule := range order {
		f := found[rule]
		out = append(out, fmt.Sprintf("foreign node's events file: %s — broken by %d lines, e.g. %s", rule, f.n, strings.Join(f.lines, "; ")))
	}
	return out
}
