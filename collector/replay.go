package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/protocol"
)

// Replay rebuilds the cluster as it was at a past instant from what the
// database keeps of its history: pgleader.terms, pgleader.audit, and the
// current rows of leader_state and nodes. What that history holds, and so
// what a replayed Snapshot can and cannot say (ReplayUnknown lists the
// fields it cannot rebuild):
//
//   - Scopes: a scope is shown from its first term on, and not while retired
//     (the scope_retired and scope_revived audit rows; without them
//     leader_state.retired_at). A scope that never had a term is not shown.
//   - Leader, epoch, tenure, handover gap, previous term: exact, from the term
//     open at the instant (acquired_at ≤ at < released_at). A term its holder
//     never closed is closed on record by its successor, at the successor's
//     claim; the holder's last heartbeat is known from the successor's handover
//     gap, so from that heartbeat plus the holder's trust window on the scope
//     shows as having no leader ("was n1"), as it had.
//   - Heartbeat ages: not recorded. Only a term's last heartbeat is known (its
//     release, the successor's handover gap, or leader_state for the current
//     term): after it the age is exact, before it unknown (a pause that ended
//     is not in any table). Likewise a node's last_seen.
//   - Nodes: only the newest row per node survives a restart. Its current
//     lifetime (registered_at, or started_at before schema 10, to stopped_at or
//     last_seen) is known: live while it was seen later, then late or down by
//     its own timing, or stopped. Before that lifetime a node is live where it
//     held a term; otherwise its state is unknown (NodeUnknown). Nothing audits
//     a registration: node_joined is a notification, not a row. Candidate lists,
//     priorities and timing are today's.
//   - Not rebuilt at all: lock holders other than the term's holder, waiters,
//     foreign sessions (interference), the lock table's size, the collector's
//     health, and every alert but no_leader (stale leader, split brain,
//     flapping and the rest need observations nobody recorded).
//
// Replay reads a window of ReplayWindow on either side of at; History.At
// rebuilds any other instant of that window without reading again.
func Replay(ctx context.Context, conn *pgx.Conn, at time.Time) (*Snapshot, error) {
	h, err := ReadHistory(ctx, conn, at, ReplayWindow)
	if err != nil {
		return nil, err
	}
	return h.At(at), nil
}

// ReplayWindow is how far on either side of the asked instant ReadHistory
// reads by default: stepping through the transitions of an incident stays in
// memory.
const ReplayWindow = time.Hour

// maxReplayAudit bounds the audit rows one window reads (the newest are kept).
const maxReplayAudit = 100000

// ErrReplayFuture is returned by ReadHistory for an instant after the
// database's now().
var ErrReplayFuture = errors.New("the instant is in the future of the database's clock")

// SourceReplay is Health.Source of a replayed snapshot: nothing was observed
// live.
const SourceReplay Source = "replay"

// NodeUnknown is the state of a node at an instant the history cannot tell:
// before its current lifetime, with no term held then.
const NodeUnknown NodeState = "unknown"

// ReplayUnknown names the JSON fields of a replayed Snapshot that are not
// rebuilt: they hold zero values (or today's values, for candidate lists and
// timing, see Replay) and every view shows them as unknown.
var ReplayUnknown = []string{
	"scopes[].heartbeat_age (exact only after the term's last heartbeat)",
	"scopes[].waiters", "scopes[].interference", "scopes[].lock_pids (inferred: the term's holder)",
	"nodes[].last_seen_age (exact only after the node's last sighting)",
	"nodes[].backend_pid", "nodes[].session_alive", "nodes[].supervisor",
	"locks", "fence_rejected", "timeline", "health",
	"alerts other than no_leader",
}

// ReplayInfo says that a Snapshot is rebuilt, for which instant, and what it
// cannot know.
type ReplayInfo struct {
	// At is the instant shown; DBNow the database's now() when it was read.
	At    time.Time `json:"at"`
	DBNow time.Time `json:"db_now"`
	// From and To bound the window read (History.At rebuilds any instant in it).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Earliest is the oldest record (term or audit row); zero when none.
	Earliest time.Time `json:"earliest,omitzero"`
	// Prev and Next are the transitions before and after At (zero: none):
	// a term acquired or released, a holder's last heartbeat plus its trust
	// window, a node registered, stopped or gone silent, an audited request.
	Prev time.Time `json:"prev,omitzero"`
	Next time.Time `json:"next,omitzero"`
	// Unknown lists what is not rebuilt (ReplayUnknown); Notes say what else
	// limits this picture (before the first record, nodes that restarted).
	Unknown []string `json:"unknown"`
	Notes   []string `json:"notes,omitempty"`
}

// History is what a replay rebuilds from: the rows of a window of time, read
// once. At rebuilds the Snapshot of any instant within [From, To]; Events and
// Transitions serve stepping through it. A History is not modified after
// ReadHistory (At only counts its snapshots) and may be shared.
type History struct {
	// From and To bound the window read (To at most DBNow).
	From, To time.Time
	// DBNow is the database's now() of the read.
	DBNow time.Time
	// Earliest is the oldest term or audit row (zero: none).
	Earliest time.Time
	// Before and After are the nearest transitions outside the window (zero:
	// none), to read the next window from.
	Before, After time.Time

	scopes  []HistoryScope
	terms   map[string][]Term // per scope, by acquired_at: two before From, the window, one after To
	audit   []auditRow        // [From, To], by time
	retired map[string]bool   // retired at From, by the audit rows before it
	nodes   []HistoryNode
	seq     atomic.Uint64
}

// HistoryScope is a leader_state row as a replay needs it: the scope's
// current record, and First, its first term's start.
type HistoryScope struct {
	Name          string
	LockKey       int64
	Mode          string
	Epoch         int64
	Holder        string
	LastHeartbeat time.Time
	Timing        Timing
	RetiredAt     time.Time
	First         time.Time // its first term's start (zero: never led)
}

// HistoryNode is a pgleader.nodes row with the start of its current
// lifetime (Node.StartedAt is its first registration ever).
type HistoryNode struct {
	Node
	Registered time.Time // registered_at (the current lifetime), else started_at
}

// HistoryAudit is a pgleader.audit row.
type HistoryAudit struct {
	ID         int64
	At         time.Time
	Scope      string
	Node       string
	Epoch      int64
	Kind       string
	Detail     json.RawMessage
	PrevHolder string // elected rows: the previous epoch's holder
}

// HistoryRows are the rows ReadHistory reads, for a History built from rows
// read otherwise (NewHistory): tests, tools that keep a copy.
type HistoryRows struct {
	// The window and its surroundings, as in History.
	From, To, DBNow, Earliest, Before, After time.Time
	// Scopes are every leader_state row.
	Scopes []HistoryScope
	// Terms are those that began in the window, plus per scope the two before
	// it and the first after it.
	Terms []Term
	// Audit are the rows of the window (transitionKinds; any order).
	Audit []HistoryAudit
	// Retired: the scopes retired at From, by the last scope_retired or
	// scope_revived row before it (true: retired).
	Retired map[string]bool
	// Nodes are every pgleader.nodes row.
	Nodes []HistoryNode
}

// NewHistory builds a History from rows.
func NewHistory(r HistoryRows) *History {
	h := &History{From: r.From, To: r.To, DBNow: r.DBNow, Earliest: r.Earliest, Before: r.Before, After: r.After,
		scopes: slices.Clone(r.Scopes), nodes: slices.Clone(r.Nodes), terms: map[string][]Term{}, retired: map[string]bool{}}
	for k, v := range r.Retired {
		h.retired[k] = v
	}
	h.setTerms(r.Terms)
	for _, a := range r.Audit {
		row := auditRow{ID: a.ID, At: a.At, Scope: a.Scope, Node: a.Node, Epoch: a.Epoch, Kind: a.Kind, PrevHolder: a.PrevHolder}
		_ = json.Unmarshal(a.Detail, &row.Detail) // as a read does: a malformed detail keeps zero values
		h.audit = append(h.audit, row)
	}
	slices.SortStableFunc(h.audit, func(a, b auditRow) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return h
}

// transitionKinds are the audit kinds that change what a replay shows, or
// that an operator steps to.
var transitionKinds = []string{"elected", "released", "term_closed_by_successor", "fence_rejected", "evicted",
	"resign_requested", "handover_requested", "handover_cancelled", "scope_retired", "scope_revived", "epoch_floor_raised", "child_exited"}

const (
	sqlReplayMeta = `
SELECT now(),
       least((SELECT min(t.acquired_at) FROM pgleader.terms t), (SELECT min(a.at) FROM pgleader.audit a))`

	sqlReplayScopes = `
SELECT s.scope, s.lock_key, s.mode, s.epoch, coalesce(s.holder, ''), s.last_heartbeat,
       s.heartbeat_interval_ms, s.heartbeat_timeout_ms, s.trust_window_ms, s.session_lease_ms, s.retired_at, f.acquired_at
  FROM pgleader.leader_state s
  LEFT JOIN LATERAL (SELECT t.acquired_at FROM pgleader.terms t WHERE t.scope = s.scope
                      ORDER BY t.acquired_at LIMIT 1) f ON true
 ORDER BY s.scope`

	// Per scope: the two terms before the window (the one open at its start
	// and its predecessor), every term that began in it, and the first after
	// it (which closed a term its holder never closed, and names its last
	// heartbeat through its handover gap). $1 From, $2 To.
	sqlReplayTerms = `
SELECT t.id, t.scope, t.epoch, t.holder, t.hostname, t.holder_pid, t.acquired_at, t.released_at, t.release_reason,
       t.handover_gap_us, t.handed_to, NULL::timestamptz, 0, NULL::int, NULL::text
  FROM pgleader.leader_state s
 CROSS JOIN LATERAL (
       (SELECT w.* FROM pgleader.watch_terms_v1 w WHERE w.scope = s.scope AND w.acquired_at < $1
         ORDER BY w.acquired_at DESC LIMIT 2)
       UNION ALL
       (SELECT w.* FROM pgleader.watch_terms_v1 w WHERE w.scope = s.scope AND w.acquired_at >= $1 AND w.acquired_at <= $2)
       UNION ALL
       (SELECT w.* FROM pgleader.watch_terms_v1 w WHERE w.scope = s.scope AND w.acquired_at > $2
         ORDER BY w.acquired_at LIMIT 1)) t`

	sqlReplayAudit = `
SELECT * FROM (
SELECT a.id, a.at, coalesce(a.scope, ''), coalesce(a.node_id, ''), coalesce(a.epoch, 0), a.kind, a.detail,
       ` + sqlPrevHolder + `, coalesce(a.session_role, '')
  FROM pgleader.audit a WHERE a.at >= $1 AND a.at <= $2 AND a.kind = ANY ($3)
 ORDER BY a.at DESC, a.id DESC LIMIT $4) x ORDER BY 2, 1`

	sqlReplayRetired = `
SELECT DISTINCT ON (a.scope) a.scope, a.kind = 'scope_retired'
  FROM pgleader.audit a
 WHERE a.kind IN ('scope_retired', 'scope_revived') AND a.at < $1 AND a.scope IS NOT NULL
 ORDER BY a.scope, a.at DESC, a.id DESC`

	// %s: first_registered_at (schema 17), else started_at, which meant it before.
	sqlReplayNodes = `
SELECT n.node_id, n.hostname, n.version, %s, n.registered_at, n.last_seen, n.stopped_at, n.scopes,
       n.heartbeat_interval_ms, n.trust_window_ms, n.session_lease_ms, n.priority, n.mode
  FROM pgleader.nodes n ORDER BY n.node_id`

	// Whether nodes has first_registered_at (schema 17).
	sqlReplayFirstRegistered = `
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = 'pgleader.nodes'::regclass AND a.attname = 'first_registered_at' AND NOT a.attisdropped)`

	// The nearest transitions outside the window. $1 From, $2 To, $3 kinds.
	sqlReplayOutside = `
SELECT greatest((SELECT max(t.acquired_at) FROM pgleader.terms t WHERE t.acquired_at < $1),
                (SELECT max(t.released_at) FROM pgleader.terms t WHERE t.released_at < $1),
                (SELECT max(a.at) FROM pgleader.audit a WHERE a.at < $1 AND a.kind = ANY ($3)),
                (SELECT max(n.registered_at) FROM pgleader.nodes n WHERE n.registered_at < $1),
                (SELECT max(n.stopped_at) FROM pgleader.nodes n WHERE n.stopped_at < $1)),
       least((SELECT min(t.acquired_at) FROM pgleader.terms t WHERE t.acquired_at > $2),
             (SELECT min(t.released_at) FROM pgleader.terms t WHERE t.released_at > $2),
             (SELECT min(a.at) FROM pgleader.audit a WHERE a.at > $2 AND a.kind = ANY ($3)),
             (SELECT min(n.registered_at) FROM pgleader.nodes n WHERE n.registered_at > $2),
             (SELECT min(n.stopped_at) FROM pgleader.nodes n WHERE n.stopped_at > $2))`
)

// ReadHistory reads the history of the window [at − window, at + window] (the
// end capped at the database's now()) in one REPEATABLE READ, READ ONLY
// transaction on conn, whose session the caller set up (search_path first:
// internal/pgsession). It returns ErrReplayFuture for an instant after the
// database's now().
func ReadHistory(ctx context.Context, conn *pgx.Conn, at time.Time, window time.Duration) (*History, error) {
	if window <= 0 {
		window = ReplayWindow
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("replay: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	h := &History{terms: map[string][]Term{}, retired: map[string]bool{}}
	var earliest *time.Time
	if err := tx.QueryRow(ctx, sqlReplayMeta).Scan(&h.DBNow, &earliest); err != nil {
		return nil, fmt.Errorf("replay: read the database's time: %w", err)
	}
	h.Earliest = tm(earliest)
	if at.After(h.DBNow) {
		return nil, fmt.Errorf("%s is %s after the database's now() (%s): %w", at.Format(time.RFC3339Nano),
			human.Duration(at.Sub(h.DBNow)), h.DBNow.Format(time.RFC3339Nano), ErrReplayFuture)
	}
	h.From, h.To = at.Add(-window), at.Add(window)
	if h.To.After(h.DBNow) {
		h.To = h.DBNow
	}

	rows, _ := tx.Query(ctx, sqlReplayScopes)
	h.scopes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryScope, error) {
		var (
			s                        HistoryScope
			hb, retired, first       *time.Time
			ival, tout, trust, lease *int32
		)
		err := row.Scan(&s.Name, &s.LockKey, &s.Mode, &s.Epoch, &s.Holder, &hb, &ival, &tout, &trust, &lease, &retired, &first)
		s.LastHeartbeat, s.RetiredAt, s.First = tm(hb), tm(retired), tm(first)
		s.Timing = Timing{HeartbeatInterval: ms(ival), HeartbeatTimeout: ms(tout), TrustWindow: ms(trust), SessionLease: ms(lease)}
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: read scopes: %w", err)
	}
	rows, _ = tx.Query(ctx, sqlReplayTerms, h.From, h.To)
	terms, err := pgx.CollectRows(rows, scanTerm)
	if err != nil {
		return nil, fmt.Errorf("replay: read terms: %w", err)
	}
	h.setTerms(terms)
	rows, _ = tx.Query(ctx, sqlReplayAudit, h.From, h.To, transitionKinds, maxReplayAudit)
	if h.audit, err = pgx.CollectRows(rows, scanAudit); err != nil {
		return nil, fmt.Errorf("replay: read audit: %w", err)
	}
	rows, _ = tx.Query(ctx, sqlReplayRetired, h.From)
	var (
		rs string
		rr bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&rs, &rr}, func() error { h.retired[rs] = rr; return nil }); err != nil {
		return nil, fmt.Errorf("replay: read retirements: %w", err)
	}
	var firstReg bool
	if err := tx.QueryRow(ctx, sqlReplayFirstRegistered).Scan(&firstReg); err != nil {
		return nil, fmt.Errorf("replay: read the nodes' columns: %w", err)
	}
	since := "n.started_at"
	if firstReg {
		since = "coalesce(n.first_registered_at, n.started_at)"
	}
	rows, _ = tx.Query(ctx, fmt.Sprintf(sqlReplayNodes, since))
	h.nodes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryNode, error) {
		var (
			n                  HistoryNode
			reg, stopped       *time.Time
			ival, trust, lease *int32
		)
		err := row.Scan(&n.ID, &n.Hostname, &n.Version, &n.StartedAt, &reg, &n.LastSeen, &stopped, &n.Scopes,
			&ival, &trust, &lease, &n.Priority, &n.Mode)
		n.StoppedAt = tm(stopped)
		n.Registered = cmp.Or(tm(reg), n.StartedAt)
		n.Timing = Timing{HeartbeatInterval: ms(ival), TrustWindow: ms(trust), SessionLease: ms(lease)}
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: read nodes: %w", err)
	}
	var before, after *time.Time
	if err := tx.QueryRow(ctx, sqlReplayOutside, h.From, h.To, transitionKinds).Scan(&before, &after); err != nil {
		return nil, fmt.Errorf("replay: read the transitions around the window: %w", err)
	}
	h.Before, h.After = tm(before), tm(after)
	return h, nil
}

// setTerms files terms per scope, oldest first, each once.
func (h *History) setTerms(terms []Term) {
	seen := map[int64]bool{}
	for _, t := range terms {
		if seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		h.terms[t.Scope] = append(h.terms[t.Scope], t)
	}
	for _, ts := range h.terms {
		slices.SortFunc(ts, func(a, b Term) int { return cmp.Or(a.AcquiredAt.Compare(b.AcquiredAt), cmp.Compare(a.Epoch, b.Epoch)) })
	}
}

// Contains reports whether at lies within the window read.
func (h *History) Contains(at time.Time) bool { return !at.Before(h.From) && !at.After(h.To) }

// lastSign is the last instant a term's holder is known to have led: its own
// release, or, for a term its successor closed, its last heartbeat (the
// successor's start minus its handover gap), or for the open current term
// leader_state's last heartbeat. Zero when unknown (an open term that is not
// leader_state's).
func (h *History) lastSign(sc *HistoryScope, ts []Term, i int) time.Time {
	t := ts[i]
	switch {
	case t.Open():
		if sc != nil && sc.Epoch == t.Epoch && sc.Holder == t.Holder {
			return sc.LastHeartbeat
		}
		return time.Time{}
	case t.EndedBy == protocol.ReasonResigned || t.EndedBy == protocol.ReasonShutdown || t.EndedBy == protocol.ReasonHandedOver:
		return t.ReleasedAt
	}
	if i+1 < len(ts) && ts[i+1].AcquiredAt.Equal(t.ReleasedAt) {
		// Closed by its successor's claim: its last heartbeat is the
		// successor's start minus its handover gap.
		return ts[i+1].AcquiredAt.Add(-ts[i+1].HandoverGap)
	}
	return t.ReleasedAt // released by its holder
}

// trustWindow is the window after a holder's last heartbeat within which it
// still counted as leading: the scope's registered trust window (today's),
// else the default; in lease mode its lease, which is what ends a lease
// holder's leadership (Scope.HasLeader).
func trustWindow(sc *HistoryScope) time.Duration {
	if sc.Mode == "lease" && sc.Timing.SessionLease > 0 {
		return sc.Timing.SessionLease
	}
	if sc.Timing.TrustWindow > 0 {
		return sc.Timing.TrustWindow
	}
	return defaultTrustWindow
}

// termAt is the state of one scope's terms at an instant.
type termAt struct {
	cur      *Term     // the latest term begun at or before the instant (nil: none)
	prev     *Term     // the one before it
	open     bool      // cur was open at the instant (on record)
	alive    bool      // and its holder led then (not past its last heartbeat + W)
	lastSign time.Time // cur's last sign of leadership (zero: unknown)
}

func (h *History) termAt(sc *HistoryScope, at time.Time) termAt {
	ts := h.terms[sc.Name]
	i := -1
	for j := range ts {
		if ts[j].AcquiredAt.After(at) {
			break
		}
		i = j
	}
	if i < 0 {
		return termAt{}
	}
	r := termAt{cur: &ts[i]}
	if i > 0 {
		r.prev = &ts[i-1]
	}
	r.open = r.cur.Open() || r.cur.ReleasedAt.After(at)
	r.lastSign = h.lastSign(sc, ts, i)
	r.alive = r.open && (r.lastSign.IsZero() || !at.After(r.lastSign.Add(trustWindow(sc))))
	return r
}

// retiredAt reports whether the scope was retired at the instant.
func (h *History) retiredAt(sc *HistoryScope, at time.Time) bool {
	state, known := h.retired[sc.Name]
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if a.Scope == sc.Name && (a.Kind == "scope_retired" || a.Kind == "scope_revived") {
			state, known = a.Kind == "scope_retired", true
		}
	}
	if !known {
		return !sc.RetiredAt.IsZero() && !sc.RetiredAt.After(at)
	}
	return state
}

// At rebuilds the Snapshot of the instant at (see Replay for what it holds).
// An instant outside [From, To] is rebuilt from what the window holds, which
// may lack its terms: read a History around it instead.
func (h *History) At(at time.Time) *Snapshot {
	snap := &Snapshot{Seq: h.seq.Add(1), At: at, DBTime: at, FenceRejected: map[string]uint64{},
		Health: Health{Source: SourceReplay, SlotLagBytes: -1}}
	info := &ReplayInfo{At: at, DBNow: h.DBNow, From: h.From, To: h.To, Earliest: h.Earliest,
		Unknown: slices.Clone(ReplayUnknown)}
	info.Prev, info.Next = h.Prev(at), h.Next(at)
	snap.Replay = info
	if h.Earliest.IsZero() || at.Before(h.Earliest) {
		info.Notes = append(info.Notes, "before the first record: no term or audit row is older than this instant")
	}

	leading := map[string][]string{} // node → scopes it led at the instant
	states := map[string]termAt{}
	for i := range h.scopes {
		sc := &h.scopes[i]
		if sc.First.IsZero() || sc.First.After(at) {
			continue
		}
		if h.retiredAt(sc, at) {
			snap.Retired++
			continue
		}
		st := h.termAt(sc, at)
		states[sc.Name] = st
		if st.alive {
			leading[st.cur.Holder] = append(leading[st.cur.Holder], sc.Name)
		}
	}
	snap.Nodes = h.nodesAt(at, leading, &info.Notes)
	live := map[string]bool{}
	for _, n := range snap.Nodes {
		if n.Live {
			live[n.ID] = true
		}
	}
	for i := range h.scopes {
		sc := &h.scopes[i]
		st, ok := states[sc.Name]
		if !ok {
			continue
		}
		s := h.scopeAt(sc, st, at, snap.Nodes, live)
		snap.Alerts = append(snap.Alerts, s.Alerts...)
		snap.Scopes = append(snap.Scopes, s)
	}
	sortAlerts(snap.Alerts)
	snap.Terms = h.termsAt(at)
	return snap
}

// scopeAt is one scope at the instant.
func (h *History) scopeAt(sc *HistoryScope, st termAt, at time.Time, nodes []Node, live map[string]bool) Scope {
	s := Scope{Name: sc.Name, LockKey: sc.LockKey, Mode: sc.Mode, Timing: sc.Timing, Followers: []string{}}
	cur := st.cur
	s.Epoch = cur.Epoch
	if st.open {
		t := *cur
		t.ReleasedAt, t.EndedBy, t.HandedTo = time.Time{}, "", ""
		t.HeldFor = at.Sub(t.AcquiredAt)
		s.OpenTerm = &t
		s.Leader, s.LeaderHost, s.HolderPID = cur.Holder, cur.Hostname, cur.HolderPID
		s.AcquiredAt, s.Tenure = cur.AcquiredAt, at.Sub(cur.AcquiredAt)
		s.LeaderLive = st.alive
		if st.alive {
			s.LockPIDs = []int{max(cur.HolderPID, 1)} // the term's holder: inferred, not observed
		}
	} else {
		s.ReleasedAt = cur.ReleasedAt
	}
	if !st.lastSign.IsZero() && !at.Before(st.lastSign) {
		// After the term's last heartbeat its age is exact.
		s.LastHeartbeat, s.HeartbeatAge = st.lastSign, at.Sub(st.lastSign)
	}
	if !st.alive {
		since := st.lastSign
		if since.IsZero() && !st.open {
			since = cur.ReleasedAt
		}
		if !since.IsZero() && !since.After(at) {
			s.LeaderlessFor = at.Sub(since)
		}
	}
	for _, n := range nodes {
		if n.Live && n.ID != s.Leader && slices.Contains(n.Scopes, sc.Name) {
			s.Followers = append(s.Followers, n.ID)
		}
	}
	if st.open {
		s.HandoverTo = h.handoverAt(sc.Name, cur.Epoch, at)
	}
	for _, t := range h.terms[sc.Name] {
		if !t.AcquiredAt.After(at) && at.Sub(t.AcquiredAt) <= DefaultFlapWindow {
			s.Changes++
		}
	}
	switch {
	case st.alive:
		s.Verdict = VerdictOK
	case !st.open && cur.EndedBy == protocol.ReasonShutdown && !h.candidateLive(sc.Name, nodes):
		s.Verdict = VerdictIdle
	default:
		s.Verdict = VerdictNoLeader
		if s.LeaderlessFor >= DefaultNoLeaderAfter {
			what := fmt.Sprintf("the term of %s (epoch %d) ended %s", cur.Holder, cur.Epoch, cmp.Or(string(cur.EndedBy), "unknown"))
			if st.open {
				what = fmt.Sprintf("term %d of %s was open on record, its holder silent since %s", cur.Epoch, cur.Holder,
					st.lastSign.Format("15:04:05.000"))
			}
			s.Alerts = []Alert{{Kind: AlertNoLeader, Severity: SeverityCritical, Scope: sc.Name,
				Summary: fmt.Sprintf("%s had had no leader for %s: %s", sc.Name, human.Duration(s.LeaderlessFor), what),
				Hint:    "replayed: see pgleader history and the audit rows of that time",
				Runbook: runbook(AlertNoLeader), Since: at.Add(-s.LeaderlessFor)}}
		}
	}
	return s
}

// candidateLive reports whether a live node lists the scope among its
// (today's) candidate scopes.
func (h *History) candidateLive(scope string, nodes []Node) bool {
	return slices.ContainsFunc(nodes, func(n Node) bool { return n.Live && slices.Contains(n.Scopes, scope) })
}

// handoverAt is the target of a handover requested of the term of epoch and
// not withdrawn by the instant ("" when none).
func (h *History) handoverAt(scope string, epoch int64, at time.Time) string {
	to := ""
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if a.Scope != scope || a.Epoch != epoch {
			continue
		}
		switch a.Kind {
		case "handover_requested":
			to = a.Detail.To
		case "handover_cancelled":
			to = ""
		}
	}
	return to
}

// nodesAt is the nodes at the instant. notes collects what limits them.
func (h *History) nodesAt(at time.Time, leading map[string][]string, notes *[]string) []Node {
	out := []Node{}
	var earlier []string
	for _, rn := range h.nodes {
		n := rn.Node
		n.Scopes = slices.Clone(n.Scopes)
		if n.Scopes == nil {
			n.Scopes = []string{}
		}
		leads := leading[n.ID]
		if n.StartedAt.After(at) && len(leads) == 0 {
			continue // not registered yet
		}
		n.Leads = slices.Clone(leads)
		if n.Leads == nil {
			n.Leads = []string{}
		}
		n.Reported = slices.Clone(n.Leads)
		lastSeen, stopped := n.LastSeen, n.StoppedAt
		n.LastSeen, n.StoppedAt, n.LastSeenAge = time.Time{}, time.Time{}, 0
		switch {
		case at.Before(rn.Registered):
			// An earlier lifetime: only its terms tell.
			if len(leads) > 0 {
				n.State = NodeLive
			} else {
				n.State = NodeUnknown
				earlier = append(earlier, n.ID)
			}
		case !stopped.IsZero() && !stopped.After(at):
			n.StoppedAt, n.LastSeen = stopped, lastSeen
			n.State = NodeStopped
		case !lastSeen.Before(at):
			n.State = NodeLive // seen again later in this lifetime
		default:
			n.LastSeen, n.LastSeenAge = lastSeen, at.Sub(lastSeen)
			n.State = nodeState(&n, defaultTrustWindow)
		}
		n.Live = n.State == NodeLive
		out = append(out, n)
	}
	if len(earlier) > 0 {
		*notes = append(*notes, fmt.Sprintf("%d node(s) registered again after this instant (%s): their state then is unknown unless they held a term",
			len(earlier), joinShort(earlier, 5)))
	}
	return out
}

// joinShort joins the first n of xs, counting the rest.
func joinShort(xs []string, n int) string {
	s := ""
	for i, x := range xs {
		if i == n {
			return s + fmt.Sprintf(" +%d more", len(xs)-n)
		}
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}

// termsAt is the terms begun by the instant, newest first (DefaultRecentTerms
// of them, plus every term of the window's scopes that was open then), each as
// it stood then: a term that ended later is open, held for so far.
func (h *History) termsAt(at time.Time) []Term {
	var out []Term
	for _, ts := range h.terms {
		for _, t := range ts {
			if t.AcquiredAt.After(at) {
				break
			}
			if t.Open() || t.ReleasedAt.After(at) {
				t.ReleasedAt, t.EndedBy, t.HandedTo = time.Time{}, "", ""
				t.HeldFor = at.Sub(t.AcquiredAt)
			} else {
				t.HeldFor = t.ReleasedAt.Sub(t.AcquiredAt)
			}
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Term) int { return cmp.Or(b.AcquiredAt.Compare(a.AcquiredAt), cmp.Compare(b.ID, a.ID)) })
	if len(out) > DefaultRecentTerms*4 {
		out = out[:DefaultRecentTerms*4]
	}
	return out
}

// Transitions is every instant in the window at which the replayed picture
// changes, sorted, each once.
func (h *History) Transitions() []time.Time {
	var ts []time.Time
	add := func(t time.Time) {
		if !t.IsZero() && h.Contains(t) {
			ts = append(ts, t)
		}
	}
	for _, sc := range h.scopes {
		terms := h.terms[sc.Name]
		for i, t := range terms {
			add(t.AcquiredAt)
			add(t.ReleasedAt)
			if sign := h.lastSign(&sc, terms, i); !sign.IsZero() && (t.Open() || sign.Before(t.ReleasedAt)) {
				if w := sign.Add(trustWindow(&sc)); t.Open() || w.Before(t.ReleasedAt) {
					add(w.Add(time.Millisecond)) // the first instant it no longer led
				}
			}
		}
	}
	for _, a := range h.audit {
		add(a.At)
	}
	for _, n := range h.nodes {
		add(n.Registered)
		add(n.StoppedAt)
		if n.StoppedAt.IsZero() && n.LastSeen.Before(h.DBNow) {
			add(n.LastSeen.Add(time.Millisecond)) // the first instant after its last sighting
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(ts, func(a, b time.Time) bool { return a.Equal(b) })
}

// Prev is the last transition before at: in the window, else Before (zero:
// none).
func (h *History) Prev(at time.Time) time.Time {
	ts := h.Transitions()
	i, _ := slices.BinarySearchFunc(ts, at, func(a, b time.Time) int { return a.Compare(b) })
	if i > 0 {
		return ts[i-1]
	}
	return h.Before
}

// Next is the first transition after at: in the window, else After (zero:
// none).
func (h *History) Next(at time.Time) time.Time {
	ts := h.Transitions()
	i, found := slices.BinarySearchFunc(ts, at, func(a, b time.Time) int { return a.Compare(b) })
	if found {
		i++
	}
	if i < len(ts) {
		return ts[i]
	}
	return h.After
}

// Events is the last n events of the window up to the instant, oldest first:
// the audit rows (as the collector maps them) and the registrations and clean
// stops of nodes' current lifetimes.
func (h *History) Events(at time.Time, n int) []Event {
	var evs []Event
	for _, a := range h.audit {
		if a.At.After(at) {
			break
		}
		if ev, ok := auditEvent(a); ok {
			evs = append(evs, ev)
		}
	}
	for _, rn := range h.nodes {
		if h.Contains(rn.Registered) && !rn.Registered.After(at) {
			evs = append(evs, Event{At: rn.Registered, Kind: EventNodeJoined, Node: rn.ID, Detail: "registered (" + rn.Hostname + ")"})
		}
		if !rn.StoppedAt.IsZero() && h.Contains(rn.StoppedAt) && !rn.StoppedAt.After(at) {
			evs = append(evs, Event{At: rn.StoppedAt, Kind: EventNodeLeft, Node: rn.ID, Reason: "stopped"})
		}
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return a.At.Compare(b.At) })
	if n > 0 && len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	return evs
}
