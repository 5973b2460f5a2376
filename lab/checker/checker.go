// Package checker judges the history of a chaos run of pgleader: what every node said
// it did (its events file, plus the harness's process_exit records), what the
// database recorded (pgleader.terms and pgleader.demo_actions) and which faults the
// runner applied. Check returns the safety violations found, figures describing the
// run, and the expected footprints that are missing (the vacuity guard).
// ReadHistory gathers the database's half of a History; chaos, the demo's
// headless verdict and the rolling-upgrade test share it.
//
// # Safety rules
//
// Each rule is checked per scope. A violation names its rule.
//
//	H1  One grant per epoch. Each (scope, epoch) is granted at most once, to one
//	    node: at most one row of pgleader.terms per (scope, epoch), and the
//	    `acquired` events of a (scope, epoch) come from one node, once, and that
//	    node is the holder its terms row names.
//	H2  Epochs strictly increase and never regress. The terms of a scope, ordered
//	    by acquired_at, carry strictly increasing epochs; and the `acquired` events
//	    of a scope, in mono_ns order, never carry an epoch at or below one acquired
//	    before ("epoch 33 acquired after 34"). A repeated epoch is reported once,
//	    as H1. (An acquired event is stamped when the node emits it, just after
//	    its claim commits; a node frozen in that instant while a successor claims
//	    would show as a regression. That cannot be told apart from a real one,
//	    so it is reported.)
//	H3  Every accepted write carries the epoch current at its commit. A row of
//	    pgleader.demo_actions written under epoch e has at >= acquired_at of term
//	    e, and at < acquired_at of every later term of its scope, e+1 first of all
//	    (the claim stamps acquired_at after every fenced writer of the previous
//	    term committed, and demo_actions.at is stamped before the commit, by the
//	    same server clock). A row whose term does not exist is a violation.
//	H4  Its writer held that epoch: the row's node_id is the holder of term e.
//	H5  Outcomes reported by the workload match the table: an acknowledged write
//	    (action_ok) has exactly one row, a rejected one (action_rejected) none, one
//	    of unknown outcome (action_unknown) at most one; a reported row carries the
//	    scope, epoch and node its report named; and no request_id has two rows. A
//	    row whose request_id was never reported is fine: the node may have died
//	    between commit and report.
//
// Overlapping gates are not a violation here: they are measured
// (Figures.GateOverlap, with history.GateIntervals and history.Overlaps), because
// one fault, a pause between a gate check and the write, is allowed to produce them
// (only the database's fence, H3, protects there). The runner decides per scenario.
//
// # Figures
//
// All durations come from CLOCK_MONOTONIC timestamps (mono_ns), comparable across
// the processes of one host.
//
//	GateOverlap        total time gates of two different nodes were open at once,
//	                   summed over scopes and pairs of gates.
//	Failovers          one per takeover (the first gate_open of a (node, epoch) by
//	                   a node other than the scope's previous leader): from the
//	                   start of the last fault that struck the previous leader (or
//	                   every node) during its leadership, else from the end of the
//	                   previous leader's gate, to that gate_open.
//	Detections         one per fault and scope the faulted node led when the fault
//	                   began: from the fault's start to the moment that gate closed
//	                   (gate_closed, process_exit, or trust running out, whichever
//	                   came first, as history.GateIntervals sees it). The closing
//	                   is blamed on the fault only before the next fault on that
//	                   node and, for a fault with a duration, within one trust
//	                   window of its end; a gate still open at EndMono was never
//	                   detected. Faults of no node (Node "") have none.
//	Leaderless         per scope, the time between its first gate_open and EndMono
//	                   during which no gate was open, summed over scopes.
//	StaleRejected      action_rejected events: stale writes the fence refused.
//	StaleAccepted      writes accepted under a stale epoch: the rows flagged by H3.
//	Transitions        gate_open events, counting one per (scope, node, epoch): a
//	                   node reopening its gate in the same term is no transition.
//	TransitionsPerMin  Transitions per minute of run, from the first event (or
//	                   fault) to EndMono.
//	Acked, Rejected,   action_ok, action_rejected and action_unknown events.
//	Unknown
//
// # Footprints
//
// A chaos scenario whose fault silently did nothing would pass every safety rule.
// Footprint names what the scenario must leave behind; what is absent goes to
// Report.Missing, and the report is not OK. "After the first fault" means from the
// earliest Fault.StartMono on, and a "new term" is the first gate_open of a (scope,
// node, epoch).
//
//	Takeover       some node other than a scope's first leader began a new term
//	               after the first fault (at any time when there is no fault).
//	StaleRejected  Figures.StaleRejected >= 1.
//	FaultApplied   at least one Fault.
//	NoTransition   no new term began after the first fault (met trivially without
//	               faults: ask for FaultApplied too).
//
// Records after History.EndMono count for H1, H2, H5 and the action counts, but not
// for the gate figures and the footprints: a runner that stamps EndMono before
// killing its nodes keeps the handovers of its own shutdown out of them.
package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/history"
)

// Term is one row of pgleader.terms.
type Term struct {
	Scope      string
	Epoch      int64
	Holder     string
	AcquiredAt time.Time
	ReleasedAt *time.Time
	Reason     *string // release_reason
}

// Write is one row of pgleader.demo_actions: a fenced write the database accepted.
type Write struct {
	Scope     string
	Epoch     int64
	Node      string // node_id
	RequestID string // "" when the row has none
	At        time.Time
}

// Fault is a fault the runner applied, for the figures and the vacuity guard.
// StartMono and EndMono are CLOCK_MONOTONIC nanoseconds; EndMono <= StartMono means
// an instantaneous fault (a kill, a terminated backend). Node is the node it struck,
// "" for a fault that struck every node (the database, say).
type Fault struct {
	Kind               string
	Node               string
	StartMono, EndMono int64
}

// History is everything a run left behind.
type History struct {
	// Scopes are the scopes of the run. Scopes found only in Events, Terms or
	// Writes are checked too.
	Scopes []string
	// Events are the records of every node, including the harness's process_exit
	// records (history.ProcessExit), sorted by MonoNS (eventlog.SortByMono).
	Events []eventlog.Record
	// Terms are the rows of pgleader.terms for the scopes.
	Terms []Term
	// Writes are the rows of pgleader.demo_actions for the scopes.
	Writes []Write
	// Faults are the faults the runner applied.
	Faults []Fault
	// DataLoss are the windows in which the database may have lost commits it had
	// acknowledged: an asynchronous standby promoted after it stopped receiving
	// loses what its primary committed from then on. An acknowledged write
	// (action_ok) inside one whose row is missing was lost with the old primary:
	// counted in Figures.LostWithPrimary, not an H5 violation. Grants lost that way
	// are still judged by H1 and H2 through the nodes' events.
	DataLoss []Window
	// EndMono is when the run ended: gates still open end here. Records after it
	// (a shutdown's handovers, say) still count for H1, H2 and H5 and for the
	// action counts, but not for the gate figures and the footprints, so stamp it
	// before stopping the nodes. Zero means the last record's (or fault's) time.
	EndMono int64
}

// Window is an interval of CLOCK_MONOTONIC nanoseconds.
type Window struct {
	StartMono, EndMono int64
}

func (w Window) contains(mono int64) bool { return mono >= w.StartMono && mono <= w.EndMono }

// Violation is a breach of one of the safety rules H1–H5.
type Violation struct {
	Rule   string `json:"rule"` // "H1" … "H5"
	Scope  string `json:"scope"`
	Detail string `json:"detail"`
}

// String formats the violation on one line.
func (v Violation) String() string { return fmt.Sprintf("%s %s: %s", v.Rule, v.Scope, v.Detail) }

// Figures describe a run; see the package documentation for each one's meaning.
type Figures struct {
	// GateOverlap is the total time gates of two different nodes were open at
	// once, across scopes (history.Overlaps).
	GateOverlap time.Duration `json:"gate_overlap_ns"`
	// Overlaps are the stretches GateOverlap adds up, for the report of a failure.
	Overlaps []history.Overlap `json:"overlaps,omitempty"`
	// Failovers has one duration per takeover: fault start (or the previous
	// leader's gate end) to the next gate_open of another node.
	Failovers []time.Duration `json:"failovers_ns"`
	// Detections has one duration per fault that struck a leading node: fault
	// start to the moment that node's gate closed.
	Detections []time.Duration `json:"detections_ns"`
	// Leaderless is the total time no gate was open, per scope between its first
	// gate_open and EndMono, summed over scopes.
	Leaderless time.Duration `json:"leaderless_ns"`
	// StaleRejected counts action_rejected events: stale writes the fence refused.
	StaleRejected int `json:"stale_rejected"`
	// StaleAccepted counts writes accepted under a stale epoch (the H3 violations).
	StaleAccepted int `json:"stale_accepted"`
	// LostWithPrimary counts acknowledged writes lost with an old primary inside a
	// History.DataLoss window (asynchronous replication), not counted as H5.
	LostWithPrimary int `json:"lost_with_primary,omitempty"`
	// Transitions counts gate_open events, one per (scope, node, epoch).
	Transitions int `json:"transitions"`
	// TransitionsPerMin is Transitions per minute of run.
	TransitionsPerMin float64 `json:"transitions_per_min"`
	// Acked counts action_ok events.
	Acked int `json:"acked"`
	// Rejected counts action_rejected events.
	Rejected int `json:"rejected"`
	// Unknown counts action_unknown events.
	Unknown int `json:"unknown"`
}

// Footprint is what a scenario expects its faults to leave in the history. A field
// set to true is an expectation; one not met is reported in Report.Missing.
type Footprint struct {
	// Takeover: after the first fault began, some node other than a scope's first
	// leader opened its gate in a new term.
	Takeover bool `json:"takeover,omitempty"`
	// Resumed: after the first fault began, some scope's gate opened in a new
	// term, by any node (for faults that end every session at once, such as a
	// primary failover, after which the old leader may well win again).
	Resumed bool `json:"resumed,omitempty"`
	// StaleRejected: the fence refused at least one stale write.
	StaleRejected bool `json:"stale_rejected,omitempty"`
	// FaultApplied: the runner applied at least one fault.
	FaultApplied bool `json:"fault_applied,omitempty"`
	// NoTransition: no gate opened in a new term after the first fault began (for
	// faults that must not move leadership: a short SIGSTOP, latency below the
	// heartbeat timeout).
	NoTransition bool `json:"no_transition,omitempty"`
}

// Report is the verdict on a history.
type Report struct {
	// Violations of H1–H5, in rule order.
	Violations []Violation `json:"violations"`
	// Figures describing the run.
	Figures Figures `json:"figures"`
	// Missing lists the expected footprints that are absent (vacuity guard).
	Missing []string `json:"missing"`
}

// OK reports a history with no violation and every expected footprint present.
func (r Report) OK() bool { return len(r.Violations) == 0 && len(r.Missing) == 0 }

// String summarises the report: the verdict, then one line per violation and
// missing footprint.
func (r Report) String() string {
	var b strings.Builder
	if r.OK() {
		b.WriteString("OK")
	} else {
		fmt.Fprintf(&b, "FAIL: %d violations, %d missing footprints", len(r.Violations), len(r.Missing))
	}
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	for _, m := range r.Missing {
		b.WriteString("\n  missing: " + m)
	}
	return b.String()
}

// Check judges h: the safety rules H1–H5, the figures, and the footprints expect
// names. It does not modify h.
func Check(h History, expect Footprint) Report {
	c := newRun(h)
	var r Report
	r.Violations = append(r.Violations, c.checkH1()...)
	r.Violations = append(r.Violations, c.checkH2()...)
	h3, stale := c.checkH3()
	r.Violations = append(r.Violations, h3...)
	r.Violations = append(r.Violations, c.checkH4()...)
	r.Violations = append(r.Violations, c.checkH5()...)
	r.Figures = c.figures()
	r.Figures.StaleAccepted = stale
	r.Figures.LostWithPrimary = c.lost
	r.Missing = c.footprints(expect, r.Figures)
	return r
}

// termKey names one term.
type termKey struct {
	scope string
	epoch int64
}

// open is the first gate_open of one (node, epoch) in a scope.
type open struct {
	node  string
	epoch int64
	mono  int64
}

// run is the indexed history Check works on.
type run struct {
	h      History
	events []eventlog.Record // sorted by MonoNS
	window []eventlog.Record // the prefix of events up to end
	end    int64             // EndMono, resolved
	faults []Fault           // sorted by StartMono
	scopes []string

	terms      map[termKey][]Term // per (scope, epoch), by AcquiredAt
	scopeTerms map[string][]Term  // per scope, by (AcquiredAt, Epoch)
	// byEpoch[scope] holds the scope's terms by epoch; laterMin[scope][i] is the
	// index in it of the earliest acquired among byEpoch[scope][i:].
	byEpoch  map[string][]Term
	laterMin map[string][]int

	gates map[string][]history.Interval // per scope (history.GateIntervals)
	lost  int                           // acknowledged writes lost with an old primary (checkH5)
	opens map[string][]open             // per scope, by mono

	base int64 // origin of the relative times in messages
}

func newRun(h History) *run {
	c := &run{
		h:          h,
		events:     slices.Clone(h.Events),
		faults:     slices.Clone(h.Faults),
		terms:      map[termKey][]Term{},
		scopeTerms: map[string][]Term{},
		byEpoch:    map[string][]Term{},
		laterMin:   map[string][]int{},
		gates:      map[string][]history.Interval{},
		opens:      map[string][]open{},
	}
	eventlog.SortByMono(c.events)
	slices.SortStableFunc(c.faults, func(a, b Fault) int { return cmpInt(a.StartMono, b.StartMono) })
	c.end = h.EndMono
	if c.end <= 0 {
		if n := len(c.events); n > 0 {
			c.end = c.events[n-1].MonoNS
		}
		for _, f := range c.faults {
			c.end = max(c.end, f.StartMono, f.EndMono)
		}
	}
	n, _ := slices.BinarySearchFunc(c.events, c.end+1, func(r eventlog.Record, m int64) int { return cmpInt(r.MonoNS, m) })
	c.window = c.events[:n]

	// Scopes: the declared ones, then any other found in the history, sorted.
	seen := map[string]bool{}
	for _, s := range h.Scopes {
		if s != "" && !seen[s] {
			seen[s] = true
			c.scopes = append(c.scopes, s)
		}
	}
	var extra []string
	note := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			extra = append(extra, s)
		}
	}
	for _, r := range c.events {
		if r.Event != history.ProcessExit {
			note(r.Scope)
		}
	}
	for _, t := range h.Terms {
		note(t.Scope)
	}
	for _, w := range h.Writes {
		note(w.Scope)
	}
	slices.Sort(extra)
	c.scopes = append(c.scopes, extra...)

	for _, t := range h.Terms {
		k := termKey{t.Scope, t.Epoch}
		c.terms[k] = append(c.terms[k], t)
		c.scopeTerms[t.Scope] = append(c.scopeTerms[t.Scope], t)
	}
	for k, ts := range c.terms {
		slices.SortStableFunc(ts, func(a, b Term) int { return a.AcquiredAt.Compare(b.AcquiredAt) })
		c.terms[k] = ts
	}
	for s, ts := range c.scopeTerms {
		slices.SortStableFunc(ts, func(a, b Term) int {
			if d := a.AcquiredAt.Compare(b.AcquiredAt); d != 0 {
				return d
			}
			return cmpInt(a.Epoch, b.Epoch)
		})
		byEpoch := slices.Clone(ts)
		slices.SortStableFunc(byEpoch, func(a, b Term) int { return cmpInt(a.Epoch, b.Epoch) })
		later := make([]int, len(byEpoch))
		for i := len(byEpoch) - 1; i >= 0; i-- {
			later[i] = i
			if i+1 < len(byEpoch) && byEpoch[later[i+1]].AcquiredAt.Before(byEpoch[i].AcquiredAt) {
				later[i] = later[i+1]
			}
		}
		c.byEpoch[s], c.laterMin[s] = byEpoch, later
	}

	for _, s := range c.scopes {
		c.gates[s] = history.GateIntervals(c.window, s, c.end)
	}
	type gateKey struct {
		scope, node string
		epoch       int64
	}
	first := map[gateKey]bool{}
	for _, r := range c.window {
		if r.Event != "gate_open" || r.Scope == "" {
			continue
		}
		k := gateKey{r.Scope, r.Node, r.Epoch}
		if first[k] {
			continue
		}
		first[k] = true
		c.opens[r.Scope] = append(c.opens[r.Scope], open{node: r.Node, epoch: r.Epoch, mono: r.MonoNS})
	}

	c.base = c.end
	if len(c.events) > 0 {
		c.base = min(c.base, c.events[0].MonoNS)
	}
	if len(c.faults) > 0 {
		c.base = min(c.base, c.faults[0].StartMono)
	}
	return c
}

// term returns the term (scope, epoch), the earliest if H1 found several.
func (c *run) term(scope string, epoch int64) (Term, bool) {
	ts := c.terms[termKey{scope, epoch}]
	if len(ts) == 0 {
		return Term{}, false
	}
	return ts[0], true
}

// laterTerm returns the earliest acquired of the terms of scope with an epoch above
// epoch: from its acquired_at on, epoch was no longer current.
func (c *run) laterTerm(scope string, epoch int64) (Term, bool) {
	ts := c.byEpoch[scope]
	i, _ := slices.BinarySearchFunc(ts, epoch+1, func(t Term, e int64) int { return cmpInt(t.Epoch, e) })
	if i >= len(ts) {
		return Term{}, false
	}
	return ts[c.laterMin[scope][i]], true
}

// firstFault returns the start of the first fault.
func (c *run) firstFault() (int64, bool) {
	if len(c.faults) == 0 {
		return 0, false
	}
	return c.faults[0].StartMono, true
}

// rel formats a mono_ns as a time relative to the start of the run.
func (c *run) rel(mono int64) string {
	return "t=+" + time.Duration(mono-c.base).String()
}

// wall formats a database timestamp.
func wall(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
