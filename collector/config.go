package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector/logical"
)

// Defaults of Config. They are exported so that the exporter's alert rules and the
// runbooks can be checked against the thresholds the collector really applies.
const (
	DefaultPollInterval       = time.Second
	DefaultNoLeaderAfter      = 10 * time.Second
	DefaultStaleMargin        = time.Second
	DefaultSplitBrainGrace    = 2 * time.Second
	DefaultStaleNodeAfter     = 30 * time.Second
	DefaultFlapWindow         = 5 * time.Minute
	DefaultFlapMax            = 6
	DefaultFenceAlertFor      = 5 * time.Minute
	DefaultLockPressure       = 0.5
	DefaultNotifyQueue        = 0.1
	DefaultNodeRetention      = time.Hour
	DefaultSlowFailover       = 5 * time.Second
	DefaultSlowFailoverFor    = 30 * time.Minute
	DefaultCollectorDownAfter = 5 * time.Second
	DefaultRecentTerms        = 50
	DefaultTermsWindow        = 5 * time.Minute
	DefaultEvictAfter         = 10 * time.Second
)

// Bounds of the poll interval (Config.PollInterval and SetPollInterval).
const (
	MinPollInterval = 10 * time.Millisecond
	MaxPollInterval = time.Hour
)

// MaxRecentTerms bounds Config.RecentTerms: every snapshot carries that many terms.
const MaxRecentTerms = 10000

// ErrInvalidConfig is wrapped by the errors of Config.Validate and New.
var ErrInvalidConfig = errors.New("collector: invalid configuration")

// SourceMode selects how Run learns of changes between polls (Config.Source).
// Health.Source says what it got.
type SourceMode string

// Source modes.
const (
	// SourceModeAuto, the default: the logical replication source when the
	// database offers it (logical.Available: wal_level = logical, a role with
	// REPLICATION, WAL senders and slots allowed), else LISTEN/NOTIFY. The choice
	// is logged once, with the reason when it falls back.
	SourceModeAuto SourceMode = "auto"
	// SourceModeLogical: the logical replication source; Run returns an error
	// wrapping ErrLogicalUnavailable, with the reason and the fix, when the
	// database cannot serve it.
	SourceModeLogical SourceMode = "logical"
	// SourceModeNotify: LISTEN leader_change plus the poll.
	SourceModeNotify SourceMode = "notify"
)

// Config configures a Collector. A zero duration, count or fraction means its
// default (the Default* constants); DefaultConfig returns them filled in. Only
// ConnConfig is required.
type Config struct {
	// ConnConfig is the parsed DSN (pgx.ParseConfig). The collector copies it and
	// opens its own connections: a listener (LISTEN leader_change) and a reader
	// (one read-only transaction per read, statement_timeout 5s). Their
	// application_name starts with "pgleader-collector".
	ConnConfig *pgx.ConnConfig

	// PollInterval is how often the collector reads even without notifications:
	// it bounds how late heartbeat ages, stale nodes and dead holders are noticed
	// (a notification only comes with claims, releases and audited events).
	// Between MinPollInterval and MaxPollInterval; SetPollInterval changes it.
	PollInterval time.Duration

	// NoLeaderAfter: a scope without a leader for this long raises AlertNoLeader
	// (critical) if some live node is a candidate for it or its leader_state row
	// still has an open term (a holder that died with nobody to succeed it). A
	// scope whose candidates were all stopped cleanly is not alerted on: nobody
	// is meant to run it. Failover takes milliseconds, so the default leaves room
	// for a frozen holder's whole session lease (2s by default) and then some.
	NoLeaderAfter time.Duration

	// StaleMargin: the lock is held but the holder's heartbeat is older than its
	// own trust window plus this margin: AlertStaleLeader (critical). Zero is a
	// valid margin only if set explicitly through a negative-free value; a zero
	// field means the default. The margin absorbs a slow heartbeat round trip.
	StaleMargin time.Duration

	// SplitBrainGrace: conditions that can be transiently true must be seen in
	// every read for this long before their alert fires: the split-brain
	// conditions, true for an instant while a claim or a release commits (the
	// lock table is not transactional, so one read can see the lock of a claim
	// whose row is not committed yet), and the stale leader, true for an instant
	// after a stall of the whole host (the holder's lease has expired, its backend
	// has not run yet to end itself). An epoch that went backwards fires at once.
	SplitBrainGrace time.Duration

	// StaleNodeAfter: a node not stopped cleanly whose last_seen is older than this
	// (database time) raises AlertStaleNode (warning) and is no longer Live.
	StaleNodeAfter time.Duration

	// FlapWindow and FlapMax: more than FlapMax elected terms of one scope within
	// FlapWindow raise AlertFlapping (warning).
	FlapWindow time.Duration
	FlapMax    int

	// FenceAlertFor: a fence_rejected audit row newer than this raises
	// AlertFenceRejected (warning) for its scope and node. The first read also
	// replays the audit rows of this window.
	FenceAlertFor time.Duration

	// LockPressure: granted locks of the whole server (LockStats.Used) above this
	// fraction of the shared lock table's nominal capacity raise
	// AlertLockPressure (warning). At most 2: the table holds about twice its
	// nominal size before every session of the server starts failing.
	LockPressure float64

	// SlowFailover and SlowFailoverFor: an open term that began more than
	// SlowFailover after its predecessor's last sign of life raises
	// AlertSlowFailover (warning) for its first SlowFailoverFor (the same
	// thresholds as the PgleaderSlowFailover rule, which reads this alert).
	SlowFailover    time.Duration
	SlowFailoverFor time.Duration

	// NodeRetention: a node that stopped, or has not been seen, for longer than
	// this leaves the snapshot (the views, the checks, the exporter's series).
	// pgleader node forget removes one at once.
	NodeRetention time.Duration

	// NotifyQueuePressure: the server's notification queue fuller than this
	// fraction raises AlertNotifyQueue (warning), well before it is full and every
	// NOTIFY (each claim's and release's) fails.
	NotifyQueuePressure float64

	// CollectorDownAfter: no successful read for this long adds AlertCollectorDown
	// (critical) to the last good snapshot, which is re-published while the
	// database cannot be read.
	CollectorDownAfter time.Duration

	// RecentTerms is the number of terms (all scopes, newest first) in each
	// snapshot. At most MaxRecentTerms.
	RecentTerms int

	// TermsWindow: each snapshot also carries, per scope, the terms that ended
	// within the last TermsWindow (up to maxWindowTerms a scope), however many
	// scopes changed leaders: a view of that window — the dashboard's timeline
	// shows 5 minutes — then has every term of every scope, where the
	// RecentTerms newest of all scopes would leave most of a mass failover's
	// closed terms out. Open terms are in Scope.OpenTerm.
	TermsWindow time.Duration

	// EvictStale, when set, has the collector terminate the leadership backend
	// of a stale holder (a zombie keeping the lock without heartbeats) through
	// it once the holder's AlertStaleLeader has lasted EvictAfter: one eviction
	// per term, audited (operator.Operator is the Evictor pgleader has). Nil by
	// default: the server's own session lease normally frees such a lock; this
	// is for holders whose lease does not work (a statement running on the
	// leadership session, a client that never set one).
	EvictStale Evictor
	EvictAfter time.Duration

	// Source selects how Run learns of changes between polls: SourceModeAuto
	// (default), SourceModeLogical or SourceModeNotify. The logical source
	// streams the committed changes of leader_state, terms and audit (package
	// collector/logical): events arrive milliseconds after their commit, in
	// commit order, each with its commit LSN, and none is lost between two polls.
	// The poll goes on either way: locks, nodes and heartbeat ages are not in the
	// stream.
	Source SourceMode

	// Slot names a permanent replication slot for the logical source (lower-case
	// letters, digits and underscores, at most 63 bytes); empty (the default)
	// selects a temporary slot, which the server drops with the connection. A
	// collector restarted on its permanent slot delivers the events committed
	// while it was away, but the server keeps all WAL the slot has not confirmed,
	// whether or not anyone reads it: a permanent slot whose collector is gone
	// fills the disk. Watch Health.SlotLagBytes (pgleader_collector_slot_lag_bytes)
	// and drop abandoned slots (`pgleader slots drop NAME`). One collector per
	// slot. Not allowed with SourceModeNotify.
	Slot string

	// StatusInterval is how often the logical source reports its position to
	// the server; zero means logical.DefaultStatusInterval (10s). At most half
	// of the server's wal_sender_timeout (checked when the stream opens).
	StatusInterval time.Duration

	// Logger receives one line per transition (source changes, alerts firing and
	// resolving, evictions, connection loss). Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in (ConnConfig nil).
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
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.NoLeaderAfter, DefaultNoLeaderAfter)
	def(&c.StaleMargin, DefaultStaleMargin)
	def(&c.SplitBrainGrace, DefaultSplitBrainGrace)
	def(&c.StaleNodeAfter, DefaultStaleNodeAfter)
	def(&c.FlapWindow, DefaultFlapWindow)
	def(&c.FenceAlertFor, DefaultFenceAlertFor)
	def(&c.CollectorDownAfter, DefaultCollectorDownAfter)
	def(&c.EvictAfter, DefaultEvictAfter)
	def(&c.NodeRetention, DefaultNodeRetention)
	def(&c.SlowFailover, DefaultSlowFailover)
	def(&c.SlowFailoverFor, DefaultSlowFailoverFor)
	def(&c.TermsWindow, DefaultTermsWindow)
	if c.FlapMax == 0 {
		c.FlapMax = DefaultFlapMax
	}
	if c.LockPressure == 0 {
		c.LockPressure = DefaultLockPressure
	}
	if c.NotifyQueuePressure == 0 {
		c.NotifyQueuePressure = DefaultNotifyQueue
	}
	if c.RecentTerms == 0 {
		c.RecentTerms = DefaultRecentTerms
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Source == "" {
		c.Source = SourceModeAuto
	}
}

// Validate fills in the defaults and checks every field. Its errors wrap
// ErrInvalidConfig and name the field and the rule.
func (c *Config) Validate() error {
	c.applyDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	positive := func(field string, d time.Duration) error {
		if d < 0 {
			return bad(field, "(%v) must be positive (zero means the default)", d)
		}
		return nil
	}
	if c.ConnConfig == nil {
		return bad("ConnConfig", "is required (parse the DSN with pgx.ParseConfig)")
	}
	if c.PollInterval < MinPollInterval || c.PollInterval > MaxPollInterval {
		return bad("PollInterval", "(%v) must be between %v and %v", c.PollInterval, MinPollInterval, MaxPollInterval)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"NoLeaderAfter", c.NoLeaderAfter}, {"StaleMargin", c.StaleMargin},
		{"SplitBrainGrace", c.SplitBrainGrace}, {"StaleNodeAfter", c.StaleNodeAfter},
		{"FlapWindow", c.FlapWindow}, {"FenceAlertFor", c.FenceAlertFor},
		{"CollectorDownAfter", c.CollectorDownAfter}, {"EvictAfter", c.EvictAfter},
		{"TermsWindow", c.TermsWindow},
	} {
		if err := positive(f.name, f.d); err != nil {
			return err
		}
	}
	if c.FlapMax < 0 {
		return bad("FlapMax", "(%d) must be positive (zero means the default)", c.FlapMax)
	}
	if c.NotifyQueuePressure < 0 || c.NotifyQueuePressure > 1 {
		return bad("NotifyQueuePressure", "(%g) must be a fraction of the notification queue between 0 and 1", c.NotifyQueuePressure)
	}
	if c.LockPressure < 0 || c.LockPressure > 2 {
		return bad("LockPressure", "(%g) must be a fraction of the lock table between 0 and 2", c.LockPressure)
	}
	if c.RecentTerms < 0 || c.RecentTerms > MaxRecentTerms {
		return bad("RecentTerms", "(%d) must be between 1 and %d (zero means the default)", c.RecentTerms, MaxRecentTerms)
	}
	switch c.Source {
	case SourceModeAuto, SourceModeLogical, SourceModeNotify:
	default:
		return bad("Source", "(%q) must be %q, %q or %q", c.Source, SourceModeAuto, SourceModeLogical, SourceModeNotify)
	}
	if c.Slot != "" && c.Source == SourceModeNotify {
		return bad("Slot", "(%q) needs the logical source: set Source to %q or %q, or leave Slot empty", c.Slot, SourceModeAuto, SourceModeLogical)
	}
	if err := positive("StatusInterval", c.StatusInterval); err != nil {
		return err
	}
	lc := logical.Config{ConnConfig: &c.ConnConfig.Config, Slot: c.Slot, StatusInterval: c.StatusInterval}
	if err := lc.Validate(); err != nil {
		return bad("Slot", "(%q): %v", c.Slot, err)
	}
	return nil
}
