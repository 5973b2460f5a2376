package collector

import (
	"cmp"
	"slices"
	"time"
)

// settle applies the grace and Since rules to the findings and returns the active
// alerts, sorted. A condition with a grace becomes an alert once it has been seen
// in every read for that long; Since is when the condition began, kept from one
// snapshot to the next.
func (st *state) settle(findings []finding, now time.Time) []Alert {
	pending := map[string]time.Time{}
	seen := map[string]bool{}
	alerts := []Alert{}
	for _, f := range findings {
		a := f.alert
		key := a.Key()
		if seen[key] {
			continue // the first finding of a key wins (checks run most telling first)
		}
		seen[key] = true
		a.Since = now
		if !f.since.IsZero() {
			a.Since = f.since
		}
		if f.grace > 0 {
			start, ok := st.pending[key]
			if !ok {
				start = now
			}
			pending[key] = start
			a.Since = start
			if now.Sub(start) < f.grace {
				continue
			}
		}
		if prev, ok := st.active[key]; ok {
			a.Since = prev.Since
		}
		alerts = append(alerts, a)
	}
	st.pending = pending
	sortAlerts(alerts)
	return alerts
}

// alertChanges returns the firing and resolved events between the last snapshot's
// alerts and alerts, and remembers alerts.
func (st *state) alertChanges(alerts []Alert, now time.Time) []Event {
	var evs []Event
	next := make(map[string]Alert, len(alerts))
	for _, a := range alerts {
		next[a.Key()] = a
		if _, ok := st.active[a.Key()]; !ok {
			evs = append(evs, Event{At: now, Kind: EventAlertFiring, Scope: a.Scope, Node: a.Node, Detail: a.Summary, Alert: &a})
		}
	}
	var gone []Alert
	for key, a := range st.active {
		if _, ok := next[key]; !ok {
			gone = append(gone, a)
		}
	}
	sortAlerts(gone)
	for _, a := range gone {
		evs = append(evs, Event{At: now, Kind: EventAlertResolved, Scope: a.Scope, Node: a.Node, Detail: a.Summary, Alert: &a})
	}
	st.active = next
	return evs
}

func sortAlerts(as []Alert) {
	rank := func(s Severity) int {
		if s == SeverityCritical {
			return 0
		}
		return 1
	}
	slices.SortFunc(as, func(a, b Alert) int {
		return cmp.Or(cmp.Compare(rank(a.Severity), rank(b.Severity)), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Node, b.Node))
	})
}
