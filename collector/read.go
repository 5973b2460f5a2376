package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/protocol"
)

const (
	// readStatementTimeout bounds every statement of a read on the server;
	// readTimeout bounds a whole read on the client (a silent network).
	readStatementTimeout = 5 * time.Second
	readTimeout          = 10 * time.Second
	// auditBatch is the most audit rows one read takes; a read that hits it asks
	// for another at once.
	auditBatch = 1000
	// firstAuditBatch is the most rows of the FenceAlertFor window the first read
	// replays (the newest).
	firstAuditBatch = 10000
)

// auditKinds are the audit rows that become events.
var auditKinds = []string{"elected", "released", "term_closed_by_successor", "fence_rejected", "evicted", "resign_requested",
	"handover_requested", "handover_cancelled", "scope_retired", "scope_revived", "child_exited"}

// dbRead is the raw result of one read: everything comes from one REPEATABLE READ
// transaction, except the lock table, which is not transactional and is read by
// the first statement, right when the transaction's snapshot is taken.
type dbRead struct {
	Now        time.Time // the database's now() (transaction start)
	Timeline   int64     // the WAL timeline the server writes on (0 on a standby)
	Capacity   int
	Advisory   int
	Waiting    int
	Used       int     // granted locks of the whole server in the shared lock table
	NotifyQ    float64 // pg_notification_queue_usage()
	MaxAuditID int64   // the newest audit id (the first read starts after it)
	Scopes     []scopeRow
	Nodes      []Node
	Terms      []Term
	// WindowTerms are the terms that ended within Config.TermsWindow, per
	// scope (sqlWindowTerms).
	WindowTerms []Term
	Audit       []auditRow
	// Interference: sessions on scope locks that are not candidates (nil before
	// schema version 7).
	Interference []interferenceRow
	// KeyOverrides: pgleader.scope_keys, by scope.
	KeyOverrides map[string]keyOverride
	// Schema 16 on (readShape.guards): FenceWaits, the scopes whose current
	// term's fenced transactions hold the row a claim found busy, with their
	// blockers; UnboundLeaders, scope → the login of a holder its binding no
	// longer admits.
	FenceWaits     map[string]*fenceWait
	UnboundLeaders map[string]string
	// InFlight are ids just below MaxAuditID that the snapshot does not show
	// (first read with events only): transactions still in flight.
	InFlight []int64
	Cursor   readCursor // how Audit was read

	byScope map[string][]Term // termsOf's index
}

// termsOf returns the terms of scope the read has (the recent ones and the
// window's), each once, by epoch.
func (r *dbRead) termsOf(scope string) []Term {
	if r.byScope == nil {
		r.byScope = map[string][]Term{}
		seen := map[int64]bool{}
		for _, ts := range [][]Term{r.Terms, r.WindowTerms} {
			for _, t := range ts {
				if !seen[t.ID] {
					seen[t.ID] = true
					r.byScope[t.Scope] = append(r.byScope[t.Scope], t)
				}
			}
		}
		for _, ts := range r.byScope {
			slices.SortFunc(ts, func(a, b Term) int { return cmp.Compare(a.Epoch, b.Epoch) })
		}
	}
	return r.byScope[scope]
}

// scopeRow is a scope name (from leader_state or from a candidate's scopes), its
// leader_state row if any, its lock in pg_locks, and its latest term.
type scopeRow struct {
	Name             string
	Recorded         bool // a leader_state row exists
	LockKey          int64
	Epoch            int64
	Holder           string
	HolderPID        int
	AcquiredAt       time.Time
	ReleasedAt       time.Time
	LastHeartbeat    time.Time
	Timing           Timing
	LockPIDs         []int // granted ExclusiveLock
	OtherPIDs        []int // granted in another mode (ShareLock: a waiter's await_release, or a squatter)
	Waiters          int
	Latest           *Term     // the newest term (by acquired_at)
	HandoverTo       string    // schema 8: a pending handover's target
	HandoverDeadline time.Time //   and its deadline
	RetiredAt        time.Time // schema 8: retired (pgleader scope retire)
	Mode             string    // schema 9: lock or lease
	BoundTo          []string  // schema 12: the roles whose logins may campaign for it (none: any node role)
	Changes          int       // terms acquired within FlapWindow
	MaxTermEpoch     int64     // highest epoch in pgleader.terms
}

// open reports whether leader_state records an open term.
func (r scopeRow) open() bool { return r.Holder != "" && r.ReleasedAt.IsZero() }

// keyOverride is a row of pgleader.scope_keys.
type keyOverride struct {
	Key   int64
	SetBy string
	SetAt time.Time
}

// fenceWait is a row of pgleader.fence_waits for a scope's current term, with
// the fenced transactions that hold its row (pgleader.fenced_blockers).
type fenceWait struct {
	Node     string
	Since    time.Time
	Blockers []fencedBlocker
}

// fencedBlocker is a row of pgleader.fenced_blockers: a backend (PID), or a
// prepared transaction (Prepared, its gid; PID 0).
type fencedBlocker struct {
	PID      int
	Login    string
	Prepared string
}

func (b fencedBlocker) String() string {
	if b.Prepared != "" {
		return fmt.Sprintf("prepared transaction %q of role %s", b.Prepared, b.Login)
	}
	return fmt.Sprintf("pid %d (role %s)", b.PID, b.Login)
}

// interferenceRow is a row of pgleader.interference().
type interferenceRow struct {
	Scope string
	ForeignSession
}

// auditRow is a row of pgleader.audit.
type auditRow struct {
	ID     int64
	At     time.Time
	Scope  string
	Node   string
	Epoch  int64
	Kind   string
	Detail auditDetail
	// PrevHolder is the holder of the previous epoch (elected rows).
	PrevHolder string
	// Login is the session's login that wrote the row (audit.session_role):
	// the database's attribution, where Node is what the caller said.
	Login string
}

// auditDetail holds the fields of audit.detail the collector uses. Rows are
// written by SQL functions (and, for evictions, by the collector); a row whose
// detail does not decode keeps zero values rather than failing the read.
type auditDetail struct {
	PrevHolder   *string `json:"prev_holder"`
	PrevEpoch    *int64  `json:"prev_epoch"`
	Reason       string  `json:"reason"`
	Successor    string  `json:"successor"`
	CurrentEpoch *int64  `json:"current_epoch"`
	Detail       *string `json:"detail"`
	PID          int     `json:"pid"`
	By           string  `json:"by"`        // the login role (schema 7 on; before, what the caller said)
	Via          string  `json:"via"`       // what the caller said it is (schema 7 on)
	To           string  `json:"to"`        // handover_requested, handover_cancelled, released: the handover's target
	ExitCode     *int    `json:"exit_code"` // child_exited (schema 17)
	Cause        string  `json:"cause"`     // child_exited: exit or signal
	Exits        int     `json:"exits"`     // child_exited: the how-manieth in its term
}

// The statements of one read. sqlScopes comes first: the first statement of a
// REPEATABLE READ transaction takes its snapshot, and pg_locks is read in the same
// statement, so the lock table and the rows describe (nearly) the same instant.
const (
	sqlBegin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

	// Every scope, its lock holders and waiters, its newest term and the counts
	// behind the flapping and epoch-regression checks, through the schema's
	// versioned read contract (migrations/functions/watch_scopes_v1.sql). First
	// in the transaction: it takes the snapshot, and pg_locks is read in the same
	// statement, so the lock table and the rows describe (nearly) the same
	// instant. $1: FlapWindow in seconds.
	sqlScopes = `SELECT * FROM pgleader.watch_scopes_v1($1)`

	// Database time, the lock table's nominal capacity, the advisory-lock
	// footprint of this database, the newest audit id (used by the first read),
	// the locks of the whole server in the shared lock table (which the
	// capacity bounds: fast-path locks take no entry), and the notification
	// queue's fill.
	sqlMeta = `
SELECT now(),
       CASE WHEN pg_catalog.pg_is_in_recovery() THEN 0
            ELSE ('x' || substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END,
       current_setting('max_locks_per_transaction')::int
         * (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int),
       count(*) FILTER (WHERE l.granted AND l.locktype = 'advisory' AND l.database = d.oid)::int,
       count(*) FILTER (WHERE NOT l.granted AND l.locktype = 'advisory' AND l.database = d.oid)::int,
       (SELECT coalesce(max(a.id), 0) FROM pgleader.audit a),
       count(*) FILTER (WHERE l.granted AND NOT l.fastpath)::int,
       pg_catalog.pg_notification_queue_usage()
  FROM pg_catalog.pg_locks l,
       (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()) d`

	// Sessions that hold or wait on a scope's lock without being its candidates.
	// Read right after the scopes: pg_locks is not transactional.
	// node_login: whether the session's role is a node login (under the
	// hardening, the only logins that can take an advisory lock).
	sqlInterference = `
SELECT i.scope, i.pid, i.mode, i.granted, coalesce(i.role, ''), coalesce(i.application_name, ''),
       coalesce(i.client_addr, ''), i.backend_start, i.wait_start,
       coalesce(pg_catalog.pg_has_role(i.role, (SELECT r.role_name FROM pgleader.roles r WHERE r.kind = 'node'), 'MEMBER'), false)
  FROM pgleader.interference() i`

	// Lock key overrides (pgleader scope key).
	sqlKeyOverrides = `SELECT k.scope, k.lock_key, k.set_by, k.set_at FROM pgleader.scope_keys k`

	// Schema 16: the scopes whose current term's fenced transactions held the row
	// a claim found busy, since when, and who holds it now.
	sqlFenceWaits = `
SELECT w.scope, w.node_id, w.since, b.pid, coalesce(b.login_role, ''), coalesce(b.prepared_gid, '')
  FROM pgleader.fence_waits w
  JOIN pgleader.leader_state s ON s.scope = w.scope AND s.epoch = w.epoch
  LEFT JOIN LATERAL pgleader.fenced_blockers(w.scope) b ON true`

	// Schema 16: holders of open terms whose login the scope's binding does not
	// admit (a binding made after they were elected).
	sqlUnboundLeaders = `
SELECT s.scope, coalesce(n.login_role, '')
  FROM pgleader.leader_state s JOIN pgleader.nodes n ON n.node_id = s.holder
 WHERE s.holder IS NOT NULL AND s.released_at IS NULL
   AND EXISTS (SELECT 1 FROM pgleader.scope_bindings)
   AND NOT pgleader.may_campaign(s.scope, n.login_role)`

	// The schema's version (0 when pgleader.schema_version is missing). The
	// collector reads schema readSchema on (sqlScopes, sqlNodes, sqlTerms): a
	// later schema keeps the _v1 contract for it, or adds a _v2 beside it.
	sqlSchemaVersion = `SELECT CASE WHEN pg_catalog.to_regprocedure('pgleader.schema_version()') IS NULL THEN 0
	                        ELSE pgleader.schema_version() END`

	// The nodes; the %s: login_role, supervisor, restarts and doorbell_why_not,
	// or NULL (0) where the view has no such column (sqlNodesColumns).
	sqlNodes = `
SELECT node_id, hostname, os_pid, version, started_at, last_seen, stopped_at, backend_pid,
       scopes, leads, heartbeat_interval_ms, trust_window_ms, session_lease_ms, priority, mode,
       failback_after_ms, session_alive, %s, %s, %s, %s
  FROM pgleader.watch_nodes_v1 ORDER BY node_id`

	// Whether watch_nodes_v1 has login_role, supervisor and doorbell_why_not: a
	// repeatable view, it gains columns when a build that has them migrates, so
	// the collector asks the catalog (per connection) rather than the version.
	sqlNodesColumns = `
SELECT coalesce(bool_or(a.attname = 'login_role'), false),
       coalesce(bool_or(a.attname = 'supervisor'), false),
       coalesce(bool_or(a.attname = 'doorbell_why_not'), false)
  FROM pg_catalog.pg_attribute a
 WHERE a.attrelid = pg_catalog.to_regclass('pgleader.watch_nodes_v1') AND a.attnum > 0 AND NOT a.attisdropped`

	// $1: how many. %s: last_sign, or NULL before schema 17.
	sqlTerms = `
SELECT id, scope, epoch, holder, hostname, holder_pid, acquired_at, released_at, release_reason,
       handover_gap_us, handed_to, %s
  FROM pgleader.watch_terms_v1 ORDER BY id DESC LIMIT $1`

	// The terms of each scope that ended within the last $1 seconds: of the
	// terms that began in that window, the newest $2, and the one before it,
	// which ended in the window if it ended after it began (a scope's terms
	// follow one another). Both through terms_scope_acquired_idx; retired
	// scopes are out of the views.
	sqlWindowTerms = `
SELECT t.id, t.scope, t.epoch, t.holder, t.hostname, t.holder_pid, t.acquired_at, t.released_at, t.release_reason,
       t.handover_gap_us, t.handed_to, %s
  FROM pgleader.leader_state s
 CROSS JOIN LATERAL (
       (SELECT w.* FROM pgleader.watch_terms_v1 w
         WHERE w.scope = s.scope AND w.acquired_at > now() - make_interval(secs => $1)
         ORDER BY w.acquired_at DESC LIMIT $2)
       UNION ALL
       (SELECT w.* FROM pgleader.watch_terms_v1 w
         WHERE w.scope = s.scope AND w.acquired_at <= now() - make_interval(secs => $1)
         ORDER BY w.acquired_at DESC LIMIT 1)) t
 WHERE s.retired_at IS NULL AND t.released_at > now() - make_interval(secs => $1)`

	// Later reads: every row after the last one seen, plus ids an earlier read
	// found missing (a transaction still in flight then). $1 last id, $2 missing
	// ids, $3 limit.
	sqlAudit = `
SELECT a.id, a.at, coalesce(a.scope, ''), coalesce(a.node_id, ''), coalesce(a.epoch, 0), a.kind, a.detail,
       ` + sqlPrevHolder + `, coalesce(a.session_role, '')
  FROM pgleader.audit a WHERE a.id > $1 OR a.id = ANY ($2) ORDER BY a.id LIMIT $3`

	// The first read: the ids among the maxGap below the newest that this
	// snapshot does not show (a transaction in flight holds them, or rolled back).
	sqlAuditInFlight = `
WITH m AS (SELECT coalesce(max(id), 0) AS id FROM pgleader.audit)
SELECT coalesce(array_agg(g.id ORDER BY g.id), '{}')
  FROM m, generate_series(greatest(m.id - $1, 1), m.id - 1) g(id)
 WHERE NOT EXISTS (SELECT 1 FROM pgleader.audit a WHERE a.id = g.id)`

	// The first read: the event kinds of the last FenceAlertFor, newest first.
	// $1 window in seconds, $2 kinds, $3 limit.
	sqlAuditFirst = `
SELECT a.id, a.at, coalesce(a.scope, ''), coalesce(a.node_id, ''), coalesce(a.epoch, 0), a.kind, a.detail,
       ` + sqlPrevHolder + `, coalesce(a.session_role, '')
  FROM pgleader.audit a WHERE a.at > now() - make_interval(secs => $1) AND a.kind = ANY ($2)
 ORDER BY a.id DESC LIMIT $3`

	// The holder of the epoch before an elected row's: the claim records
	// prev_holder only when it closed an open term (a clean release clears the
	// holder), so it is looked up in terms (the (scope, epoch) unique index).
	sqlPrevHolder = `CASE WHEN a.kind = 'elected' AND jsonb_typeof(a.detail->'prev_epoch') = 'number'
         THEN (SELECT t.holder FROM pgleader.terms t
                WHERE t.scope = a.scope AND t.epoch = (a.detail->>'prev_epoch')::bigint) END`
)

// maxWindowTerms bounds the terms a snapshot carries per scope beyond
// RecentTerms (Config.TermsWindow): a scope that changed leaders more often
// in the window shows its newest.
const maxWindowTerms = 100

// readSchema is the oldest schema version with the read contract this
// collector uses (pgleader.watch_scopes_v1, watch_nodes_v1, watch_terms_v1).
const readSchema = 13

// guardsSchema is the schema version from which the collector reads the caller
// proofs' state (fence_waits, fenced_blockers, may_campaign).
const guardsSchema = 16

// truthSchema is the schema version from which the views carry terms' last sign
// of life and nodes' restarts (watch_terms_v1.last_sign, watch_nodes_v1.restarts).
const truthSchema = 17

// readCursor says which audit rows a read takes (state.cursor).
type readCursor struct {
	skip    bool    // none
	first   bool    // the first read of the audit table: the FenceAlertFor window
	events  bool    // first: its rows are events (else only fence_rejected alerts)
	lastID  int64   // later reads: rows after this id
	missing []int64 // and these
}

// readShape is what a read must know of its connection: whether a pooler
// is between (the read then sets its settings in its own transaction), and
// whether watch_nodes_v1 has login_role.
type readShape struct {
	pooled     bool
	loginRole  bool
	supervisor bool
	doorbell   bool // watch_nodes_v1 has doorbell_why_not
	guards     bool // schema 16 on
	truth      bool // schema 17 on
}

// termsSQL is q (sqlTerms, sqlWindowTerms) for the shape's view.
func (s readShape) termsSQL(q string) string {
	if s.truth {
		return fmt.Sprintf(q, "last_sign, child_exits, child_exit_code, child_exit_cause")
	}
	return fmt.Sprintf(q, "NULL::timestamptz, 0, NULL::int, NULL::text")
}

// nodesSQL is sqlNodes for the shape's view.
func (s readShape) nodesSQL() string {
	role, sup := "NULL::text", "NULL::text"
	if s.loginRole {
		role = "login_role"
	}
	if s.supervisor {
		sup = "supervisor::text"
	}
	restarts := "0"
	if s.truth {
		restarts = "restarts"
	}
	bell := "NULL::text"
	if s.doorbell {
		bell = "doorbell_why_not"
	}
	return fmt.Sprintf(sqlNodes, role, sup, restarts, bell)
}

// read runs one read: a single round trip (a pipelined batch from BEGIN to
// COMMIT). On an error the connection may be unusable; the caller closes it.
func read(ctx context.Context, conn *pgx.Conn, cfg *Config, cur readCursor, shape readShape) (*dbRead, error) {
	pooled := shape.pooled
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(sqlBegin)
	if pooled {
		b.Queue(readSettings, fmt.Sprint(readStatementTimeout.Milliseconds()), fmt.Sprint(readTimeout.Milliseconds()))
	}
	b.Queue(sqlScopes, cfg.FlapWindow.Seconds())
	b.Queue(sqlInterference)
	b.Queue(sqlMeta)
	b.Queue(shape.nodesSQL())
	b.Queue(shape.termsSQL(sqlTerms), cfg.RecentTerms)
	b.Queue(shape.termsSQL(sqlWindowTerms), cfg.TermsWindow.Seconds(), maxWindowTerms)
	b.Queue(sqlKeyOverrides)
	if shape.guards {
		b.Queue(sqlFenceWaits)
		b.Queue(sqlUnboundLeaders)
	}
	switch {
	case cur.skip:
	case cur.first:
		b.Queue(sqlAuditFirst, cfg.FenceAlertFor.Seconds(), auditKinds, firstAuditBatch)
		if cur.events {
			b.Queue(sqlAuditInFlight, maxGap)
		}
	default:
		missing := cur.missing
		if missing == nil {
			missing = []int64{}
		}
		b.Queue(sqlAudit, cur.lastID, missing, auditBatch)
	}
	b.Queue("COMMIT")
	r := &dbRead{Cursor: cur}
	br := conn.SendBatch(ctx, b)
	err := scanRead(br, r, shape)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The batch stops at the first error and leaves the transaction aborted.
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			defer rcancel()
			if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
				_ = conn.Close(rctx)
			}
		}
		return nil, err
	}
	if cur.first {
		slices.Reverse(r.Audit) // read newest first, used oldest first
	}
	return r, nil
}

func scanRead(br pgx.BatchResults, r *dbRead, shape readShape) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if shape.pooled {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
	}
	rows, _ := br.Query()
	var err error
	r.Scopes, err = pgx.CollectRows(rows, scanScope)
	if err != nil {
		return fmt.Errorf("read scopes and locks: %w", err)
	}
	rows, _ = br.Query()
	r.Interference, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (interferenceRow, error) {
		var (
			i          interferenceRow
			pid        int32
			start, wst *time.Time
		)
		err := row.Scan(&i.Scope, &pid, &i.Mode, &i.Granted, &i.Role, &i.ApplicationName, &i.ClientAddr, &start, &wst, &i.NodeLogin)
		i.PID, i.BackendStart, i.WaitStart = int(pid), tm(start), tm(wst)
		return i, err
	})
	if err != nil {
		return fmt.Errorf("read interference: %w", err)
	}
	if err := br.QueryRow().Scan(&r.Now, &r.Timeline, &r.Capacity, &r.Advisory, &r.Waiting, &r.MaxAuditID, &r.Used, &r.NotifyQ); err != nil {
		return fmt.Errorf("read time and lock table: %w", err)
	}
	rows, _ = br.Query()
	if r.Nodes, err = pgx.CollectRows(rows, scanNode); err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	rows, _ = br.Query()
	if r.Terms, err = pgx.CollectRows(rows, scanTerm); err != nil {
		return fmt.Errorf("read terms: %w", err)
	}
	rows, _ = br.Query()
	if r.WindowTerms, err = pgx.CollectRows(rows, scanTerm); err != nil {
		return fmt.Errorf("read the terms of the window: %w", err)
	}
	if err := scanGuards(br, r, shape.guards); err != nil {
		return err
	}
	if !r.Cursor.skip {
		rows, _ = br.Query()
		if r.Audit, err = pgx.CollectRows(rows, scanAudit); err != nil {
			return fmt.Errorf("read audit: %w", err)
		}
	}
	if r.Cursor.first && r.Cursor.events {
		if err := br.QueryRow().Scan(&r.InFlight); err != nil {
			return fmt.Errorf("read audit ids in flight: %w", err)
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func ms(p *int32) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(*p) * time.Millisecond
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func tm(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

func num(p *int32) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

func scanScope(row pgx.CollectableRow) (scopeRow, error) {
	var (
		s                        scopeRow
		holder                   *string
		holderPID                *int32
		acq, rel, hb             *time.Time
		ival, tout, trust, lease *int32
		excl, other              []int32
		tID, tEpoch              *int64
		tHolder, tHost, tReason  *string
		tPID                     *int32
		tAcq, tRel               *time.Time
		tGap                     *int64
		handTo, tHandedTo        *string
		handBy, retired          *time.Time
	)
	if err := row.Scan(&s.Name, &s.Recorded, &s.LockKey, &s.Epoch, &holder, &holderPID, &acq, &rel, &hb,
		&ival, &tout, &trust, &lease, &handTo, &handBy, &retired, &s.Mode, &s.BoundTo, &excl, &other, &s.Waiters,
		&tID, &tEpoch, &tHolder, &tHost, &tPID, &tAcq, &tRel, &tReason, &tGap, &tHandedTo,
		&s.Changes, &s.MaxTermEpoch); err != nil {
		return s, err
	}
	s.HandoverTo, s.HandoverDeadline, s.RetiredAt = str(handTo), tm(handBy), tm(retired)
	s.Holder, s.HolderPID = str(holder), num(holderPID)
	s.AcquiredAt, s.ReleasedAt, s.LastHeartbeat = tm(acq), tm(rel), tm(hb)
	s.Timing = Timing{HeartbeatInterval: ms(ival), HeartbeatTimeout: ms(tout), TrustWindow: ms(trust), SessionLease: ms(lease)}
	s.LockPIDs, s.OtherPIDs = ints(excl), ints(other)
	if tID != nil {
		t := Term{ID: *tID, Scope: s.Name, Epoch: *tEpoch, Holder: str(tHolder), Hostname: str(tHost),
			HolderPID: num(tPID), AcquiredAt: tm(tAcq), ReleasedAt: tm(tRel), EndedBy: protocol.Reason(str(tReason)),
			HandedTo: str(tHandedTo)}
		if tGap != nil {
			t.HandoverGap = time.Duration(*tGap) * time.Microsecond
		}
		s.Latest = &t
	}
	return s, nil
}

func ints(xs []int32) []int {
	if len(xs) == 0 {
		return nil
	}
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

func scanNode(row pgx.CollectableRow) (Node, error) {
	var (
		n                  Node
		stopped            *time.Time
		backend            *int32
		ival, trust, lease *int32
		failback           *int32
		role               *string
		supervisor         *string
		bell               *string
	)
	if err := row.Scan(&n.ID, &n.Hostname, &n.OSPID, &n.Version, &n.StartedAt, &n.LastSeen, &stopped, &backend,
		&n.Scopes, &n.Leads, &ival, &trust, &lease, &n.Priority, &n.Mode, &failback, &n.SessionAlive, &role, &supervisor, &n.Restarts, &bell); err != nil {
		return n, err
	}
	n.LoginRole, n.DoorbellUnringable = str(role), str(bell)
	if supervisor != nil {
		var sv Supervised
		if json.Unmarshal([]byte(*supervisor), &sv) == nil && sv.Command != "" {
			n.Supervisor = &sv
		}
	}
	n.FailbackAfter = ms(failback)
	n.StoppedAt, n.BackendPID = tm(stopped), num(backend)
	n.Timing = Timing{HeartbeatInterval: ms(ival), TrustWindow: ms(trust), SessionLease: ms(lease)}
	if n.Scopes == nil {
		n.Scopes = []string{}
	}
	if n.Leads == nil {
		n.Leads = []string{}
	}
	return n, nil
}

func scanTerm(row pgx.CollectableRow) (Term, error) {
	var (
		t      Term
		host   *string
		reason *string
		pid    *int32
		rel    *time.Time
		gap    *int64
		to     *string
		sign   *time.Time
		exits  int32
		code   *int32
		cause  *string
	)
	if err := row.Scan(&t.ID, &t.Scope, &t.Epoch, &t.Holder, &host, &pid, &t.AcquiredAt, &rel, &reason, &gap, &to, &sign,
		&exits, &code, &cause); err != nil {
		return t, err
	}
	if exits > 0 && code != nil {
		t.Child = &TermChild{Exits: int(exits), ExitCode: int(*code), Cause: str(cause)}
	}
	t.LastSign = tm(sign)
	t.HandedTo = str(to)
	t.Hostname, t.HolderPID, t.ReleasedAt, t.EndedBy = str(host), num(pid), tm(rel), protocol.Reason(str(reason))
	if gap != nil {
		t.HandoverGap = time.Duration(*gap) * time.Microsecond
	}
	return t, nil
}

func scanAudit(row pgx.CollectableRow) (auditRow, error) {
	a, detail, err := scanAuditColumns(row)
	_ = json.Unmarshal(detail, &a.Detail) // a malformed detail must not stop the collector
	return a, err
}

// scanAuditColumns scans the columns every read of audit rows selects (id, at,
// scope, node, epoch, kind, detail, previous holder, login), the detail as the
// database wrote it.
func scanAuditColumns(row pgx.CollectableRow) (a auditRow, detail []byte, err error) {
	var prev *string
	if err := row.Scan(&a.ID, &a.At, &a.Scope, &a.Node, &a.Epoch, &a.Kind, &detail, &prev, &a.Login); err != nil {
		return a, nil, err
	}
	a.PrevHolder = str(prev)
	return a, detail, nil
}

// scanGuards reads the key overrides and, from schema 16 (guards), the fence
// waits with their blockers and the holders outside their scope's binding.
func scanGuards(br pgx.BatchResults, r *dbRead, guards bool) error {
	r.KeyOverrides = map[string]keyOverride{}
	rows, _ := br.Query()
	var (
		scope string
		k     keyOverride
	)
	if _, err := pgx.ForEachRow(rows, []any{&scope, &k.Key, &k.SetBy, &k.SetAt}, func() error {
		r.KeyOverrides[scope] = k
		return nil
	}); err != nil {
		return fmt.Errorf("read key overrides: %w", err)
	}
	if !guards {
		return nil
	}
	r.FenceWaits = map[string]*fenceWait{}
	var (
		node, login, gid string
		since            time.Time
		pid              *int32
	)
	rows, _ = br.Query()
	if _, err := pgx.ForEachRow(rows, []any{&scope, &node, &since, &pid, &login, &gid}, func() error {
		w := r.FenceWaits[scope]
		if w == nil {
			w = &fenceWait{Node: node, Since: since}
			r.FenceWaits[scope] = w
		}
		if pid != nil || gid != "" {
			w.Blockers = append(w.Blockers, fencedBlocker{PID: num(pid), Login: login, Prepared: gid})
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read fence waits: %w", err)
	}
	r.UnboundLeaders = map[string]string{}
	rows, _ = br.Query()
	if _, err := pgx.ForEachRow(rows, []any{&scope, &login}, func() error {
		r.UnboundLeaders[scope] = login
		return nil
	}); err != nil {
		return fmt.Errorf("read holders outside their binding: %w", err)
	}
	return nil
}
