package collector

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/pgleader/pgleader/protocol"
)

// Source says where the collector's picture comes from.
type Source string

// Sources, from best to worst.
const (
	// SourceLogical: decoded changes from a logical replication slot, plus the poll.
	SourceLogical Source = "logical"
	// SourceLive: LISTEN leader_change is connected; notifications trigger re-reads
	// between polls.
	SourceLive Source = "live"
	// SourcePolling: the LISTEN connection is down, the poll still works.
	SourcePolling Source = "polling"
	// SourceDisconnected: the database cannot be read; the snapshot is the last good
	// one (Health.LastError says why).
	SourceDisconnected Source = "disconnected"
)

// Severity of an alert.
type Severity string

// Severities.
const (
	SeverityCritical Severity = "critical" // page someone
	SeverityWarning  Severity = "warning"  // look during working hours
)

// AlertKind names a check. The names are the `alert` label of the exporter's
// metrics and the anchors of docs/runbooks.md.
type AlertKind string

// Checks.
const (
	// AlertNoLeader: a scope with candidates has had no leader for longer than
	// Config.NoLeaderAfter.
	AlertNoLeader AlertKind = "no_leader"
	// AlertSplitBrain: the lock holder's backend pid differs from
	// leader_state.holder_pid, two nodes report leading one scope, an open term
	// whose lock nobody holds (past a grace), or an epoch that went backwards.
	AlertSplitBrain AlertKind = "split_brain"
	// AlertStaleLeader: the lock is held but the holder's heartbeat is older than
	// its trust window plus Config.StaleMargin: a zombie holds the lock.
	AlertStaleLeader AlertKind = "stale_leader"
	// AlertStaleNode: a node not stopped cleanly has not been seen for
	// Config.StaleNodeAfter.
	AlertStaleNode AlertKind = "stale_node"
	// AlertNoFollower: a led scope has no live follower left, while another of
	// its candidates is late or down (not stopped): one more failure and the
	// scope has no leader.
	AlertNoFollower AlertKind = "no_follower"
	// AlertFlapping: more than Config.FlapMax leadership changes of a scope within
	// Config.FlapWindow.
	AlertFlapping AlertKind = "flapping"
	// AlertFenceRejected: the database refused a fenced write (audit kind
	// fence_rejected) within Config.FenceAlertFor: a zombie tried to act.
	AlertFenceRejected AlertKind = "fence_rejected"
	// AlertLockPressure: advisory locks use more than Config.LockPressure of the
	// database's lock table capacity.
	AlertLockPressure AlertKind = "lock_pressure"
	// AlertCollectorDown: the collector cannot read the database.
	AlertCollectorDown AlertKind = "collector_down"
	// AlertInterference: a session that is not a candidate of the scope holds or
	// waits on the scope's advisory lock (a squatter: another application, a
	// runaway script, an attacker). Raised on the first read that sees it.
	AlertInterference AlertKind = "interference"
	// AlertNotifyQueue: the server's notification queue is fuller than
	// Config.NotifyQueuePressure (pg_notification_queue_usage()): a listening
	// session stopped reading; when it is full every NOTIFY fails, pgleader's
	// claims and releases included.
	AlertNotifyQueue AlertKind = "notify_queue"
	// AlertUnboundLeader: the holder of a scope's open term registered under a
	// login that the scope's binding (pgleader scope bind, made after it was
	// elected) no longer admits.
	AlertUnboundLeader AlertKind = "unbound_leader"
	// AlertSlowFailover: the open term began more than Config.SlowFailover after
	// its predecessor's last sign of life, within Config.SlowFailoverFor of its
	// start; not raised when the predecessor's term ended with the database
	// (database_failover: the outage is collector_down's, not a slow election).
	AlertSlowFailover AlertKind = "slow_failover"
)

// ForeignSession is a session that holds or waits on a scope's advisory lock
// without being one of its candidates (pgleader.interference, schema version 7).
// Role, ApplicationName and ClientAddr come from pg_stat_activity; NodeLogin says
// whether Role is a member of the node role (under the hardening, the only roles
// that can take an advisory lock at all); ClientAddr is empty for a Unix-socket
// session, and when the schema's owner role may not read
// other roles' statistics (pg_read_all_stats).
type ForeignSession struct {
	PID             int       `json:"pid"`
	Mode            string    `json:"mode"`    // ExclusiveLock or ShareLock
	Granted         bool      `json:"granted"` // holds it (else waits for it)
	Role            string    `json:"role"`
	ApplicationName string    `json:"application_name"`
	ClientAddr      string    `json:"client_addr,omitempty"`
	BackendStart    time.Time `json:"backend_start,omitzero"`
	WaitStart       time.Time `json:"wait_start,omitzero"` // when it began to wait (waiters)
	NodeLogin       bool      `json:"node_login,omitempty"`
}

// String describes the session in one line: pid, role, application, client, and
// whether it holds or waits for the lock, in which mode.
func (f ForeignSession) String() string {
	what := "holds"
	if !f.Granted {
		what = "waits for"
	}
	client := f.ClientAddr
	if client == "" {
		client = "local or hidden"
	}
	return fmt.Sprintf("pid %d (role %s, application %q, client %s) %s the lock in %s mode",
		f.PID, cmp.Or(f.Role, "?"), f.ApplicationName, client, what, strings.TrimSuffix(f.Mode, "Lock"))
}

// Alert is one active check result.
type Alert struct {
	Kind     AlertKind `json:"alert"`
	Severity Severity  `json:"severity"`
	Scope    string    `json:"scope,omitempty"`
	Node     string    `json:"node,omitempty"`
	Summary  string    `json:"summary"` // one line: what is wrong, with the figures
	Hint     string    `json:"hint"`    // one line: what to do first (runbook hint)
	Runbook  string    `json:"runbook"` // docs/runbooks.md anchor, e.g. "docs/runbooks.md#no_leader"
	Since    time.Time `json:"since"`   // when the condition was first seen (collector time)
	// Database names the fleet member the alert is about (Fleet; "" with one
	// database).
	Database string `json:"database,omitempty"`
}

// Runbook is the check's section of docs/runbooks.md ("docs/runbooks.md#no_leader"),
// what Alert.Runbook holds.
func (k AlertKind) Runbook() string { return "docs/runbooks.md#" + string(k) }

// Key identifies an alert across snapshots (kind, scope, node).
func (a Alert) Key() string { return string(a.Kind) + "\x00" + a.Scope + "\x00" + a.Node }

// Timing is the election timing a holder or node runs with (from its rows).
type Timing struct {
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	HeartbeatTimeout  time.Duration `json:"heartbeat_timeout,omitempty"`
	TrustWindow       time.Duration `json:"trust_window"`
	SessionLease      time.Duration `json:"session_lease"`
}

// Scope is the state of one scope (a row of pgleader.leader_state joined with the
// lock table and the nodes).
type Scope struct {
	Name    string `json:"scope"`
	LockKey int64  `json:"lock_key"`
	Epoch   int64  `json:"epoch"`
	// Mode is how the scope is held (schema 9): "lock" (a session advisory lock,
	// LockPIDs) or "lease" (a lease row renewed by heartbeats, for nodes behind a
	// transaction pooler).
	Mode string `json:"mode"`
	// BoundTo lists the roles whose logins alone may campaign for the scope
	// (pgleader scope bind, schema 12); empty: every node role may.
	BoundTo []string `json:"bound_to,omitempty"`
	// Leader is the holder on record while its term is open ("" when released or
	// never held). LeaderHost is its hostname from pgleader.nodes.
	Leader     string `json:"leader"`
	LeaderHost string `json:"leader_host,omitempty"`
	// LeaderLive: Leader still holds the scope (HasLeader). False with a Leader
	// named: the term is open on record, but its holder's session or lease is
	// gone; the scope has no leader, and Leader is who led last.
	LeaderLive bool `json:"leader_live"`
	// HolderPID is leader_state.holder_pid (the leadership session's backend);
	// LockPIDs are the backends pg_locks shows holding the scope's advisory lock
	// (normally exactly [HolderPID]).
	HolderPID int   `json:"holder_pid,omitempty"`
	LockPIDs  []int `json:"lock_pids,omitempty"`
	// Waiters is the number of sessions waiting for the lock (followers).
	Waiters int `json:"waiters"`
	// AcquiredAt is the open term's start; Tenure = DB now − AcquiredAt.
	AcquiredAt time.Time     `json:"acquired_at,omitzero"`
	Tenure     time.Duration `json:"tenure"`
	// LastHeartbeat and HeartbeatAge are in database time (no clock skew).
	LastHeartbeat time.Time     `json:"last_heartbeat,omitzero"`
	HeartbeatAge  time.Duration `json:"heartbeat_age"`
	ReleasedAt    time.Time     `json:"released_at,omitzero"`
	Timing        Timing        `json:"timing"`
	// Followers are the live candidate nodes of the scope other than the leader.
	Followers []string `json:"followers"`
	// OpenTerm is the term row without a release (nil when none).
	OpenTerm *Term `json:"open_term,omitempty"`
	// LeaderlessFor is how long the scope has had no leader (0 while led), as
	// observed by the collector.
	LeaderlessFor time.Duration `json:"leaderless_for"`
	// Interference lists the sessions that hold or wait on the scope's lock
	// without being its candidates (AlertInterference).
	Interference []ForeignSession `json:"interference,omitempty"`
	// HandoverTo is the node a requested handover reserves the scope for, until
	// HandoverDeadline (pgleader handover; "" when none is pending).
	HandoverTo       string    `json:"handover_to,omitempty"`
	HandoverDeadline time.Time `json:"handover_deadline,omitzero"`
	// Changes is the number of leadership changes within Config.FlapWindow.
	Changes int     `json:"changes_in_window"`
	Verdict Verdict `json:"verdict"`
	Alerts  []Alert `json:"alerts,omitempty"`
	// Database names the fleet member the scope is in (Fleet; "" with one
	// database). Scope names repeat across databases: (Database, Name) is the
	// key.
	Database string `json:"database,omitempty"`
}

// HasLeader reports whether a term is open and its holder holds it: in lock
// mode, the holder's backend holds the scope's lock; in lease mode, the holder
// renewed its lease within the lease (database time).
func (s Scope) HasLeader() bool {
	if s.Mode == "lease" {
		return s.Leader != "" && s.HeartbeatAge <= s.Timing.SessionLease
	}
	return s.Leader != "" && len(s.LockPIDs) > 0
}

// leadsNow reports whether the scope's holder leads now: it holds the scope
// (HasLeader) and its last heartbeat is within its trust window (its gate may be
// open). A frozen holder keeps its lock until its session lease ends, but its
// gate closed at its trust window: it leads no more.
func (s Scope) leadsNow() bool {
	w := s.Timing.TrustWindow
	return s.HasLeader() && (w <= 0 || s.HeartbeatAge <= w)
}

// Role of a node in a scope.
type Role string

// Roles.
const (
	RoleLeader   Role = "leader"
	RoleFollower Role = "follower"
	RoleNone     Role = ""
)

// NodeState is a node's life as the database shows it. The thresholds are the
// node's own registered timing: its trust window W and session lease L.
type NodeState string

// Node states.
const (
	// NodeLive: seen within its trust window W: its heartbeats land.
	NodeLive NodeState = "live"
	// NodeLate: silent for longer than W but not L: its gates have closed by its
	// own rule (it cannot lead now), and it may yet come back (a slow database, a
	// pause).
	NodeLate NodeState = "late"
	// NodeDown: its leadership session is gone (lock mode: the server released
	// its beacon lock, which it does the moment the session ends: a crash, a
	// terminated backend), or it was silent for longer than L, by when the server
	// has ended its session (frozen, cut off).
	NodeDown NodeState = "down"
	// NodeStopped: it stopped cleanly (stopped_at).
	NodeStopped NodeState = "stopped"
)

// Rank orders the states worst first: down, late, live, stopped (the views
// sort nodes by it).
func (s NodeState) Rank() int {
	switch s {
	case NodeDown:
		return 0
	case NodeLate:
		return 1
	case NodeLive:
		return 2
	case NodeStopped:
		return 3
	}
	return -1
}

// JudgeState is the node's state at LastSeenAge (database time − last_seen),
// judged by its own registered timing, its StoppedAt and SessionAlive (see
// NodeState): what State holds. A node registered without timing (rows before
// schema 5) is judged by staleAfter for both bounds.
func (n Node) JudgeState(staleAfter time.Duration) NodeState {
	if !n.StoppedAt.IsZero() {
		return NodeStopped
	}
	w, l := n.Timing.TrustWindow, n.Timing.SessionLease
	if w <= 0 {
		w = staleAfter
	}
	if l < w {
		l = max(w, staleAfter)
	}
	switch {
	case n.SessionAlive != nil && !*n.SessionAlive, n.LastSeenAge > l:
		return NodeDown
	case n.LastSeenAge > w:
		return NodeLate
	}
	return NodeLive
}

// Node is a row of pgleader.nodes.
type Node struct {
	ID          string        `json:"node"`
	Hostname    string        `json:"hostname"`
	OSPID       int           `json:"os_pid"`
	Version     string        `json:"version"`
	StartedAt   time.Time     `json:"started_at"`
	LastSeen    time.Time     `json:"last_seen"`
	LastSeenAge time.Duration `json:"last_seen_age"` // database time
	StoppedAt   time.Time     `json:"stopped_at,omitzero"`
	BackendPID  int           `json:"backend_pid,omitempty"`
	Scopes      []string      `json:"scopes"` // candidate for
	// Leads are the scopes it leads now: an open term with its lock held.
	Leads []string `json:"leads"`
	// Reported are the scopes it claimed to lead at its last heartbeat
	// (pgleader.nodes.leads); they lag Leads when it froze or lost its session.
	Reported []string `json:"reported_leads"`
	Timing   Timing   `json:"timing"`
	// State is the node's life as the database shows it, judged by the node's
	// own registered timing (NodeState).
	State NodeState `json:"state"`
	// Live: State is NodeLive: it heartbeats on time, and counts as a follower.
	Live bool `json:"live"`
	// SessionAlive: a lock-mode node's leadership session still holds its beacon
	// lock (nil for a lease-mode or stopped node: nothing to ask).
	SessionAlive *bool `json:"session_alive,omitempty"`
	// Mode is the node's mode: "lock" or "lease" (schema 9).
	Mode string `json:"mode"`
	// Priority ranks the node among its scopes' candidates (schema 8; 1 before):
	// a free scope goes to the live candidate of highest priority; 0 never leads.
	Priority int `json:"priority"`
	// FailbackAfter is set on a preferred node (schema 10; pgleader node
	// --preferred): it takes its scopes back from a live leader of lower priority
	// once it has been up this long. 0: no failback.
	FailbackAfter time.Duration `json:"failback_after,omitzero"`
	// DoorbellUnringable says why the node's doorbell cannot ring (schema 17:
	// watch_nodes_v1.doorbell_why_not — a superuser login, a grant the owner
	// role lacks): its wake-ups (a release, a handover, a resign request) then
	// reach it at its heartbeats, within one interval. "" when it rings, or for
	// a node with no doorbell (lease mode, or not registered yet).
	DoorbellUnringable string `json:"doorbell_unringable,omitempty"`
	// LoginRole is the role the node registered under (its session_user;
	// watch_nodes_v1.login_role): "" when unknown (a row written by hand, or a
	// schema whose view lacks the column). Not in JSON: status -o json keeps
	// its shape.
	LoginRole string `json:"-"`
	// Supervisor: what the node supervises when it is `pgleader run` (nil for a
	// plain node, or before schema 15). Its state is "unknown" while the node is
	// not live: a down node's last report says nothing of its child now.
	Supervisor *Supervised `json:"supervisor,omitempty"`
	// Restarts counts the registrations of this node id by another process
	// (schema 17): a crash loop under a fixed id. StartedAt is the last
	// process's start.
	Restarts int `json:"restarts"`
	// Database names the fleet member the node registered in (Fleet; "" with
	// one database). Node ids repeat across databases: (Database, ID) is the key.
	Database string `json:"database,omitempty"`
}

// TermRun is a run of a scheduled command recorded in a term (pgleader.runs).
type TermRun struct {
	Key      string `json:"key"`                 // the period ("2026-11-27T00:00:00Z/24:00:00") or the caller's key
	ExitCode *int   `json:"exit_code,omitempty"` // nil: the run never ended (its host died, or the term ended first)
}

// TermChild is how a supervised command ended on its own during a term
// (pgleader.terms.child_exit_code, child_exit_cause, child_exits).
type TermChild struct {
	Exits    int    `json:"exits"`     // how many times it ended on its own in the term (a restart policy restarts it)
	ExitCode int    `json:"exit_code"` // the last exit's status, 128+signal for a signal
	Cause    string `json:"cause"`     // exit or signal
}

// Crashed reports whether the child's last exit was a failure: a non-zero
// status or a signal.
func (c TermChild) Crashed() bool { return c.ExitCode != 0 || c.Cause == "signal" }

// String is "exit 0", "exit 3" or "signal 9 (SIGKILL)".
func (c TermChild) String() string {
	if c.Cause == "signal" && c.ExitCode > 128 {
		n := c.ExitCode - 128
		if name, ok := posixSignals[n]; ok {
			return fmt.Sprintf("signal %d (%s)", n, name)
		}
		return fmt.Sprintf("signal %d", n)
	}
	return fmt.Sprintf("exit %d", c.ExitCode)
}

// posixSignals names the signals whose numbers POSIX fixes: the number comes
// from the node's host, which need not be the watcher's kind of system.
var posixSignals = map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP",
	6: "SIGABRT", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

// Supervised is what a `pgleader run` node supervises, as it last recorded it
// (pgleader.nodes.supervisor).
type Supervised struct {
	Command  string `json:"command"`         // the command's base name
	State    string `json:"state"`           // waiting, running, draining, stopping, backoff
	PID      int    `json:"pid,omitempty"`   // the child's pid (and process group) while one runs
	Epoch    int64  `json:"epoch,omitempty"` // the term it runs under
	Restarts int    `json:"restarts"`
	LastExit *int   `json:"last_exit,omitempty"`
	// LastExitCause is how the last child ended: exit or signal (on its own),
	// killed, drained, deadline or guard_gone (stopped when its term ended).
	LastExitCause string `json:"last_exit_cause,omitempty"`
	LastExitEpoch int64  `json:"last_exit_epoch,omitempty"` // the term the last child ran in
}

// Eligible reports whether the node may be handed a scope it campaigns for: it is
// live and its priority is above 0.
func (n Node) Eligible() bool { return n.Live && n.Priority > 0 }

// Role returns the node's role in scope.
func (n Node) Role(scope string) Role {
	for _, s := range n.Leads {
		if s == scope {
			return RoleLeader
		}
	}
	for _, s := range n.Scopes {
		if s == scope {
			return RoleFollower
		}
	}
	return RoleNone
}

// Reason is why a term ended: protocol.Reason (with its constants and its Known,
// Recorded and Clean methods), named here so that the views, which read collector
// types only, share it.
type Reason = protocol.Reason

// Term is a row of pgleader.terms.
type Term struct {
	ID         int64     `json:"id"`
	Scope      string    `json:"scope"`
	Epoch      int64     `json:"epoch"`
	Holder     string    `json:"holder"`
	Hostname   string    `json:"hostname,omitempty"`
	HolderPID  int       `json:"holder_pid,omitempty"`
	AcquiredAt time.Time `json:"acquired_at"`
	ReleasedAt time.Time `json:"released_at,omitzero"` // zero while open
	// EndedBy is release_reason, in the protocol's vocabulary (protocol.Reason):
	// resigned, shutdown, handed_over, lost_connection, heartbeat_timeout, evicted,
	// crashed or database_failover ("" while open).
	EndedBy Reason `json:"ended_by,omitempty"`
	// HandedTo is the node a handover gave the scope to, when the term ended as
	// handed_over.
	HandedTo string `json:"handed_to,omitempty"`
	// Run is the run `pgleader run --once-per` or `--once-key` recorded in this
	// term (pgleader.runs; pgleader history reads it), nil for none.
	Run *TermRun `json:"run,omitempty"`
	// Child is the command `pgleader run` supervised in this term when it ended
	// on its own while the term was led (nil: it did not, or no command was
	// supervised). A term that then ended as shutdown ended because its child
	// exited: Child says whether it crashed.
	Child *TermChild `json:"child,omitempty"`
	// HandoverGap is this term's start minus the predecessor's last sign of
	// leadership: its release, or, for a term that ended otherwise, its last
	// heartbeat. An upper bound of the time without a leader: for a crash it
	// exceeds the real gap by at most one heartbeat interval (the time between
	// the last heartbeat and the death).
	HandoverGap time.Duration `json:"handover_gap"`
	// LastSign is when the holder was last seen leading: its release for a term
	// it ended itself, its last heartbeat for a term its successor closed (a
	// crash, a frozen holder, a database outage) and, while the term is open, its
	// last heartbeat. Zero when unknown (a schema before 17 records it for closed
	// terms only from then on).
	LastSign time.Time `json:"last_sign,omitzero"`
	// Silent: the term is open in the database, but its holder leads no more:
	// it has not been seen leading (lock held, heartbeat within its trust window)
	// since LastSign. A crashed, frozen or cut-off holder, until a successor
	// closes the term.
	Silent bool `json:"silent,omitempty"`
	// HeldFor is how long the holder led: LastSign − AcquiredAt for a closed or
	// silent term (time after the holder's last sign of life is not held: it is
	// the gap before the next term), DB now − AcquiredAt for a term led now;
	// ReleasedAt − AcquiredAt where LastSign is unknown.
	HeldFor time.Duration `json:"held_for"`
	// Database names the fleet member the term is in (Fleet; "" with one
	// database).
	Database string `json:"database,omitempty"`
}

// Open reports whether the term has not ended.
func (t Term) Open() bool { return t.ReleasedAt.IsZero() }

// LockStats is the lock footprint against the lock table capacity.
type LockStats struct {
	Advisory int `json:"advisory"` // granted advisory locks in the database
	Waiting  int `json:"waiting"`  // advisory lock requests not granted
	// Used is the granted locks of the whole server that take an entry of the
	// shared lock table (every database's, advisory or not; fast-path locks
	// excluded): what Capacity bounds.
	Used int `json:"used"`
	// NotifyQueue is pg_notification_queue_usage(): the fraction of the
	// server's notification queue in use.
	NotifyQueue float64 `json:"notify_queue"`
	// Capacity is max_locks_per_transaction × (max_connections +
	// max_prepared_transactions): the shared lock table's nominal size.
	Capacity int `json:"capacity"`
}

// Health is the collector's view of itself.
type Health struct {
	Source        Source        `json:"source"`
	Database      string        `json:"database"` // current_database() @ host:port
	ServerVersion string        `json:"server_version,omitempty"`
	LastPoll      time.Time     `json:"last_poll,omitzero"` // last successful read (collector time)
	PollDuration  time.Duration `json:"poll_duration"`      // of the last successful read
	LastError     string        `json:"last_error,omitempty"`
	LastErrorAt   time.Time     `json:"last_error_at,omitzero"`
	// Pooler: a connection pooler is between the collector and PostgreSQL; the
	// collector polls (notifications and logical replication do not cross one).
	Pooler        bool   `json:"pooler,omitempty"`
	Polls         uint64 `json:"polls"`
	PollErrors    uint64 `json:"poll_errors"`
	Notifications uint64 `json:"notifications"`
	// NotificationsCoalesced counts the notifications that arrived while an
	// earlier one still waited for its read: they cost no read of their own. A
	// storm of forged notifications shows here (see the package doc: reads caused
	// by notifications are budgeted).
	NotificationsCoalesced uint64 `json:"notifications_coalesced"`
	Reconnects             uint64 `json:"reconnects"`
	// DroppedEvents counts events a slow subscriber missed (all subscribers).
	DroppedEvents uint64 `json:"dropped_events"`

	// The logical replication source (Config.Source); zero values otherwise.

	// Slot is the replication slot: the permanent one of Config.Slot (also
	// while its stream is down), or the temporary one of the open stream.
	Slot string `json:"slot,omitempty"`
	// SlotLagBytes is how far a permanent slot's confirmed position trails the
	// server's WAL (pg_current_wal_lsn() - confirmed_flush_lsn): the WAL the
	// server keeps for it. -1 when unknown or not a permanent slot.
	SlotLagBytes int64 `json:"slot_lag_bytes"`
	// LastChange is when the stream last received a transaction (collector
	// time; heartbeats count), zero before the first.
	LastChange time.Time `json:"last_change,omitzero"`
	// Transactions counts the transactions the stream received; DecodeErrors the
	// replication messages it could not decode (each is logged, and the audit
	// table is read to make up for the transaction it dropped).
	Transactions uint64 `json:"transactions"`
	DecodeErrors uint64 `json:"decode_errors"`
}

// Snapshot is an immutable picture of the cluster. Never modify one: the collector
// shares it between subscribers.
type Snapshot struct {
	Seq    uint64    `json:"seq"`     // increases by one per snapshot
	At     time.Time `json:"at"`      // collector wall time of the read
	DBTime time.Time `json:"db_time"` // the database's now() of the read
	Scopes []Scope   `json:"scopes"`  // sorted by name
	Nodes  []Node    `json:"nodes"`   // sorted by id
	// Terms are the most recent terms over all scopes (Config.RecentTerms of
	// them) and every term that ended within Config.TermsWindow, newest first.
	Terms  []Term    `json:"terms"`
	Alerts []Alert   `json:"alerts"` // sorted: critical first, then kind, scope, node
	Locks  LockStats `json:"locks"`  // a fleet's: its fullest member's (databases may share a server)
	// FenceRejected counts audit rows of kind fence_rejected per scope since the
	// collector started (a counter for the exporter).
	FenceRejected map[string]uint64 `json:"fence_rejected"`
	// Timeline is the WAL timeline the server writes on (0: unknown, or the
	// collector reads a standby); it changes when the database fails over.
	// EpochFloor is that timeline's epoch floor (EpochFloor).
	Timeline   int64 `json:"timeline"`
	EpochFloor int64 `json:"epoch_floor"`
	// Retired counts the scopes taken out of the views (pgleader scope retire);
	// they are not in Scopes.
	Retired int    `json:"retired"`
	Health  Health `json:"health"`
	// Databases is the state of each member of a Fleet, in the fleet's order
	// (nil for one database): a merged snapshot's scopes, nodes, terms,
	// alerts and events carry their member's name in their Database field.
	Databases []DatabaseState `json:"databases,omitempty"`
	// Replay is set on a snapshot rebuilt from history (package replay):
	// the instant it shows and what it cannot know. nil for a live read.
	Replay *ReplayInfo `json:"replay,omitempty"`
}

// Scope returns the named scope.
func (s *Snapshot) Scope(name string) (Scope, bool) {
	for _, sc := range s.Scopes {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scope{}, false
}

// Node returns the node with id.
func (s *Snapshot) Node(id string) (Node, bool) {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// EventKind names a collector event.
type EventKind string

// Events.
const (
	EventElected       EventKind = "elected"        // a new term began (Epoch, Node = holder, PrevHolder)
	EventReleased      EventKind = "released"       // a term ended cleanly (Reason)
	EventTermClosed    EventKind = "term_closed"    // a successor closed an unreleased term (Reason)
	EventFenceRejected EventKind = "fence_rejected" // the database refused a fenced write by Node at Epoch
	EventAlertFiring   EventKind = "alert_firing"   // Alert began
	EventAlertResolved EventKind = "alert_resolved" // Alert ended
	EventNodeJoined    EventKind = "node_joined"    // a node registered or came back
	EventNodeLeft      EventKind = "node_left"      // a node stopped or went stale (Reason)
	EventSourceChanged EventKind = "source_changed" // Health.Source changed (Detail: "live → polling")
	EventFailover      EventKind = "failover"       // the server's WAL timeline changed: a promoted standby (Epoch: the new epoch floor)
	EventHeartbeatLate EventKind = "heartbeat_late" // a leader's heartbeat is older than its interval × 2
	EventEvicted       EventKind = "evicted"        // a holder's leadership backend was terminated through Evict (Reason; audit kind evicted)
	EventEvictFailed   EventKind = "evict_failed"   // an automatic eviction (Config.EvictStale) failed (Node, Epoch; Reason: the error)
	// EventResignRequested: someone asked the holder (Node) of Epoch to resign
	// through the database (pgleader.request_resign, e.g. operator's Resign;
	// audit kind resign_requested; Detail: who asked). The handover follows as
	// released (reason resigned) and elected.
	EventResignRequested EventKind = "resign_requested"
	// EventHandoverRequested: someone asked the holder (Node; "" when the scope
	// had no leader) of Epoch to hand the scope to a chosen node
	// (pgleader.request_handover, operator's Handover; Detail: to whom, who asked).
	// The handover follows as released (reason handed_over) and elected.
	EventHandoverRequested EventKind = "handover_requested"
	// EventHandoverCancelled: a handover that did not complete in time was
	// withdrawn (Detail: to whom, who withdrew it).
	EventHandoverCancelled EventKind = "handover_cancelled"
	// EventScopeRetired: the scope was taken out of the views (pgleader scope
	// retire; Detail: who); EventScopeRevived: a node campaigns for it again (Node).
	EventScopeRetired EventKind = "scope_retired"
	EventScopeRevived EventKind = "scope_revived"
	// EventChildExited: the command `pgleader run` supervises under Node's term
	// Epoch ended on its own (pgleader.term_child_exit; Detail: "exit 3",
	// "signal 9 (SIGKILL)"; Reason "crashed" when it failed). The term's end
	// (shutdown) or the command's restart follows.
	EventChildExited EventKind = "child_exited"
	// EventAuditReset: pgleader.audit lost rows the collector had read (a
	// TRUNCATE, with or without RESTART IDENTITY, or a restore): the audit
	// history in the database was rewritten. The collector follows the new rows
	// from here (Detail: the newest id before and after).
	EventAuditReset EventKind = "audit_reset"
	// EventDropped: this subscriber missed events before this one (Detail: how
	// many); it stopped reading while maxBacklog events queued up for it. It is
	// the subscriber's own, not the collector's: it has no Seq.
	EventDropped EventKind = "events_dropped"
)

// Event is one entry of the collector's ordered event stream.
type Event struct {
	Seq        uint64    `json:"seq"` // increases by one per event
	At         time.Time `json:"at"`  // when it happened (DB time for rows, else collector time)
	Kind       EventKind `json:"kind"`
	Scope      string    `json:"scope,omitempty"`
	Node       string    `json:"node,omitempty"`
	Epoch      int64     `json:"epoch,omitempty"`
	PrevHolder string    `json:"prev_holder,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Alert      *Alert    `json:"alert_info,omitempty"`
	// AuditID is the pgleader.audit row the event was read from (0 otherwise);
	// LSN its commit LSN on the logical source (0 otherwise).
	AuditID int64  `json:"audit_id,omitempty"`
	LSN     uint64 `json:"lsn,omitempty"`
	// Database names the fleet member the event comes from (Fleet; "" with
	// one database).
	Database string `json:"database,omitempty"`
}
