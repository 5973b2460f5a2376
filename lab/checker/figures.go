package checker

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/history"
)

// figures computes every figure but StaleAccepted (H3's count).
func (c *run) figures() Figures {
	var f Figures
	for _, r := range c.events {
		switch eventlog.ActionKind(r.Event) {
		case eventlog.ActionOK:
			f.Acked++
		case eventlog.ActionRejected:
			f.Rejected++
		case eventlog.ActionUnknown:
			f.Unknown++
		}
	}
	f.StaleRejected = f.Rejected
	for _, s := range c.scopes {
		o := history.Overlaps(c.gates[s])
		f.GateOverlap += history.TotalOverlap(o)
		f.Overlaps = append(f.Overlaps, o...)
		f.Transitions += len(c.opens[s])
		f.Leaderless += c.leaderless(s)
		f.Failovers = append(f.Failovers, c.failovers(s)...)
	}
	f.Detections = c.detections()
	if span := c.end - c.base; span > 0 {
		f.TransitionsPerMin = float64(f.Transitions) / (float64(span) / float64(time.Minute))
	}
	return f
}

// failovers returns one duration per takeover of scope: a node other than the
// previous leader opening its gate in a new term. It is measured from the start of
// the last fault that struck the previous leader (or every node) since leadership
// came to it, or, when no fault did, from the end of the previous leader's last
// gate; an overlap counts as 0.
func (c *run) failovers(scope string) []time.Duration {
	opens := c.opens[scope]
	if len(opens) == 0 {
		return nil
	}
	var out []time.Duration
	leader, since := opens[0].node, opens[0].mono
	for _, o := range opens[1:] {
		if o.node == leader {
			continue // the leader itself in a new term: no takeover
		}
		ref, found := int64(0), false
		for _, f := range c.faults {
			if f.StartMono > o.mono {
				break
			}
			if f.StartMono >= since && (f.Node == leader || f.Node == "") {
				ref, found = f.StartMono, true
			}
		}
		if !found {
			ref = since
			for _, iv := range c.gates[scope] {
				if iv.Node == leader && iv.Start <= o.mono {
					ref = max(ref, iv.End)
				}
			}
		}
		out = append(out, time.Duration(max(o.mono-ref, 0)))
		leader, since = o.node, o.mono
	}
	return out
}

// detections returns, for every fault that struck a node while its gate of some
// scope was open, the time from the fault's start to that gate's end (gate_closed,
// process_exit, or trust running out: history.GateIntervals). The closing is blamed
// on the fault only if it came before the next fault on the same node, and, for a
// fault with a duration, within one trust window of its end (the widest trust any
// record announced); a gate still open when the run ended was never detected.
func (c *run) detections() []time.Duration {
	var trust int64
	for _, r := range c.window {
		if (r.Event == "gate_open" || r.Event == "heartbeat_ok") && r.TrustUntilMonoNS > r.MonoNS {
			trust = max(trust, r.TrustUntilMonoNS-r.MonoNS)
		}
	}
	var out []time.Duration
	for i, f := range c.faults {
		if f.Node == "" {
			continue
		}
		horizon := c.end
		for _, g := range c.faults[i+1:] {
			if g.Node == f.Node && g.StartMono > f.StartMono {
				horizon = min(horizon, g.StartMono)
				break
			}
		}
		if f.EndMono > f.StartMono {
			horizon = min(horizon, f.EndMono+trust)
		}
		for _, s := range c.scopes {
			for _, iv := range c.gates[s] {
				if iv.Node != f.Node || iv.Start > f.StartMono || iv.End < f.StartMono {
					continue // not leading through this gate when the fault began
				}
				if !iv.Closed && iv.End >= c.end || iv.End > horizon {
					continue
				}
				out = append(out, time.Duration(iv.End-f.StartMono))
			}
		}
	}
	return out
}

// leaderless returns the time, between the first gate_open of scope and EndMono,
// during which no gate of scope was open.
func (c *run) leaderless(scope string) time.Duration {
	ivs := c.gates[scope]
	if len(ivs) == 0 {
		return 0
	}
	end := c.end
	cursor := ivs[0].Start
	if end <= cursor {
		return 0
	}
	var gap int64
	for _, iv := range ivs { // by Start
		s := min(iv.Start, end)
		e := min(max(iv.End, iv.Start), end)
		if s > cursor {
			gap += s - cursor
		}
		cursor = max(cursor, e)
	}
	if end > cursor {
		gap += end - cursor
	}
	return time.Duration(gap)
}

// footprints returns the expected footprints absent from the history.
func (c *run) footprints(expect Footprint, f Figures) []string {
	var out []string
	first, faulted := c.firstFault()
	from := int64(math.MinInt64)
	after := "since the run began"
	if faulted {
		from = first
		after = "after the first fault (" + c.faults[0].Kind + " at " + c.rel(first) + ")"
	}
	if expect.FaultApplied && !faulted {
		out = append(out, "FaultApplied expected: no fault was applied")
	}
	if expect.Takeover {
		found := false
		var leaders []string
		for _, s := range c.scopes {
			opens := c.opens[s]
			if len(opens) == 0 {
				leaders = append(leaders, s+": none")
				continue
			}
			leaders = append(leaders, s+": "+opens[0].node)
			for _, o := range opens {
				if o.mono >= from && o.node != opens[0].node {
					found = true
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf(
				"Takeover expected: %s no node other than a scope's first leader (%s) opened its gate in a new term",
				after, strings.Join(leaders, ", ")))
		}
	}
	moved := c.newTerms(from, faulted)
	if expect.Resumed && len(moved) == 0 {
		out = append(out, "Resumed expected: "+after+" no scope's gate opened in a new term")
	}
	if expect.StaleRejected && f.StaleRejected == 0 {
		out = append(out, "StaleRejected expected: no action_rejected event, the fence refused no stale write")
	}
	if expect.NoTransition && faulted {
		if len(moved) > 0 {
			const show = 5
			more := ""
			if len(moved) > show {
				more = fmt.Sprintf(" and %d more", len(moved)-show)
				moved = moved[:show]
			}
			out = append(out, fmt.Sprintf("NoTransition expected, but leadership moved %s: %s%s",
				after, strings.Join(moved, "; "), more))
		}
	}
	return out
}

// newTerms describes the gates opened in a new term from the monotonic time from
// on: after the first fault, every gate opening; without a fault, every one but
// each scope's first.
func (c *run) newTerms(from int64, faulted bool) []string {
	var out []string
	for _, s := range c.scopes {
		for i, o := range c.opens[s] {
			if o.mono >= from && (faulted || i > 0) {
				out = append(out, fmt.Sprintf("%s: %s opened epoch %d at %s", s, o.node, o.epoch, c.rel(o.mono)))
			}
		}
	}
	return out
}
