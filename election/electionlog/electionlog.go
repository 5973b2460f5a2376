// Package electionlog records an Elector's events in the events file of
// `pgleader node --events` (internal/eventlog, docs/design.md §5): it turns each
// engine event into the file's records. The file's format lives in
// internal/eventlog, which knows nothing of the engine, so that whatever only
// reads events files links no engine; this package is the one place where the
// two meet.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package electionlog

import (
	"time"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/eventlog"
)

// Observer appends every event the Elector reports to w, as Records turns it into
// lines. Register it with election.Synchronous, so the file records an event
// before the engine acts on it: e.Observe(electionlog.Observer(w),
// election.Synchronous()). It costs one write(2) per event that has lines.
func Observer(w *eventlog.Writer) func(election.Event) {
	return func(ev election.Event) {
		if rs := Records(ev); len(rs) > 0 {
			w.Append(rs...)
		}
	}
}

// Records converts an engine event to its lines: one, or for a heartbeat one per
// term of the round trip (a failed heartbeat of a node that led nothing: one line
// without a scope; a successful one: none). elected and revoked, a service's
// view of gates and terms the file records already, have none.
func Records(ev election.Event) []eventlog.Record {
	if ev.Kind == election.EventElected || ev.Kind == election.EventRevoked {
		return nil
	}
	r := eventlog.Record{
		MonoNS:           ev.MonoNS,
		Time:             ev.Time.UTC().Format(time.RFC3339Nano),
		Node:             ev.Node,
		Scope:            ev.Scope,
		Event:            string(ev.Kind),
		Epoch:            ev.Epoch,
		TrustUntilMonoNS: ev.TrustUntilMonoNS,
		Reason:           string(ev.Reason),
		LatencyNS:        int64(ev.Latency),
		Holder:           ev.Holder,
	}
	if ev.Err != nil {
		r.Error = ev.Err.Error()
	}
	switch ev.Kind {
	case election.EventHeartbeatOK, election.EventHeartbeatFailed:
	default:
		return []eventlog.Record{r}
	}
	if len(ev.Terms) == 0 {
		if ev.Kind == election.EventHeartbeatFailed {
			return []eventlog.Record{r}
		}
		return nil
	}
	out := make([]eventlog.Record, len(ev.Terms))
	for i, t := range ev.Terms {
		out[i] = r
		out[i].Scope, out[i].Epoch = t.Scope, t.Epoch
	}
	return out
}
