// Package history reconstructs what happened from nodes' event records (the lines
// of `pgleader node --events`): when each node's gate was open, and whether gates of
// different nodes were ever open at once.
//
// A gate is taken to be open from its gate_open event until the earlier of its
// gate_closed event and the trust_until in force (the one announced by gate_open or
// extended by heartbeat_ok). The trust bound matters for a frozen process: it cannot
// write gate_closed while stopped, but its gate closed when its trust ran out. A
// process_exit record (written by the harness that saw the process end) closes every
// gate of its node: a dead process acts no more.
package history

import (
	"fmt"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
)

// ProcessExit is the event of a record saying that a node's process was gone at
// mono_ns.
const ProcessExit = "process_exit"

// Interval is a stretch during which a node's gate for a scope may have been open.
// Start and End are CLOCK_MONOTONIC nanoseconds.
type Interval struct {
	Node       string
	Proc       string // the process (its events file), when known: twins share a node id
	Scope      string
	Epoch      int64
	Start, End int64
	Closed     bool   // ended by a gate_closed event (else by trust or still open)
	Reason     string // gate_closed reason
}

// GateIntervals returns the gate intervals of scope, in order of start. records must
// be sorted by MonoNS (eventlog.SortByMono). Intervals still open end at their
// trust_until, or at now if that is earlier.
func GateIntervals(records []eventlog.Record, scope string, now int64) []Interval {
	open := map[string]*Interval{} // by process: node id and source file
	var out []Interval
	for _, r := range records {
		k := r.Node + "\x00" + r.Source
		if r.Event == ProcessExit {
			if iv := open[k]; iv != nil {
				iv.End = min(iv.End, r.MonoNS)
				iv.Closed, iv.Reason = true, ProcessExit
				out = append(out, *iv)
				delete(open, k)
			}
			continue
		}
		if r.Scope != scope {
			continue
		}
		switch r.Event {
		case "gate_open":
			if iv := open[k]; iv != nil { // a reopen without a close: end the old one
				out = append(out, *iv)
			}
			open[k] = &Interval{Node: r.Node, Proc: r.Source, Scope: scope, Epoch: r.Epoch, Start: r.MonoNS, End: r.TrustUntilMonoNS}
		case "heartbeat_ok":
			if iv := open[k]; iv != nil && r.TrustUntilMonoNS > iv.End {
				iv.End = r.TrustUntilMonoNS
			}
		case "gate_closed":
			if iv := open[k]; iv != nil {
				iv.End = min(iv.End, r.MonoNS)
				iv.Closed, iv.Reason = true, r.Reason
				out = append(out, *iv)
				delete(open, k)
			}
		}
	}
	for _, iv := range open {
		iv.End = min(iv.End, now)
		out = append(out, *iv)
	}
	sortIntervals(out)
	return out
}

func sortIntervals(ivs []Interval) {
	for i := 1; i < len(ivs); i++ {
		for j := i; j > 0 && ivs[j].Start < ivs[j-1].Start; j-- {
			ivs[j], ivs[j-1] = ivs[j-1], ivs[j]
		}
	}
}

// Overlap is a stretch during which gates of two different nodes were open at once.
type Overlap struct {
	A, B     Interval
	Duration time.Duration
}

// String describes the overlap for a test failure or a report.
func (o Overlap) String() string {
	return fmt.Sprintf("%s (epoch %d) and %s (epoch %d) overlapped for %v",
		o.A.Node, o.A.Epoch, o.B.Node, o.B.Epoch, o.Duration)
}

// Overlaps returns every overlap between gates of different processes (different
// nodes, or two processes running under one node id).
func Overlaps(ivs []Interval) []Overlap {
	var out []Overlap
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.Node == b.Node && a.Proc == b.Proc {
				continue // one process's consecutive periods
			}
			if d := min(a.End, b.End) - max(a.Start, b.Start); d > 0 {
				out = append(out, Overlap{A: a, B: b, Duration: time.Duration(d)})
			}
		}
	}
	return out
}

// TotalOverlap sums the overlaps' durations.
func TotalOverlap(os []Overlap) time.Duration {
	var d time.Duration
	for _, o := range os {
		d += o.Duration
	}
	return d
}
