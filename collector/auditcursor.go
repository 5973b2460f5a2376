package collector

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

const (
	// missingWait is how long an audit id that a read skipped is looked for again:
	// the transaction that took it was still in flight (it shows up later), or it
	// rolled back (it never does). Audit rows are written at the end of short
	// server-side functions, so a few seconds are plenty.
	missingWait = 10 * time.Second
	// maxMissing bounds the ids remembered as missing.
	maxMissing = 2 * maxGap
	// maxGap: a row more than this above the highest id admitted marks only the
	// maxGap ids below it as missing; the rows of lower ids that commit later
	// are not looked for. A claim batch writes two rows per scope for up to 250
	// scopes in one transaction, and after a leader dies every candidate runs
	// one at once, their ids interleaved: a mass failover holds a thousand ids
	// in flight and more. maxGap is there for a jump of the sequence (setval, a
	// restore), whose ids every read would otherwise look for.
	maxGap = 4096
)

// auditPlan is how the next read takes pgleader.audit; the collector chooses it
// from its source (see the package doc).
type auditPlan uint8

const (
	// planPoll: the rows after the highest id admitted and the missing ids; the
	// first read replays the FenceAlertFor window as events.
	planPoll auditPlan = iota
	// planSkip: none (a temporary slot's stream delivers them).
	planSkip
	// planSlot: a permanent slot's stream delivers every row. The first read
	// takes the window for the fence_rejected alerts only (the slot replays what
	// an earlier run did not deliver; the rest was delivered); later reads take
	// the rows above the highest id only when a catch-up is asked for.
	planSlot
)

// cursor returns what the next read must fetch from pgleader.audit.
func (st *state) cursor(plan auditPlan, catchUp bool) readCursor {
	cur := readCursor{lastID: st.lastAudit}
	switch plan {
	case planSkip:
		cur.skip = true
	case planSlot:
		switch {
		case !st.auditStarted:
			cur.first = true
		case catchUp && st.lastAudit > 0:
			// The rows of a transaction the stream dropped are above the highest
			// id or among the missing ones. Not those below the first id this run
			// admitted: they may be rows an earlier run delivered.
			for id := range st.missing {
				if id > st.firstAudit {
					cur.missing = append(cur.missing, id)
				}
			}
			slices.Sort(cur.missing)
		default:
			cur.skip = true
		}
	default:
		cur.first, cur.events = !st.auditStarted, true
		for id := range st.missing {
			cur.missing = append(cur.missing, id)
		}
		slices.Sort(cur.missing)
	}
	return cur
}

// pollAudit turns the audit rows of a read into events, in id order. The first
// read replays the FenceAlertFor window (as events, or on a permanent slot for
// the fence_rejected alerts only) and then continues after the newest id of its
// snapshot; the ids just below it that the snapshot did not show belong to
// transactions still in flight and are looked for like any skipped id. Later
// reads pass every row through admitAudit.
func (st *state) pollAudit(r *dbRead) []Event {
	cur := r.Cursor
	if cur.skip {
		return nil
	}
	var evs []Event
	if cur.first {
		for _, a := range r.Audit {
			if !st.replayAfter.IsZero() && !a.At.After(st.replayAfter) {
				continue // delivered before an audit reset (rows that survived it)
			}
			if ev, ok := st.auditRowEvent(a); ok && cur.events {
				evs = append(evs, ev)
			}
		}
		st.auditStarted, st.replayAfter = true, time.Time{}
		if cur.events {
			st.lastAudit = max(st.lastAudit, r.MaxAuditID)
			for _, id := range r.InFlight {
				if id <= st.lastAudit {
					st.missing[id] = r.Now
				}
			}
		}
		return evs
	}
	for _, a := range r.Audit {
		if !st.admitAudit(a.ID, r.Now) {
			continue // never twice
		}
		if ev, ok := st.auditRowEvent(a); ok {
			evs = append(evs, ev)
		}
	}
	st.expireMissing(r.Now)
	return evs
}

// admitAudit is the gate every audit row passes, whichever path brought it, so
// that no row becomes an event twice: a row is new if its id is above the
// highest admitted or is one of the ids skipped below it. An id skipped belongs
// to a transaction still in flight (ids are taken before commit) or rolled
// back: it is remembered as missing, with dbNow (the database time of the path:
// a read's now(), a transaction's commit time), for missingWait.
func (st *state) admitAudit(id int64, dbNow time.Time) bool {
	if _, ok := st.missing[id]; ok {
		delete(st.missing, id)
		return true
	}
	if id <= st.lastAudit {
		return false
	}
	for gap := max(st.lastAudit+1, id-maxGap); gap < id; gap++ {
		st.missing[gap] = dbNow
	}
	if st.firstAudit == 0 {
		st.firstAudit = id
	}
	st.lastAudit = id
	return true
}

// expireMissing forgets the missing ids older than missingWait (database time),
// and the lowest ones beyond maxMissing.
func (st *state) expireMissing(dbNow time.Time) {
	for id, t := range st.missing {
		if dbNow.Sub(t) > missingWait {
			delete(st.missing, id)
		}
	}
	if n := len(st.missing) - maxMissing; n > 0 {
		ids := slices.Sorted(maps.Keys(st.missing))
		for _, id := range ids[:n] {
			delete(st.missing, id)
		}
	}
}

// auditRowEvent records a fence_rejected row for its alert and returns the
// row's event.
func (st *state) auditRowEvent(a auditRow) (Event, bool) {
	if a.At.After(st.auditAt) {
		st.auditAt = a.At
	}
	if a.Kind == "fence_rejected" {
		st.noteFence(a)
	}
	return auditEvent(a)
}

// auditReset notices that pgleader.audit lost rows the collector had read: a
// read's newest id is below the newest an earlier read showed. Rows committed
// stay in every later snapshot, and the table refuses DELETE, so only a TRUNCATE
// (retention, or RESTART IDENTITY, after which new ids start again at 1 and the
// cursor would wait above them forever) or a restore does that. Only reads that
// take the audit rows themselves check (planPoll after the first read); the
// logical stream sees the TRUNCATE itself (streamTruncate). The collector then
// forgets its ids and re-anchors as its first read does: the next read replays
// the FenceAlertFor window, without the rows delivered before (by audit.at), and
// continues after the newest id. The rows of this read are of the old ids and
// are dropped.
//
// A TRUNCATE followed by more new rows than the cursor stood at, all before the
// next read, goes unnoticed: the newest id is back above the cursor, and the new
// rows up to it are skipped. Notifications and the poll make that window one read.
func (st *state) auditReset(r *dbRead) (Event, bool) {
	st.auditReread = false
	high := st.auditHigh
	st.auditHigh = max(high, r.MaxAuditID)
	cur := r.Cursor
	if cur.skip || cur.first || !cur.events || r.MaxAuditID >= high {
		return Event{}, false
	}
	st.auditHigh = r.MaxAuditID
	st.forgetAuditIDs()
	st.auditStarted, st.replayAfter, st.auditReread = false, st.auditAt, true
	what := fmt.Sprintf("its newest id is %d", r.MaxAuditID)
	if r.MaxAuditID == 0 {
		what = "it is empty"
	}
	return auditResetEvent(r.Now, fmt.Sprintf("pgleader.audit lost rows: %s, below id %d read before (TRUNCATE or a restore)", what, high)), true
}

// streamTruncate handles a TRUNCATE of pgleader.audit from the logical stream:
// every row after it in commit order is new, whatever its id.
func (st *state) streamTruncate(commitTime time.Time) Event {
	high := st.lastAudit
	st.forgetAuditIDs()
	st.auditHigh = 0 // reads learn the new ids again
	return auditResetEvent(commitTime, fmt.Sprintf("pgleader.audit was truncated (the newest id admitted was %d)", high))
}

func auditResetEvent(at time.Time, what string) Event {
	return Event{At: at, Kind: EventAuditReset, Detail: what +
		": the audit history in the database was rewritten; events already delivered stand, and the collector follows the new rows"}
}

// forgetAuditIDs drops what the gate knows of audit ids: after a reset, ids may
// start again and name other rows. The fence_rejected rows already counted keep
// their alert, under id 0, which no row has.
func (st *state) forgetAuditIDs() {
	st.lastAudit, st.firstAudit = 0, 0
	clear(st.missing)
	for _, hits := range st.fence {
		for i := range hits {
			hits[i].id = 0
		}
	}
}

// streamAudit turns the audit rows of one transaction from the logical source
// into events, in the transaction's order, each with the commit LSN.
func (st *state) streamAudit(rows []auditRow, commitTime time.Time, lsn uint64) []Event {
	var evs []Event
	for _, a := range rows {
		if !st.admitAudit(a.ID, commitTime) {
			continue // read by the poll already
		}
		if a.Kind == "elected" && a.Detail.PrevEpoch != nil {
			a.PrevHolder = st.termHolder(a.Scope, *a.Detail.PrevEpoch)
		}
		if ev, ok := st.auditRowEvent(a); ok {
			ev.LSN = lsn
			evs = append(evs, ev)
		}
	}
	st.expireMissing(commitTime)
	return evs
}
