package collector

import "time"

// scopeVersion orders the states of a scope's leader_state row: a claim raises
// the epoch, a release closes the term.
type scopeVersion struct {
	epoch    int64
	released bool // no open term
}

func (v scopeVersion) before(w scopeVersion) bool {
	return v.epoch < w.epoch || v.epoch == w.epoch && !v.released && w.released
}

// streamMark is a scope's leader_state as the stream saw it, and when
// (collector time).
type streamMark struct {
	v  scopeVersion
	at time.Time
}

// visibleWait bounds how long a read that shows a scope older than the stream saw
// it is taken for one made too early (see noteStreamVersion).
const visibleWait = time.Second

// noteStreamVersion records a scope's leader_state from the logical stream (nil:
// the row was deleted or the table truncated: forget). The walsender decodes a
// transaction once its commit is flushed to WAL, which can be an instant before
// the transaction becomes visible to other sessions, so the read the stream asks
// for can miss it: a read that shows an older version than the stream saw within
// visibleWait asks for another read.
func (st *state) noteStreamVersion(scope string, v *scopeVersion, now time.Time) {
	if v == nil {
		if scope == "" {
			clear(st.streamSeen)
		}
		delete(st.streamSeen, scope)
		return
	}
	st.streamSeen[scope] = streamMark{v: *v, at: now}
}

// checkBehind reports whether a read missed a change the stream saw.
func (st *state) checkBehind(r *dbRead, now time.Time) bool {
	behind := false
	read := make(map[string]scopeVersion, len(r.Scopes))
	for _, row := range r.Scopes {
		if row.Recorded {
			read[row.Name] = scopeVersion{epoch: row.Epoch, released: !row.open()}
		}
	}
	for scope, m := range st.streamSeen {
		if now.Sub(m.at) >= visibleWait {
			delete(st.streamSeen, scope) // the read shows what it shows
			continue
		}
		if v, ok := read[scope]; !ok || v.before(m.v) {
			behind = true
		}
	}
	return behind
}
