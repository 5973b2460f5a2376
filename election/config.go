package election

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/pgleader/pgleader/internal/names"

	"github.com/jackc/pgx/v5"
)

// Mode is how a node holds leadership (Config.Mode).
type Mode string

// Modes.
const (
	// ModeLock, the default: a session advisory lock per led scope on a dedicated
	// connection, the fastest failover (milliseconds after a crash). Needs a
	// direct connection to PostgreSQL, or a session pooler; refused behind a
	// transaction pooler (ErrPooler).
	ModeLock Mode = "lock"
	// ModeLease: a lease row per scope, renewed by every heartbeat, for
	// deployments that reach PostgreSQL only through a transaction pooler
	// (PgBouncer, Supavisor, RDS Proxy, pgcat): no session state, one connection,
	// every statement its own transaction. A crashed or frozen leader is replaced
	// once its lease (SessionLease) has run out, as seen by a follower, plus up to
	// one heartbeat interval. Every candidate of a scope must use the same mode.
	ModeLease Mode = "lease"
	// ModeStandalone makes every scope permanently led by this node without any
	// database (epoch 0, Fence a no-op). For local development only; logged
	// loudly.
	ModeStandalone Mode = "standalone"
)

// Config configures an Elector. Start from DefaultConfig or leave durations zero to
// get the defaults; New calls Validate.
type Config struct {
	// DSN of the PostgreSQL database (URL or keyword/value form). TLS settings
	// (sslmode=verify-full, sslrootcert=…) are honoured. Empty: the standard PG*
	// environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, …) as libpq reads them.
	// Its role needs the pgleader_node role (GRANT pgleader_node TO service_role),
	// nothing more: Check fails with ErrPermission otherwise (docs/security.md).
	// The engine's own sessions run with search_path = pg_catalog.
	DSN string

	// Mode is how leadership is held: ModeLock (default) or ModeLease. See
	// docs/poolers.md for which to choose behind a connection pooler.
	Mode Mode

	// ConnConfig is the alternative to DSN for services that build their pgx
	// configuration in code (a custom DialFunc or LookupFunc, TLS from a secret
	// store, IAM authentication in BeforeConnect or ValidateConnect, AfterConnect):
	// the engine copies it and keeps those hooks, adding only its session settings
	// (RuntimeParams) and TCP keepalives on the connections the DialFunc returns.
	// Set DSN or ConnConfig, not both. A pgxpool.Config's ConnConfig works as is.
	ConnConfig *pgx.ConnConfig

	// NodeID names this process in pgleader.nodes, terms and audit. It must be
	// unique among live candidates. Default:
	// <hostname>-<pid>-<6 random hex digits>. The rules of scope names apply (see
	// Scopes).
	NodeID string

	// Priority ranks this node among the candidates of its scopes: when a scope is
	// free, the live waiting candidate of highest priority wins it (others defer
	// to it for at most its trust window, and never less than three of its
	// heartbeat intervals), so leadership goes where it is preferred, not to
	// whoever claims first. 0 means the default, 1.
	Priority int

	// NeverLead makes an observer that never leads (it registers with priority
	// 0): it heartbeats, shows in pgleader status, and watches its ring peer,
	// but never claims.
	NeverLead bool

	// Hostname is recorded with every term. Default: os.Hostname().
	Hostname string

	// Version is recorded in pgleader.nodes (the embedding service's version).
	Version string

	// Scopes this node campaigns for. Each scope is an independent election with
	// its own epoch. Names are non-empty, at most 200 bytes, valid UTF-8,
	// without control characters (NUL, TAB, CR, LF, ESC, DEL, the C1 controls) or
	// the Unicode controls that reorder a line (U+202A–U+202E, U+2066–U+2069,
	// U+200E, U+200F, …): names are printed on operators' terminals, where such a
	// character would act instead of showing; nor invisible format characters
	// (Unicode category Cf), with which two names that print alike would be two
	// scopes. A node id holds no quote or backslash either. Validate says which
	// rule a name breaks.
	Scopes []string

	// LockKeys overrides the advisory-lock key of a scope (default: the first 8
	// bytes of sha256(scope), what pgleader.lock_key(scope) computes in SQL). The
	// database refuses a claim under any key but the derived one or the override
	// the schema owner or an operator recorded for the scope (`pgleader scope key`,
	// pgleader.set_lock_key): a node does not choose a scope's key.
	LockKeys map[string]int64

	// HeartbeatInterval (I) is how often the leader confirms its terms (one round
	// trip for all scopes). Default 500ms.
	HeartbeatInterval time.Duration

	// HeartbeatTimeout (T) bounds one heartbeat; a slower one closes the gate and
	// abandons the session. Default 500ms.
	HeartbeatTimeout time.Duration

	// TrustWindow (W): after a heartbeat that started at s succeeded, the gate stays
	// open until s + W. Must exceed I + T. Default 1.5s.
	TrustWindow time.Duration

	// SessionLease (L): idle_session_timeout of the leadership and guard sessions,
	// the time after which the server frees the locks of a frozen or partitioned
	// node. Must exceed W by at least 100ms; L − W is the safety gap. Bounds
	// frozen-leader failover. Default 2s.
	SessionLease time.Duration

	// DrainTimeout: on Resign or shutdown, how long in-flight Do calls may run on
	// before their contexts are cancelled and the lock is released. Default 5s.
	DrainTimeout time.Duration

	// HoldGuardOnLoss: when the leadership session is lost while this process
	// lives (terminated, cut off, a failed heartbeat), keep the guard session, and
	// so keep every successor's gate closed, until the Lead and Do calls of the
	// lost terms have returned, for at most this long. Their contexts are
	// cancelled at once either way; this makes the successor wait for the work to
	// have stopped, not only to have been told: pgleader run sets it so that a
	// successor's child never overlaps this node's. It adds the work's reaction
	// time to such a failover (a crash or a frozen process is not delayed: their
	// guard goes with them). Default 0: the guard goes with the session.
	HoldGuardOnLoss time.Duration

	// FencedTxIdleTimeout bounds how long a transaction fenced with Fence (or
	// FencedTx) may sit idle: Fence sets idle_in_transaction_session_timeout to it
	// for the rest of the transaction. The trade-off: a fenced transaction holds the
	// scope's row, and a successor's claim waits for it, so a client that freezes in
	// the middle of a fenced transaction delays failover by up to this long; a
	// shorter value makes a healthy leader's transaction that waits (on an API call,
	// say) between two statements fail (ErrFencedTxIdle) after it. Default: the
	// session lease (L), so a frozen client delays failover no more than its frozen
	// leadership session would. Negative: Fence leaves the server's setting alone
	// (failover then waits until the server drops the frozen client's connection).
	FencedTxIdleTimeout time.Duration

	// FailbackAfter makes this node preferred: it takes back the scopes it
	// campaigns for from a live leader of lower priority, by a handover (the
	// leader drains, then hands over) that the leader's heartbeat requests once
	// this node has been registered for FailbackAfter and the leader's term is
	// as old. At most one failback per scope per FailbackAfter, each only ever
	// to a strictly higher priority, and none to a node cooling down after
	// resigning the scope: failback cannot flap. A term that began with an
	// operator's handover is left alone: failback undoes failovers, not an
	// operator's choice. 0 (the default): no failback;
	// leadership stays where a failover put it until an operator hands it over.
	// It needs NeverLead false and at least four heartbeat intervals; 30 s is a
	// good start (pgleader node --preferred).
	FailbackAfter time.Duration

	// ResignCooldown: after Resign or a handover, how long this node stays out of
	// the scope's election so another node takes over. A handover that reserves
	// the scope for this node (an operator's handover --to it) ends the cooldown
	// at once: a reserved scope has no free-for-all to stay out of. Default
	// 2×HeartbeatInterval.
	ResignCooldown time.Duration

	// MaxScopes caps len(Scopes). Default 10,000. The real limit is the server's
	// lock table, which Check (and Run) enforce: a node may use at most half of
	// max_locks_per_transaction × (max_connections + max_prepared_transactions).
	MaxScopes int

	// Logger receives one structured line per transition. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	var c Config
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, 500*time.Millisecond)
	def(&c.HeartbeatTimeout, 500*time.Millisecond)
	def(&c.TrustWindow, 1500*time.Millisecond)
	def(&c.SessionLease, 2*time.Second)
	def(&c.DrainTimeout, 5*time.Second)
	def(&c.ResignCooldown, 2*c.HeartbeatInterval)
	def(&c.FencedTxIdleTimeout, c.SessionLease)
	if c.Mode == "" {
		c.Mode = ModeLock
	}
	if c.MaxScopes == 0 {
		c.MaxScopes = 10000
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// minSafetyGap is the least L − W accepted: it absorbs clock-rate differences
// between hosts and the server's timer slack.
const minSafetyGap = 100 * time.Millisecond

// maxSessionLease bounds the session lease L (and so the trust window W < L and
// every wait for a predecessor's trust): the database refuses a longer one
// (pgleader.check_timing, PLF11), so no value read back from it makes a
// successor wait longer.
const maxSessionLease = 10 * time.Minute

// Validate checks the configuration (after filling defaults) and returns a
// *ConfigError naming the field and the rule it breaks.
//
// Timing must satisfy I + T < W < L with L − W ≥ 100ms (see the package doc for why
// each inequality is needed).
//
// MaxScopes is a sanity cap on the configuration; the limit that matters is the
// server's: advisory locks live in PostgreSQL's shared lock table, which the whole
// server shares and which, once full, fails every session of the database, not
// only pgleader's. A node holds one lock per scope it leads (followers hold none),
// and Check refuses a scope count above half of the table (ErrTooManyScopes).
func (c *Config) Validate() error {
	c.applyDefaults()
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	if c.Mode != ModeLock && c.Mode != ModeLease && c.Mode != ModeStandalone {
		return bad("Mode", "mode %q: must be %q (session advisory locks, the default), %q (lease rows, through a transaction pooler) or %q (no database)", c.Mode, ModeLock, ModeLease, ModeStandalone)
	}
	if c.Priority < 0 {
		return bad("Priority", "priority %d: must be 1 or more (0: the default, 1; NeverLead for a node that never leads)", c.Priority)
	}
	if c.NeverLead && c.Priority > 0 {
		return bad("NeverLead", "a node that never leads has no priority: leave Priority 0")
	}
	if c.FailbackAfter < 0 {
		return bad("FailbackAfter", "failback after %v: must be 0 (no failback) or positive", c.FailbackAfter)
	}
	if c.FailbackAfter > 0 && c.priority() == 0 {
		return bad("FailbackAfter", "a node of priority 0 never leads (NeverLead), so it cannot be preferred: set NeverLead false or FailbackAfter 0")
	}
	if c.FailbackAfter > 0 && c.FailbackAfter < 4*c.HeartbeatInterval {
		return bad("FailbackAfter", "failback after %v: must be at least four heartbeat intervals (%v)", c.FailbackAfter, 4*c.HeartbeatInterval)
	}
	if c.DSN != "" && c.ConnConfig != nil {
		return bad("ConnConfig", "set DSN or ConnConfig, not both")
	}
	if c.NodeID != "" { // empty: New picks the default
		if err := names.NodeID(c.NodeID); err != nil {
			return bad("NodeID", "%v", err)
		}
	}
	if len(c.Scopes) == 0 {
		return bad("Scopes", "at least one scope is required")
	}
	if len(c.Scopes) > c.MaxScopes {
		return bad("Scopes", "%d scopes exceed MaxScopes (%d): raise MaxScopes (the server's lock table is checked at start as well)",
			len(c.Scopes), c.MaxScopes)
	}
	seen := map[string]bool{}
	for _, s := range c.Scopes {
		if err := names.Scope(s); err != nil {
			return bad("Scopes", "%v", err)
		}
		if seen[s] {
			return bad("Scopes", "scope %q is listed twice", s)
		}
		seen[s] = true
	}
	for s := range c.LockKeys {
		if !seen[s] {
			return bad("LockKeys", "override for %q, which is not in Scopes", s)
		}
	}
	I, T, W, L := c.HeartbeatInterval, c.HeartbeatTimeout, c.TrustWindow, c.SessionLease
	switch {
	case I < 10*time.Millisecond:
		return bad("HeartbeatInterval", "heartbeat interval (%v) must be at least 10ms", I)
	case T < 10*time.Millisecond:
		return bad("HeartbeatTimeout", "heartbeat timeout (%v) must be at least 10ms", T)
	case I+T >= W:
		return bad("TrustWindow", "heartbeat interval (%v) + heartbeat timeout (%v) must be shorter than trust window (%v), or a healthy leader's gate closes between heartbeats", I, T, W)
	case W >= L:
		return bad("SessionLease", "trust window (%v) must be shorter than session lease (%v), or a frozen leader may still trust its gate when the server hands its lock to a successor", W, L)
	case L-W < minSafetyGap:
		return bad("SessionLease", "session lease (%v) must exceed trust window (%v) by at least %v (the safety gap absorbs clock-rate differences and server timer slack)", L, W, minSafetyGap)
	case L > maxSessionLease:
		return bad("SessionLease", "session lease (%v) must be at most %v", L, maxSessionLease)
	case L%time.Millisecond != 0:
		return bad("SessionLease", "session lease (%v) must be a whole number of milliseconds (idle_session_timeout)", L)
	case c.DrainTimeout < 0:
		return bad("DrainTimeout", "must not be negative")
	case c.HoldGuardOnLoss < 0:
		return bad("HoldGuardOnLoss", "must not be negative")
	case c.FencedTxIdleTimeout > 0 && c.FencedTxIdleTimeout%time.Millisecond != 0:
		return bad("FencedTxIdleTimeout", "fenced transaction idle timeout (%v) must be a whole number of milliseconds (idle_in_transaction_session_timeout)", c.FencedTxIdleTimeout)
	}
	return nil
}

// failbackMS is FailbackAfter for register_node: NULL when the node is not
// preferred.
func (c *Config) failbackMS() *int64 {
	if c.FailbackAfter <= 0 {
		return nil
	}
	ms := c.FailbackAfter.Milliseconds()
	return &ms
}

// priority is the priority the node registers with: 0 for NeverLead,
// Config.Priority, 1 by default.
func (c *Config) priority() int {
	switch {
	case c.NeverLead:
		return 0
	case c.Priority == 0:
		return 1
	}
	return c.Priority
}
