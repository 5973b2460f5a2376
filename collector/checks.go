package collector

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/human"
)

// finding is a check result before the grace and Since rules apply.
type finding struct {
	alert Alert
	grace time.Duration // the condition must last this long (0: fires at once)
	since time.Time     // when the condition began, if the check knows better than "now"
}

// defaultTrustWindow judges a holder row without timing (written by hand or by
// an old engine): the engine's default trust window.
const defaultTrustWindow = 1500 * time.Millisecond

// checkScope runs the per-scope checks. See the package doc for why each one stays
// silent during resigns, kills and restarts of a healthy cluster.
func (st *state) checkScope(cfg *Config, r *dbRead, row scopeRow, sc *Scope, m *scopeMem, ro roster, byID map[string]*Node) []finding {
	var out []finding
	split := func(node, summary, hint string, grace time.Duration) {
		out = append(out, finding{grace: grace, alert: Alert{Kind: AlertSplitBrain, Severity: SeverityCritical,
			Scope: row.Name, Node: node, Summary: summary, Hint: hint, Runbook: runbook(AlertSplitBrain)}})
	}

	// (e) The epoch went backwards: the database no longer fences the epochs
	// between the current one and the highest granted. Immediate.
	highest := max(m.maxEpoch, row.MaxTermEpoch)
	if row.Recorded && row.Epoch < highest {
		split("", fmt.Sprintf("epoch of %s went back to %d, but epoch %d was granted before", row.Name, row.Epoch, highest),
			fmt.Sprintf("fencing is void for epochs up to %d: find who changed pgleader.leader_state (restored backup, manual edit) and set its epoch to at least %d", highest, highest),
			0)
	}
	m.maxEpoch = max(m.maxEpoch, row.Epoch)

	// (i) Sessions that are not candidates hold or wait on the scope's lock: a
	// squatter blocks leadership (or will take the lock when the holder lets go).
	// Named on the first read that sees them.
	if len(sc.Interference) > 0 {
		out = append(out, interference(row.Name, sc.Interference))
	}
	foreign := func(p int) bool {
		return slices.ContainsFunc(sc.Interference, func(f ForeignSession) bool { return f.PID == p })
	}

	// (a) A term is open, but the lock is held by a node's session other than the
	// holder's leadership backend. A crash leaves the lock free with the term
	// still open: that is no leader, not this; a squatter is (i), not this.
	if row.open() && len(row.LockPIDs) > 0 && slices.ContainsFunc(row.LockPIDs, func(p int) bool { return p != row.HolderPID && !foreign(p) }) {
		split("", fmt.Sprintf("lock of %s is held by pid %s, but the open term (epoch %d of %s) belongs to pid %d",
			row.Name, pids(row.LockPIDs), row.Epoch, row.Holder, row.HolderPID),
			fmt.Sprintf("a session outside the holder's leadership backend holds the lock: identify it (SELECT pid, usename, application_name, client_addr FROM pg_stat_activity WHERE pid IN (%s)) and terminate it", pidList(row.LockPIDs)),
			cfg.SplitBrainGrace)
	}
	// (b) More than one session holds the lock exclusively.
	if len(row.LockPIDs) > 1 {
		split("", fmt.Sprintf("%d sessions hold the lock of %s exclusively: pids %s", len(row.LockPIDs), row.Name, pids(row.LockPIDs)),
			"PostgreSQL should never grant this: capture pg_locks and pg_stat_activity, then terminate all but the recorded holder's backend",
			cfg.SplitBrainGrace)
	}
	if row.open() {
		// (c) Another live node reports leading the scope from a heartbeat that
		// ran after the current term began. Every heartbeat rewrites its node's
		// leads from the terms it could confirm, so an entry left by a frozen or
		// dead node (last_seen before the term) does not count.
		for _, n := range ro.claimants[row.Name] {
			if n.Live && n.ID != row.Holder && n.LastSeen.After(row.AcquiredAt) {
				split(n.ID, fmt.Sprintf("%s and %s both report leading %s (%s seen %s after epoch %d began)",
					row.Holder, n.ID, row.Name, n.ID, human.Duration(n.LastSeen.Sub(row.AcquiredAt)), row.Epoch),
					fmt.Sprintf("node %s acts as leader without the term: stop it (or pg_terminate_backend(%d)) and check its version and configuration", n.ID, n.BackendPID),
					cfg.SplitBrainGrace)
			}
		}
		// (d) The term is open and nobody holds its lock, yet the holder keeps
		// heartbeating and still lists the scope as led. A heartbeat that runs
		// after the lock was seen free drops the scope (it confirms only locks
		// its backend holds), so this is not a dead or frozen holder.
		if len(row.LockPIDs) == 0 && row.Mode != "lease" { // lease mode holds no lock
			if m.freeOpenSince.IsZero() {
				m.freeOpenSince = r.Now
			}
			if n := byID[row.Holder]; n != nil && n.StoppedAt.IsZero() && slices.Contains(n.Leads, row.Name) && n.LastSeen.After(m.freeOpenSince) {
				split(n.ID, fmt.Sprintf("%s still reports leading %s (epoch %d) and heartbeats, but nobody holds the scope's lock",
					n.ID, row.Name, row.Epoch),
					fmt.Sprintf("node %s believes it leads without the lock: stop it and check its version; its fenced writes are still checked against epoch %d", n.ID, row.Epoch),
					cfg.SplitBrainGrace)
			}
		} else {
			m.freeOpenSince = time.Time{}
		}
	} else {
		m.freeOpenSince = time.Time{}
	}

	// The lock is held, but the holder has not confirmed its term for longer
	// than its own trust window: its gate is closed, so nobody acts, and the
	// lock keeps the followers out. It must last the grace too: right after a
	// stall of the whole host, one read can see a holder whose lease has expired
	// before its backend has run to end itself.
	if sc.HasLeader() && !row.LastHeartbeat.IsZero() {
		w := cmp.Or(row.Timing.TrustWindow, defaultTrustWindow)
		if sc.HeartbeatAge > w+cfg.StaleMargin {
			lease := "unknown"
			if row.Timing.SessionLease > 0 {
				lease = human.Duration(row.Timing.SessionLease)
			}
			held := fmt.Sprintf("%s (pid %d) holds the lock", row.Holder, row.HolderPID)
			if row.Mode == "lease" {
				held = row.Holder + " holds the lease"
			}
			out = append(out, finding{grace: cfg.SplitBrainGrace, alert: Alert{Kind: AlertStaleLeader, Severity: SeverityCritical, Scope: row.Name, Node: row.Holder,
				Summary: fmt.Sprintf("%s of %s but its last heartbeat is %s old (trust window %s, session lease %s)",
					held, row.Name, human.Duration(sc.HeartbeatAge), human.Duration(w), lease),
				Hint:    fmt.Sprintf("the holder is frozen, cut off, or its leadership session runs a statement, and its lease did not end it: check the node, then evict it (SELECT pg_terminate_backend(%d))", row.HolderPID),
				Runbook: runbook(AlertStaleLeader)}})
		}
	}

	// A leader with no live follower, while a candidate that did not stop
	// cleanly is late or down: the scope's redundancy is gone unplanned.
	if sc.HasLeader() && len(sc.Followers) == 0 {
		var gone []string
		for _, n := range ro.candidates[row.Name] {
			if n.ID != sc.Leader && (n.State == NodeLate || n.State == NodeDown) {
				gone = append(gone, n.ID+" "+string(n.State))
			}
		}
		if len(gone) > 0 {
			out = append(out, finding{alert: Alert{Kind: AlertNoFollower, Severity: SeverityWarning, Scope: row.Name, Node: sc.Leader,
				Summary: fmt.Sprintf("%s is led by %s with no live follower: %s", row.Name, sc.Leader, strings.Join(gone, ", ")),
				Hint:    "one more failure leaves the scope without a leader: bring the late or down candidates back (pgleader status lists them), or start another",
				Runbook: runbook(AlertNoFollower)}})
		}
	}

	// No leader for NoLeaderAfter, while someone is meant to lead: a live
	// candidate, or a term its dead holder never closed.
	if !sc.HasLeader() && sc.LeaderlessFor >= cfg.NoLeaderAfter {
		cands, crashed := 0, 0
		for _, n := range ro.candidates[row.Name] {
			switch {
			case n.Live:
				cands++
			case n.StoppedAt.IsZero():
				crashed++ // gone without stopping cleanly: it was meant to lead
			}
		}
		if cands > 0 || crashed > 0 || row.open() {
			out = append(out, noLeader(row, sc, cands, crashed, m.leaderlessSince))
		}
	}

	if row.Changes > cfg.FlapMax {
		out = append(out, finding{alert: Alert{Kind: AlertFlapping, Severity: SeverityWarning, Scope: row.Name,
			Summary: fmt.Sprintf("%d terms of %s began within %s (more than %d)", row.Changes, row.Name, human.Duration(cfg.FlapWindow), cfg.FlapMax),
			Hint:    "leaders keep losing the scope: read the release reasons (pgleader history); heartbeat_timeout points at database latency, crashed at a crash loop, database_failover at the database, resigned at the application",
			Runbook: runbook(AlertFlapping)}})
	}
	return out
}

// interference describes the sessions on a scope's lock that are not its
// candidates.
func interference(scope string, fs []ForeignSession) finding {
	var who []string
	for _, f := range fs {
		who = append(who, f.String())
	}
	pidsOf := make([]int, len(fs))
	for i, f := range fs {
		pidsOf[i] = f.PID
	}
	return finding{alert: Alert{Kind: AlertInterference, Severity: SeverityCritical, Scope: scope,
		Summary: fmt.Sprintf("a session outside pgleader is on the lock of %s: %s", scope, strings.Join(who, "; ")),
		Hint: fmt.Sprintf("it blocks this scope's leadership (or takes the lock when the leader lets go): find its owner, then SELECT pg_terminate_backend(p) FROM unnest(ARRAY[%s]) p; to forbid it, revoke the advisory-lock functions from PUBLIC (docs/security.md)",
			pidList(pidsOf)),
		Runbook: runbook(AlertInterference)}}
}

func noLeader(row scopeRow, sc *Scope, cands, crashed int, since time.Time) finding {
	var what, hint string
	held := append(slices.Clone(row.LockPIDs), row.OtherPIDs...)
	switch {
	case len(held) > 0:
		what = fmt.Sprintf("its lock is held outside a term by pid %s", pids(held))
		hint = fmt.Sprintf("a session holds the scope's lock without being its leader: identify it (SELECT pid, usename, application_name FROM pg_stat_activity WHERE pid IN (%s)) and terminate it", pidList(held))
	case cands == 0 && row.open():
		what = fmt.Sprintf("term %d of %s is still open and no live candidate is left", row.Epoch, row.Holder)
		hint = "every candidate is gone: start a node for this scope (if the scope is no longer used, stop its nodes cleanly and run pgleader scope retire)"
	case cands == 0:
		what = fmt.Sprintf("no live candidate is left, and %d of its candidates went away without stopping cleanly", crashed)
		hint = "its candidates crashed or lost the database: start a node for this scope (if the scope is no longer used, run pgleader scope retire)"
	case row.open():
		what = fmt.Sprintf("term %d of %s is still open, its lock is free, %d live candidate(s) are not claiming", row.Epoch, row.Holder, cands)
		hint = "candidates exist but none claims: check their logs and the database (connection limits, lock_timeout errors)"
	default:
		what = fmt.Sprintf("its lock is free and %d live candidate(s) are not claiming", cands)
		hint = "candidates exist but none claims: check their logs and the database (connection limits, lock_timeout errors)"
	}
	return finding{since: since, alert: Alert{Kind: AlertNoLeader, Severity: SeverityCritical, Scope: row.Name,
		Summary: fmt.Sprintf("%s has had no leader for %s: %s", row.Name, human.Duration(sc.LeaderlessFor), what),
		Hint:    hint, Runbook: runbook(AlertNoLeader)}}
}

// heartbeatLate reports, once per term until it recovers, a leader whose
// heartbeat is older than twice its interval.
func heartbeatLate(sc *Scope, m *scopeMem, now time.Time) (Event, bool) {
	iv := sc.Timing.HeartbeatInterval
	if !sc.HasLeader() || iv <= 0 || sc.LastHeartbeat.IsZero() || sc.HeartbeatAge <= 2*iv {
		m.lateEpoch = 0
		return Event{}, false
	}
	if m.lateEpoch == sc.Epoch {
		return Event{}, false
	}
	m.lateEpoch = sc.Epoch
	return Event{At: now, Kind: EventHeartbeatLate, Scope: sc.Name, Node: sc.Leader, Epoch: sc.Epoch,
		Detail: fmt.Sprintf("last heartbeat %s ago, interval %s", human.Duration(sc.HeartbeatAge), human.Duration(iv))}, true
}

func verdict(sc *Scope, late, idle bool) Verdict {
	for _, a := range sc.Alerts {
		if a.Kind == AlertSplitBrain {
			return VerdictSplitBrain
		}
	}
	switch {
	case !sc.HasLeader() && idle && len(sc.Alerts) == 0:
		return VerdictIdle
	case !sc.HasLeader():
		return VerdictNoLeader
	case len(sc.Alerts) > 0 || late:
		return VerdictDegraded
	}
	return VerdictOK
}

func checkNodes(cfg *Config, nodes []Node) []finding {
	var out []finding
	for _, n := range nodes {
		if n.StoppedAt.IsZero() && n.LastSeenAge > cfg.StaleNodeAfter {
			out = append(out, finding{alert: Alert{Kind: AlertStaleNode, Severity: SeverityWarning, Node: n.ID,
				Summary: fmt.Sprintf("node %s (%s, os pid %d) was last seen %s ago and did not stop cleanly", n.ID, n.Hostname, n.OSPID, human.Duration(n.LastSeenAge)),
				Hint:    fmt.Sprintf("the process died or cannot reach the database: check it on %s; if it is gone for good, mark it stopped (UPDATE pgleader.nodes SET stopped_at = now() WHERE node_id = '%s')", n.Hostname, n.ID),
				Runbook: runbook(AlertStaleNode)}})
		}
	}
	return out
}

// maxFenceHits bounds the fence_rejected rows remembered per scope and node.
const maxFenceHits = 10000

type fenceHit struct {
	id           int64     // audit id
	at           time.Time // audit.at (DB time)
	epoch        int64
	currentEpoch int64
}

// noteFence records a fence_rejected row, once per id (the first read of a
// permanent slot's collector learns rows its stream may deliver again).
func (st *state) noteFence(a auditRow) {
	key := a.Scope + "\x00" + a.Node
	if slices.ContainsFunc(st.fence[key], func(h fenceHit) bool { return h.id == a.ID }) {
		return
	}
	h := fenceHit{id: a.ID, at: a.At, epoch: a.Epoch}
	if a.Detail.CurrentEpoch != nil {
		h.currentEpoch = *a.Detail.CurrentEpoch
	}
	hits := append(st.fence[key], h)
	if len(hits) > maxFenceHits {
		hits = hits[len(hits)-maxFenceHits:]
	}
	st.fence[key] = hits
	st.fenceCount[a.Scope]++
}

// checkFence raises one alert per scope and node with a fence_rejected row within
// FenceAlertFor (database time), and forgets older rows.
func (st *state) checkFence(cfg *Config, dbNow time.Time) []finding {
	var out []finding
	horizon := dbNow.Add(-cfg.FenceAlertFor)
	for key, hits := range st.fence {
		i := 0
		for i < len(hits) && !hits[i].at.After(horizon) {
			i++
		}
		hits = hits[i:]
		if len(hits) == 0 {
			delete(st.fence, key)
			continue
		}
		st.fence[key] = hits
		scope, node, _ := strings.Cut(key, "\x00")
		last := hits[len(hits)-1]
		current := ""
		if last.currentEpoch != 0 {
			current = fmt.Sprintf(", current %d", last.currentEpoch)
		}
		out = append(out, finding{alert: Alert{Kind: AlertFenceRejected, Severity: SeverityWarning, Scope: scope, Node: node,
			Summary: fmt.Sprintf("the database refused %d fenced write(s) by %s on %s within %s; the last at epoch %d%s, %s ago",
				len(hits), node, scope, human.Duration(cfg.FenceAlertFor), last.epoch, current, human.Duration(dbNow.Sub(last.at))),
			Hint:    fmt.Sprintf("%s acted after losing leadership (a pause or a partition): the database write was refused, but check its side effects outside the database and why it kept acting", node),
			Runbook: runbook(AlertFenceRejected)}})
	}
	return out
}

func checkLockPressure(cfg *Config, r *dbRead) (finding, bool) {
	if r.Capacity <= 0 {
		return finding{}, false
	}
	frac := float64(r.Advisory) / float64(r.Capacity)
	if frac <= cfg.LockPressure {
		return finding{}, false
	}
	return finding{alert: Alert{Kind: AlertLockPressure, Severity: SeverityWarning,
		Summary: fmt.Sprintf("%d advisory locks use %.0f%% of the lock table's nominal %d entries (threshold %.0f%%)",
			r.Advisory, frac*100, r.Capacity, cfg.LockPressure*100),
		Hint:    "find who holds them (SELECT pid, count(*) FROM pg_locks WHERE locktype = 'advisory' GROUP BY pid ORDER BY 2 DESC); when the table is full every session of the server fails: raise max_locks_per_transaction if the use is legitimate",
		Runbook: runbook(AlertLockPressure)}}, true
}

// collectorDown is the alert of an outage: no successful read for quiet, since
// the first failed read.
func collectorDown(h Health, quiet time.Duration, since time.Time) Alert {
	return Alert{Kind: AlertCollectorDown, Severity: SeverityCritical, Since: since,
		Summary: fmt.Sprintf("no successful read of %s for %s: %s", h.Database, human.Duration(quiet), oneLine(h.LastError)),
		Hint:    "check that the database is up and reachable from the collector's host (credentials, network, max_connections); the state shown is the last good read",
		Runbook: runbook(AlertCollectorDown)}
}
