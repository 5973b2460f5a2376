package collector

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/protocol"
)

// finding is a check result before the grace and Since rules apply.
type finding struct {
	alert Alert
	grace time.Duration // the condition must last this long (0: fires at once)
	since time.Time     // when the condition began, if the check knows better than "now"
}

// DefaultTrustWindow judges a holder or node row without timing (written by
// hand or by an old engine): the engine's default trust window.
const DefaultTrustWindow = 1500 * time.Millisecond

// checkScope runs the per-scope checks. See the package doc for why each one stays
// silent during resigns, kills and restarts of a healthy cluster.
func (st *state) checkScope(cfg *Config, r *dbRead, row scopeRow, sc *Scope, m *scopeMem, ro roster, byID map[string]*Node) []finding {
	var out []finding
	split := func(node, summary, hint string, grace time.Duration) {
		out = append(out, finding{grace: grace, alert: Alert{Kind: AlertSplitBrain, Severity: SeverityCritical,
			Scope: row.Name, Node: node, Summary: summary, Hint: hint, Runbook: AlertSplitBrain.Runbook()}})
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
		w := cmp.Or(row.Timing.TrustWindow, DefaultTrustWindow)
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
				Runbook: AlertStaleLeader.Runbook()}})
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
				Runbook: AlertNoFollower.Runbook()}})
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
			f := noLeader(row, sc, cands, crashed, m.leaderlessSince)
			explainNoLeader(&f.alert, row, r, byID)
			out = append(out, f)
		}
	}

	// Flapping counts the changes nobody planned: a term that follows one its
	// holder ended itself (resigned, handed over, shut down: a rolling restart,
	// a handover, a cron job's run) is not a leader lost.
	if planned := plannedChanges(r.termsOf(row.Name), r.Now.Add(-cfg.FlapWindow)); row.Changes-planned > cfg.FlapMax {
		what := ""
		if planned > 0 {
			what = fmt.Sprintf(", %d of them after a planned release", planned)
		}
		out = append(out, finding{alert: Alert{Kind: AlertFlapping, Severity: SeverityWarning, Scope: row.Name,
			Summary: fmt.Sprintf("%d terms of %s began within %s (more than %d unplanned%s)", row.Changes, row.Name, human.Duration(cfg.FlapWindow), cfg.FlapMax, what),
			Hint:    "leaders keep losing the scope: read the release reasons (pgleader history); heartbeat_timeout points at database latency, crashed at a crash loop, database_failover at the database, resigned at the application",
			Runbook: AlertFlapping.Runbook()}})
	}
	if f, ok := slowFailover(cfg, r, row, sc); ok {
		out = append(out, f)
	}
	return out
}

// plannedChanges counts the terms of terms (one scope's, by epoch) that began
// after since and followed a term its holder ended itself.
func plannedChanges(terms []Term, since time.Time) int {
	n := 0
	for i := 1; i < len(terms); i++ {
		t, prev := terms[i], terms[i-1]
		if t.AcquiredAt.After(since) && prev.Epoch < t.Epoch && prev.EndedBy.Clean() {
			n++
		}
	}
	return n
}

// slowFailover raises AlertSlowFailover for a led scope whose term began more
// than SlowFailover after its predecessor's last sign of life, in its first
// SlowFailoverFor, unless the predecessor's term ended with the database.
func slowFailover(cfg *Config, r *dbRead, row scopeRow, sc *Scope) (finding, bool) {
	if !sc.HasLeader() || row.Latest == nil || !row.Latest.Open() || row.Latest.Epoch != row.Epoch {
		return finding{}, false
	}
	t := *row.Latest
	if t.HandoverGap <= cfg.SlowFailover || r.Now.Sub(t.AcquiredAt) > cfg.SlowFailoverFor {
		return finding{}, false
	}
	terms := r.termsOf(row.Name)
	var prev *Term
	for i := range terms {
		if terms[i].Epoch < t.Epoch {
			prev = &terms[i]
		}
	}
	reason := "its predecessor"
	prevHolder := ""
	if prev != nil {
		prevHolder = prev.Holder
	}
	if !candidateWaited(r, row.Name, prevHolder, t.AcquiredAt.Add(-t.HandoverGap), cfg.SlowFailover) {
		return finding{}, false // nobody was there to take over: the scope was idle, not failing over
	}
	if prev != nil {
		if prev.EndedBy == protocol.ReasonDatabaseFailover {
			return finding{}, false // the database was down: collector_down's, not the election's
		}
		reason = fmt.Sprintf("%s's term %d ended as %s", prev.Holder, prev.Epoch, cmp.Or(string(prev.EndedBy), "?"))
	}
	return finding{alert: Alert{Kind: AlertSlowFailover, Severity: SeverityWarning, Scope: row.Name, Node: t.Holder,
		Summary: fmt.Sprintf("%s was without a leader for %s before term %d began (more than %s): %s",
			row.Name, human.Duration(t.HandoverGap), t.Epoch, human.Duration(cfg.SlowFailover), reason),
		Hint:    "a crash fails over in milliseconds and a frozen or cut-off holder within its session lease: a longer gap means the candidates were late, deferred or absent; read the node logs around the gap (pgleader history shows it)",
		Runbook: AlertSlowFailover.Runbook()}}, true
}

// candidateWaited reports whether a node other than the predecessor (prev)
// campaigned for scope from before the gap began (from) until it had lasted
// limit: a node that could have taken over and did not. A scope whose every
// candidate stopped with its holder, and that was led again when a node
// started later, was idle, not failing over. A node's StartedAt is the start
// of the process that registered last (schema 17; before, its first
// registration, which counts it as waiting: the alert errs on the side of
// raising). Nodes the collector no longer reads (Config.NodeRetention) count
// as not waiting.
func candidateWaited(r *dbRead, scope, prev string, from time.Time, limit time.Duration) bool {
	for _, n := range r.Nodes {
		if n.ID == prev || !slices.Contains(n.Scopes, scope) || n.StartedAt.After(from) {
			continue
		}
		if n.StoppedAt.IsZero() || n.StoppedAt.After(from.Add(limit)) {
			return true
		}
	}
	return false
}

// interference describes the sessions on a scope's lock that are not its
// candidates. The hint says what is true of them: a node login holds the lock
// through pgleader's own functions (the hardening does not stop it: it is a
// candidate of some scope, here not of this one), any other role through the
// advisory-lock functions PUBLIC may still call.
func interference(scope string, fs []ForeignSession) finding {
	var who, nodeLogins []string
	pidsOf := make([]int, len(fs))
	others := false
	for i, f := range fs {
		who = append(who, f.String())
		pidsOf[i] = f.PID
		if f.NodeLogin {
			nodeLogins = append(nodeLogins, cmp.Or(f.Role, "?"))
		} else {
			others = true
		}
	}
	slices.Sort(nodeLogins)
	nodeLogins = slices.Compact(nodeLogins)
	forbid := "to forbid it, revoke the advisory-lock functions from PUBLIC (docs/security.md, Hardening)"
	switch {
	case len(nodeLogins) > 0 && !others:
		forbid = fmt.Sprintf("it is a pgleader node login (%s), which takes locks through pgleader's functions, hardening or not: take pgleader_node from that login, or bind the scope to its service's role (pgleader scope bind)",
			strings.Join(nodeLogins, ", "))
	case len(nodeLogins) > 0:
		forbid = fmt.Sprintf("for the node logins among them (%s), take pgleader_node from them or bind the scope (pgleader scope bind); for the others, revoke the advisory-lock functions from PUBLIC (docs/security.md, Hardening)",
			strings.Join(nodeLogins, ", "))
	}
	return finding{alert: Alert{Kind: AlertInterference, Severity: SeverityCritical, Scope: scope,
		Summary: fmt.Sprintf("a session outside pgleader is on the lock of %s: %s", scope, strings.Join(who, "; ")),
		Hint: fmt.Sprintf("it blocks this scope's leadership (or takes the lock when the leader lets go): find its owner, then SELECT pg_terminate_backend(p) FROM unnest(ARRAY[%s]) p; %s",
			pidList(pidsOf), forbid),
		Runbook: AlertInterference.Runbook()}}
}

// explainNoLeader names, in a no-leader alert, a cause the database records:
// fenced transactions of the ended term that hold its row (and why they were not
// ended), a lock held by a candidate outside any term, or a key override that
// the candidates' claims do not carry.
func explainNoLeader(a *Alert, row scopeRow, r *dbRead, byID map[string]*Node) {
	if w := r.FenceWaits[row.Name]; w != nil && len(w.Blockers) > 0 {
		var who []string
		var prepared []string
		for _, b := range w.Blockers {
			who = append(who, b.String())
			if b.Prepared != "" {
				prepared = append(prepared, b.Prepared)
			}
		}
		a.Summary += fmt.Sprintf("; fenced transactions of term %d hold its row (a claim by %s found it so %s ago): %s",
			row.Epoch, w.Node, human.Duration(r.Now.Sub(w.Since)), strings.Join(who, "; "))
		if len(prepared) > 0 {
			a.Hint = fmt.Sprintf("a prepared transaction holds the scope's row and has no backend to end: its owner (or a superuser) finishes it: ROLLBACK PREPARED %s", pqLiteral(prepared[0]))
		} else {
			a.Hint = "the successor ends them once it has waited the trust window; if they stay, the database may not end them: GRANT pg_signal_backend TO the owner role (pgleader_owner), or end them by hand (a superuser's session can only be ended by a superuser)"
		}
		return
	}
	held := append(slices.Clone(row.LockPIDs), row.OtherPIDs...)
	for _, p := range held {
		for _, n := range byID {
			if n.BackendPID == p && n.StoppedAt.IsZero() && slices.Contains(n.Scopes, row.Name) {
				a.Hint = fmt.Sprintf("pid %d is the leadership session of %s (login %s), a candidate that holds the scope's lock outside any term (a claim it rolled back, or a client that is not pgleader's engine): restart that node, and take pgleader_node from its login if it is not yours",
					p, n.ID, cmp.Or(n.LoginRole, "?"))
				return
			}
		}
	}
	if k, ok := r.KeyOverrides[row.Name]; ok && len(held) == 0 {
		a.Summary += fmt.Sprintf("; its lock key was overridden to %d (by %s at %s)", k.Key, k.SetBy, k.SetAt.UTC().Format(time.RFC3339))
		a.Hint = fmt.Sprintf("candidates that compute another key are refused (PLF03) until they run with the override: restart them with it (Config.LockKeys / --lock-key), or remove it: pgleader scope key %s --derived",
			shellQuote(row.Name))
	}
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
		Hint:    hint, Runbook: AlertNoLeader.Runbook()}}
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

// checkNodes raises AlertStaleNode. The hint names a pgleader command, its node
// id quoted for a POSIX shell (shellQuote): no text from the database becomes
// runnable SQL or shell.
func checkNodes(cfg *Config, nodes []Node) []finding {
	var out []finding
	for _, n := range nodes {
		if n.StoppedAt.IsZero() && n.LastSeenAge > cfg.StaleNodeAfter {
			out = append(out, finding{alert: Alert{Kind: AlertStaleNode, Severity: SeverityWarning, Node: n.ID,
				Summary: fmt.Sprintf("node %s (%s, os pid %d) was last seen %s ago and did not stop cleanly", n.ID, n.Hostname, n.OSPID, human.Duration(n.LastSeenAge)),
				Hint:    fmt.Sprintf("the process died or cannot reach the database: check it on %s; if it is gone for good, forget it: pgleader node forget %s", n.Hostname, shellQuote(n.ID)),
				Runbook: AlertStaleNode.Runbook()}})
		}
	}
	return out
}

// checkNotifyQueue raises AlertNotifyQueue when the server's notification queue
// is fuller than NotifyQueuePressure.
func checkNotifyQueue(cfg *Config, r *dbRead) (finding, bool) {
	if r.NotifyQ <= cfg.NotifyQueuePressure {
		return finding{}, false
	}
	return finding{alert: Alert{Kind: AlertNotifyQueue, Severity: SeverityWarning,
		Summary: fmt.Sprintf("the server's notification queue is %.0f%% full (threshold %.0f%%): a listening session stopped reading, and a flood fills it",
			r.NotifyQ*100, cfg.NotifyQueuePressure*100),
		Hint:    "when it is full every NOTIFY fails, pgleader's claims and releases included: find the session that LISTENs and does not read (a frozen process, a stuck client; the oldest listeners in pg_stat_activity) and end it, and the sender of the flood (docs/runbooks.md)",
		Runbook: AlertNotifyQueue.Runbook()}}, true
}

// checkUnboundLeaders raises AlertUnboundLeader for each scope whose holder's
// login its binding does not admit.
func checkUnboundLeaders(r *dbRead) []finding {
	var out []finding
	for _, scope := range slices.Sorted(maps.Keys(r.UnboundLeaders)) {
		login := r.UnboundLeaders[scope]
		out = append(out, finding{alert: Alert{Kind: AlertUnboundLeader, Severity: SeverityWarning, Scope: scope,
			Summary: fmt.Sprintf("%s is led by a node of login %s, which its binding does not admit (bound after it was elected)", scope, cmp.Or(login, "?")),
			Hint:    "the binding refuses that login's next claim, not its current term: hand the scope over to a node of a bound role (pgleader handover), or resign it (pgleader resign)",
			Runbook: AlertUnboundLeader.Runbook()}})
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
	node         string // the node id the caller said
}

// noteFence records a fence_rejected row, once per id (the first read of a
// permanent slot's collector learns rows its stream may deliver again), under
// its scope and the login that wrote it: the node id is the caller's word, and
// one login naming many nodes is one alert, not one per name.
func (st *state) noteFence(a auditRow) {
	key := a.Scope + "\x00" + cmp.Or(a.Login, a.Node)
	if slices.ContainsFunc(st.fence[key], func(h fenceHit) bool { return h.id == a.ID }) {
		return
	}
	h := fenceHit{id: a.ID, at: a.At, epoch: a.Epoch, node: a.Node}
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

// checkFence raises one alert per scope and login with a fence_rejected row
// within FenceAlertFor (database time), and forgets older rows. The alert's Node
// is the node id of the newest row; the summary names up to three.
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
		scope, login, _ := strings.Cut(key, "\x00")
		last := hits[len(hits)-1]
		node := last.node
		var names []string
		for i := len(hits) - 1; i >= 0 && len(names) < 4; i-- {
			if !slices.Contains(names, hits[i].node) {
				names = append(names, hits[i].node)
			}
		}
		said := strings.Join(names, ", ")
		if len(names) > 3 {
			said = strings.Join(names[:3], ", ") + ", …"
		}
		current := ""
		if last.currentEpoch != 0 {
			current = fmt.Sprintf(", current %d", last.currentEpoch)
		}
		out = append(out, finding{alert: Alert{Kind: AlertFenceRejected, Severity: SeverityWarning, Scope: scope, Node: node,
			Summary: fmt.Sprintf("the database refused %d fenced write(s) by %s (login %s) on %s within %s; the last at epoch %d%s, %s ago",
				len(hits), said, cmp.Or(login, "?"), scope, human.Duration(cfg.FenceAlertFor), last.epoch, current, human.Duration(dbNow.Sub(last.at))),
			Hint:    fmt.Sprintf("%s acted after losing leadership (a pause or a partition): the database write was refused, but check its side effects outside the database and why it kept acting", node),
			Runbook: AlertFenceRejected.Runbook()}})
	}
	return out
}

// checkLockPressure compares the whole server's locks in the shared lock table
// with the table's nominal capacity: the table is the server's, not a
// database's.
func checkLockPressure(cfg *Config, r *dbRead) (finding, bool) {
	if r.Capacity <= 0 {
		return finding{}, false
	}
	frac := float64(r.Used) / float64(r.Capacity)
	if frac <= cfg.LockPressure {
		return finding{}, false
	}
	return finding{alert: Alert{Kind: AlertLockPressure, Severity: SeverityWarning,
		Summary: fmt.Sprintf("%d locks of the server (%d advisory in this database) use %.0f%% of the shared lock table's nominal %d entries (threshold %.0f%%)",
			r.Used, r.Advisory, frac*100, r.Capacity, cfg.LockPressure*100),
		Hint:    "find who holds them (SELECT pid, count(*) FROM pg_locks WHERE locktype = 'advisory' GROUP BY pid ORDER BY 2 DESC); when the table is full every session of the server fails: raise max_locks_per_transaction if the use is legitimate",
		Runbook: AlertLockPressure.Runbook()}}, true
}

// collectorDown is the alert of an outage: no successful read for quiet, since
// the first failed read. The server and the cause come first (the part of the
// line that an 80-column view keeps), then the database and how long.
func collectorDown(h Health, quiet time.Duration, since time.Time) Alert {
	db, server := splitDatabase(h.Database)
	return Alert{Kind: AlertCollectorDown, Severity: SeverityCritical, Since: since,
		Summary: fmt.Sprintf("%s %s — %s unread for %s", server+":", shortCause(h.LastError), db, human.Duration(quiet)),
		Hint:    downHint,
		Runbook: AlertCollectorDown.Runbook()}
}

// downHint is collector_down's hint, one database or several.
const downHint = "check the server and the path from this host first (is it up, does it accept connections, max_connections); the state shown is the last good read, greyed"
