package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pgleader/pgleader/internal/eventlog"
)

// checkH1: each (scope, epoch) is granted at most once, to one node.
func (c *run) checkH1() []Violation {
	var out []Violation
	for _, s := range c.scopes {
		ts := c.byEpoch[s]
		for i := 0; i < len(ts); {
			j := i
			var holders []string
			for j < len(ts) && ts[j].Epoch == ts[i].Epoch {
				holders = append(holders, fmt.Sprintf("%s at %s", ts[j].Holder, wall(ts[j].AcquiredAt)))
				j++
			}
			if j-i > 1 {
				out = append(out, Violation{Rule: "H1", Scope: s, Detail: fmt.Sprintf(
					"epoch %d granted %d times in pgleader.terms: to %s", ts[i].Epoch, j-i, strings.Join(holders, ", "))})
			}
			i = j
		}

		// The acquired events of each epoch, in order of first appearance.
		var order []int64
		byEpoch := map[int64][]eventlog.Record{}
		for _, r := range c.events {
			if r.Scope != s || r.Event != "acquired" {
				continue
			}
			if byEpoch[r.Epoch] == nil {
				order = append(order, r.Epoch)
			}
			byEpoch[r.Epoch] = append(byEpoch[r.Epoch], r)
		}
		for _, e := range order {
			rs := byEpoch[e]
			var nodes, seen []string
			for _, r := range rs {
				seen = append(seen, fmt.Sprintf("%s at %s", r.Node, c.rel(r.MonoNS)))
				if !slices.Contains(nodes, r.Node) {
					nodes = append(nodes, r.Node)
				}
			}
			switch {
			case len(nodes) > 1:
				out = append(out, Violation{Rule: "H1", Scope: s, Detail: fmt.Sprintf(
					"epoch %d acquired by %d nodes: %s", e, len(nodes), strings.Join(seen, ", "))})
			case len(rs) > 1:
				out = append(out, Violation{Rule: "H1", Scope: s, Detail: fmt.Sprintf(
					"epoch %d acquired %d times: %s", e, len(rs), strings.Join(seen, ", "))})
			default:
				if t, ok := c.term(s, e); ok && t.Holder != nodes[0] {
					out = append(out, Violation{Rule: "H1", Scope: s, Detail: fmt.Sprintf(
						"epoch %d acquired by %s at %s, but pgleader.terms grants it to %s",
						e, nodes[0], c.rel(rs[0].MonoNS), t.Holder)})
				}
			}
		}
	}
	return out
}

// checkH2: epochs strictly increase and never regress, in pgleader.terms by
// acquired_at and in the acquired events by mono_ns. An epoch equal to the highest
// so far is H1's (granted twice), not reported again here.
func (c *run) checkH2() []Violation {
	var out []Violation
	for _, s := range c.scopes {
		var top *Term
		for _, t := range c.scopeTerms[s] {
			if top != nil && t.Epoch < top.Epoch {
				out = append(out, Violation{Rule: "H2", Scope: s, Detail: fmt.Sprintf(
					"epoch %d acquired after %d in pgleader.terms: %d by %s at %s, %d by %s at %s",
					t.Epoch, top.Epoch, top.Epoch, top.Holder, wall(top.AcquiredAt), t.Epoch, t.Holder, wall(t.AcquiredAt))})
				continue
			}
			top = &t
		}

		var last *eventlog.Record
		for _, r := range c.events {
			if r.Scope != s || r.Event != "acquired" {
				continue
			}
			if last != nil && r.Epoch < last.Epoch {
				out = append(out, Violation{Rule: "H2", Scope: s, Detail: fmt.Sprintf(
					"epoch %d acquired after %d in the events: %d by %s at %s, %d by %s at %s",
					r.Epoch, last.Epoch, last.Epoch, last.Node, c.rel(last.MonoNS), r.Epoch, r.Node, c.rel(r.MonoNS))})
				continue
			}
			last = &r
		}
	}
	return out
}

// scopeWrites returns the writes of scope ordered by At.
func (c *run) scopeWrites(scope string) []Write {
	var ws []Write
	for _, w := range c.h.Writes {
		if w.Scope == scope {
			ws = append(ws, w)
		}
	}
	slices.SortStableFunc(ws, func(a, b Write) int { return a.At.Compare(b.At) })
	return ws
}

func writeName(w Write) string {
	if w.RequestID == "" {
		return "(no request_id)"
	}
	return w.RequestID
}

// checkH3: every accepted write carries the epoch current at its commit. It returns
// the violations, one per write at most, and so their number is the count of writes
// accepted under a stale epoch.
func (c *run) checkH3() ([]Violation, int) {
	var out []Violation
	for _, s := range c.scopes {
		for _, w := range c.scopeWrites(s) {
			t, ok := c.term(s, w.Epoch)
			switch {
			case !ok:
				out = append(out, Violation{Rule: "H3", Scope: s, Detail: fmt.Sprintf(
					"write %s by %s at %s carries epoch %d, which pgleader.terms never granted",
					writeName(w), w.Node, wall(w.At), w.Epoch)})
			case w.At.Before(t.AcquiredAt):
				out = append(out, Violation{Rule: "H3", Scope: s, Detail: fmt.Sprintf(
					"write %s by %s at %s carries epoch %d, acquired only later at %s",
					writeName(w), w.Node, wall(w.At), w.Epoch, wall(t.AcquiredAt))})
			default:
				if next, ok := c.laterTerm(s, w.Epoch); ok && !w.At.Before(next.AcquiredAt) {
					out = append(out, Violation{Rule: "H3", Scope: s, Detail: fmt.Sprintf(
						"write %s by %s under epoch %d at %s, %v after epoch %d was acquired (by %s at %s): accepted under a stale epoch",
						writeName(w), w.Node, w.Epoch, wall(w.At), w.At.Sub(next.AcquiredAt), next.Epoch, next.Holder, wall(next.AcquiredAt))})
				}
			}
		}
	}
	return out, len(out)
}

// checkH4: the writer of every accepted write holds its epoch. A write whose term
// does not exist is H3's.
func (c *run) checkH4() []Violation {
	var out []Violation
	for _, s := range c.scopes {
		for _, w := range c.scopeWrites(s) {
			if t, ok := c.term(s, w.Epoch); ok && w.Node != t.Holder {
				out = append(out, Violation{Rule: "H4", Scope: s, Detail: fmt.Sprintf(
					"write %s under epoch %d at %s was made by %s, but the holder of epoch %d is %s",
					writeName(w), w.Epoch, wall(w.At), w.Node, w.Epoch, t.Holder)})
			}
		}
	}
	return out
}

// checkH5: reported outcomes match the rows of pgleader.demo_actions.
// lostWithPrimary reports whether mono falls in a window where the database may
// have lost acknowledged commits (History.DataLoss).
func (c *run) lostWithPrimary(mono int64) bool {
	for _, w := range c.h.DataLoss {
		if w.contains(mono) {
			return true
		}
	}
	return false
}

func (c *run) checkH5() []Violation {
	rows := map[string][]Write{}
	for _, w := range c.h.Writes {
		if w.RequestID != "" {
			rows[w.RequestID] = append(rows[w.RequestID], w)
		}
	}
	var order []string
	reports := map[string][]eventlog.Record{}
	for _, r := range c.events {
		switch eventlog.ActionKind(r.Event) {
		case eventlog.ActionOK, eventlog.ActionRejected, eventlog.ActionUnknown, eventlog.ActionPaused:
		default:
			continue
		}
		if r.RequestID == "" {
			continue
		}
		if reports[r.RequestID] == nil {
			order = append(order, r.RequestID)
		}
		reports[r.RequestID] = append(reports[r.RequestID], r)
	}

	var out []Violation
	add := func(scope, format string, args ...any) {
		out = append(out, Violation{Rule: "H5", Scope: scope, Detail: fmt.Sprintf(format, args...)})
	}
	for _, id := range order {
		rs, ws := reports[id], rows[id]
		var ok, rejected *eventlog.Record
		for i := range rs {
			switch eventlog.ActionKind(rs[i].Event) {
			case eventlog.ActionOK:
				ok = &rs[i]
			case eventlog.ActionRejected:
				rejected = &rs[i]
			}
		}
		r := rs[len(rs)-1] // the outcome, if any; else action_paused
		scope := r.Scope
		switch {
		case ok != nil && len(ws) == 0 && c.lostWithPrimary(ok.MonoNS):
			c.lost++
		case ok != nil && len(ws) == 0:
			add(scope, "acknowledged write %s (%s, epoch %d, action_ok at %s) has no row: lost",
				id, ok.Node, ok.Epoch, c.rel(ok.MonoNS))
		case ok != nil && len(ws) > 1:
			add(scope, "acknowledged write %s (%s, epoch %d) has %d rows", id, ok.Node, ok.Epoch, len(ws))
		case ok == nil && len(ws) > 1: // action_unknown (or paused, or rejected): at most one
			add(scope, "write %s (%s, epoch %d, %s) has %d rows", id, r.Node, r.Epoch, r.Event, len(ws))
		}
		if rejected != nil && len(ws) > 0 {
			add(scope, "rejected write %s (%s, epoch %d, action_rejected at %s) has a row: epoch %d by %s at %s",
				id, rejected.Node, rejected.Epoch, c.rel(rejected.MonoNS), ws[0].Epoch, ws[0].Node, wall(ws[0].At))
		}
		if len(ws) == 1 {
			w := ws[0]
			if w.Scope != r.Scope || w.Epoch != r.Epoch || w.Node != r.Node {
				add(scope, "write %s was reported (%s) for scope %s, epoch %d, node %s, but its row has scope %s, epoch %d, node %s",
					id, r.Event, r.Scope, r.Epoch, r.Node, w.Scope, w.Epoch, w.Node)
			}
		}
	}

	// Rows never reported are fine, but a request id has at most one row.
	var unreported []string
	for id, ws := range rows {
		if reports[id] == nil && len(ws) > 1 {
			unreported = append(unreported, id)
		}
	}
	slices.Sort(unreported)
	for _, id := range unreported {
		ws := rows[id]
		add(ws[0].Scope, "write %s (never reported) has %d rows", id, len(ws))
	}
	return out
}
