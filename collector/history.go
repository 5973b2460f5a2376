package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/human"
)

// The history of a database, as package collector/replay rebuilds the past
// from it: the rows of pgleader.terms, pgleader.audit, and the current rows of
// leader_state and nodes, read for a window of time in one snapshot.

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

// ReplayInfo says that a Snapshot is rebuilt, for which instant, and what it
// cannot know.
type ReplayInfo struct {
	// At is the instant shown; DBNow the database's now() when it was read.
	At    time.Time `json:"at"`
	DBNow time.Time `json:"db_now"`
	// From and To bound the window read (a replay rebuilds any instant in it).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Earliest is the oldest record (term or audit row); zero when none.
	Earliest time.Time `json:"earliest,omitzero"`
	// Prev and Next are the transitions before and after At (zero: none):
	// a term acquired or released, a holder's last heartbeat plus its trust
	// window, a node registered, stopped or gone silent, an audited request.
	Prev time.Time `json:"prev,omitzero"`
	Next time.Time `json:"next,omitzero"`
	// Unknown lists what is not rebuilt (replay.Unknown); Notes say what else
	// limits this picture (before the first record, nodes that restarted).
	Unknown []string `json:"unknown"`
	Notes   []string `json:"notes,omitempty"`
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

// Event is the event the collector makes of the row, as it reads it live
// (false for kinds without one). A detail that does not decode keeps zero
// values, as on a live read.
func (a HistoryAudit) Event() (Event, bool) {
	row := auditRow{ID: a.ID, At: a.At, Scope: a.Scope, Node: a.Node, Epoch: a.Epoch, Kind: a.Kind, PrevHolder: a.PrevHolder}
	_ = json.Unmarshal(a.Detail, &row.Detail)
	return auditEvent(row)
}

// HistoryRows are the rows of a window of history (ReadHistory), what
// package collector/replay rebuilds any instant of the window from.
type HistoryRows struct {
	// From and To bound the window, To at most DBNow (the database's now()
	// of the read); Earliest is the oldest term or audit row (zero: none);
	// Before and After are the nearest transitions outside the window (zero:
	// none), to read the next window from.
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
func ReadHistory(ctx context.Context, conn *pgx.Conn, at time.Time, window time.Duration) (HistoryRows, error) {
	if window <= 0 {
		window = ReplayWindow
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return HistoryRows{}, fmt.Errorf("replay: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var h HistoryRows
	h.Retired = map[string]bool{}
	var earliest *time.Time
	if err := tx.QueryRow(ctx, sqlReplayMeta).Scan(&h.DBNow, &earliest); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read the database's time: %w", err)
	}
	h.Earliest = tm(earliest)
	if at.After(h.DBNow) {
		return HistoryRows{}, fmt.Errorf("%s is %s after the database's now() (%s): %w", at.Format(time.RFC3339Nano),
			human.Duration(at.Sub(h.DBNow)), h.DBNow.Format(time.RFC3339Nano), ErrReplayFuture)
	}
	h.From, h.To = at.Add(-window), at.Add(window)
	if h.To.After(h.DBNow) {
		h.To = h.DBNow
	}

	rows, _ := tx.Query(ctx, sqlReplayScopes)
	h.Scopes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryScope, error) {
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
		return HistoryRows{}, fmt.Errorf("replay: read scopes: %w", err)
	}
	rows, _ = tx.Query(ctx, sqlReplayTerms, h.From, h.To)
	if h.Terms, err = pgx.CollectRows(rows, scanTerm); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read terms: %w", err)
	}
	rows, _ = tx.Query(ctx, sqlReplayAudit, h.From, h.To, transitionKinds, maxReplayAudit)
	if h.Audit, err = pgx.CollectRows(rows, scanHistoryAudit); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read audit: %w", err)
	}
	rows, _ = tx.Query(ctx, sqlReplayRetired, h.From)
	var (
		rs string
		rr bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&rs, &rr}, func() error { h.Retired[rs] = rr; return nil }); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read retirements: %w", err)
	}
	var firstReg bool
	if err := tx.QueryRow(ctx, sqlReplayFirstRegistered).Scan(&firstReg); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read the nodes' columns: %w", err)
	}
	since := "n.started_at"
	if firstReg {
		since = "coalesce(n.first_registered_at, n.started_at)"
	}
	rows, _ = tx.Query(ctx, fmt.Sprintf(sqlReplayNodes, since))
	h.Nodes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryNode, error) {
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
		return HistoryRows{}, fmt.Errorf("replay: read nodes: %w", err)
	}
	var before, after *time.Time
	if err := tx.QueryRow(ctx, sqlReplayOutside, h.From, h.To, transitionKinds).Scan(&before, &after); err != nil {
		return HistoryRows{}, fmt.Errorf("replay: read the transitions around the window: %w", err)
	}
	h.Before, h.After = tm(before), tm(after)
	return h, nil
}

// scanHistoryAudit scans a row of sqlReplayAudit; its detail stays as the
// database wrote it (HistoryAudit.Event decodes it).
func scanHistoryAudit(row pgx.CollectableRow) (HistoryAudit, error) {
	a, detail, err := scanAuditColumns(row)
	return HistoryAudit{ID: a.ID, At: a.At, Scope: a.Scope, Node: a.Node, Epoch: a.Epoch, Kind: a.Kind,
		Detail: detail, PrevHolder: a.PrevHolder}, err
}
