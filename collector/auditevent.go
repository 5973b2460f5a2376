package collector

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// auditEvent maps an audit row to its event (false for kinds without one).
func auditEvent(a auditRow) (Event, bool) {
	ev := Event{At: a.At, Scope: a.Scope, Node: a.Node, Epoch: a.Epoch, AuditID: a.ID}
	d := a.Detail
	switch a.Kind {
	case "elected":
		ev.Kind = EventElected
		ev.PrevHolder = cmp.Or(str(d.PrevHolder), a.PrevHolder)
		if d.PrevEpoch != nil && ev.PrevHolder != "" {
			ev.Detail = fmt.Sprintf("after %s (epoch %d)", ev.PrevHolder, *d.PrevEpoch)
		}
	case "released":
		ev.Kind, ev.Reason = EventReleased, d.Reason
		if d.To != "" {
			ev.Detail = "to " + d.To
		}
	case "term_closed_by_successor":
		ev.Kind, ev.Reason = EventTermClosed, d.Reason
		if d.Successor != "" {
			ev.Detail = "closed by successor " + d.Successor
		}
	case "fence_rejected":
		ev.Kind = EventFenceRejected
		var parts []string
		if d.CurrentEpoch != nil {
			parts = append(parts, fmt.Sprintf("current epoch %d", *d.CurrentEpoch))
		}
		if s := str(d.Detail); s != "" {
			parts = append(parts, s)
		}
		ev.Detail = strings.Join(parts, ": ")
	case "evicted":
		ev.Kind, ev.Reason = EventEvicted, d.Reason
		ev.Detail = fmt.Sprintf("backend %d terminated by %s%s", d.PID, cmp.Or(d.By, "?"), via(d.Via))
	case "resign_requested":
		ev.Kind = EventResignRequested
		ev.Detail = "requested by " + cmp.Or(d.By, "?") + via(d.Via)
	case "handover_requested":
		ev.Kind = EventHandoverRequested
		ev.Detail = "to " + cmp.Or(d.To, "?") + ", requested by " + cmp.Or(d.By, "?") + via(d.Via)
	case "handover_cancelled":
		ev.Kind = EventHandoverCancelled
		ev.Detail = "to " + cmp.Or(d.To, "?") + ", withdrawn by " + cmp.Or(d.By, "?") + via(d.Via)
	case "scope_retired":
		ev.Kind = EventScopeRetired
		ev.Detail = "by " + cmp.Or(d.By, "?") + via(d.Via)
	case "scope_revived":
		ev.Kind = EventScopeRevived
	case "child_exited":
		if d.ExitCode == nil {
			return Event{}, false
		}
		c := TermChild{Exits: d.Exits, ExitCode: *d.ExitCode, Cause: d.Cause}
		ev.Kind, ev.Detail = EventChildExited, c.String()
		if c.Crashed() {
			ev.Reason = "crashed"
		}
	default:
		return Event{}, false
	}
	return ev, true
}

// termsKept is how many of a scope's newest terms the state remembers to name
// the previous holder of an elected row that comes from the logical source.
const termsKept = 4

// termRef is a term the state remembers: its epoch and holder.
type termRef struct {
	epoch  int64
	holder string
}

// noteTerm remembers a term's holder (from a read or from the logical source).
func (st *state) noteTerm(scope string, epoch int64, holder string) {
	ts := st.terms[scope]
	for i := range ts {
		if ts[i].epoch == epoch {
			ts[i].holder = holder
			return
		}
	}
	ts = append(ts, termRef{epoch, holder})
	slices.SortFunc(ts, func(a, b termRef) int { return cmp.Compare(b.epoch, a.epoch) })
	st.terms[scope] = ts[:min(len(ts), termsKept)]
}

// noteTerms remembers the terms of a read (termsKept per scope; scopes are few
// and never dropped by pgleader, so the map is not pruned).
func (st *state) noteTerms(r *dbRead) {
	for _, row := range r.Scopes {
		if t := row.Latest; t != nil {
			st.noteTerm(t.Scope, t.Epoch, t.Holder)
		}
	}
	for _, t := range r.Terms {
		st.noteTerm(t.Scope, t.Epoch, t.Holder)
	}
}

// termHolder returns the remembered holder of a scope's epoch ("" if unknown).
func (st *state) termHolder(scope string, epoch int64) string {
	for _, t := range st.terms[scope] {
		if t.epoch == epoch {
			return t.holder
		}
	}
	return ""
}
