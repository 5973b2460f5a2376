package logical

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPublication is the publication migration 003 creates.
const DefaultPublication = "pgleader_events"

// DefaultStatusInterval is how often a stream reports its position when
// Config.StatusInterval is zero: well within PostgreSQL's default
// wal_sender_timeout of 60 s.
const DefaultStatusInterval = 10 * time.Second

// Sentinel errors. Errors returned by this package wrap them with context.
var (
	// ErrDecode: a replication message could not be decoded. Next returns it for
	// one message; the stream stays usable (the rest of that transaction is
	// dropped), so the caller logs it and calls Next again.
	ErrDecode = errors.New("malformed logical replication message")
	// ErrClosed: Next was called on a stream after Close.
	ErrClosed = errors.New("logical replication stream closed")
	// ErrSlotInUse: another connection is reading the replication slot.
	ErrSlotInUse = errors.New("replication slot in use")
	// ErrNoSlot: the named replication slot does not exist (in this database).
	ErrNoSlot = errors.New("replication slot not found")
	// ErrNoPublication: the publication does not exist in the database (pgleader's
	// schema is older than version 3: run `pgleader migrate`).
	ErrNoPublication = errors.New("publication not found")
)

// Config configures Open. The zero values of the optional fields select the
// documented defaults.
type Config struct {
	// ConnConfig is the configuration of an ordinary connection to the database
	// (pgconn.ParseConfig of a normal DSN). Open connects with a copy of it that
	// sets the replication=database startup parameter; ConnConfig itself is not
	// modified. Required.
	ConnConfig *pgconn.Config

	// Slot names a permanent replication slot: created by Open when missing and
	// resumed at its confirmed_flush_lsn otherwise. Empty selects a temporary
	// slot under a random name, which the server drops when the connection ends.
	// A permanent slot retains WAL while nobody reads it (see the package doc).
	// Lower-case letters, digits and underscores, at most 63 bytes.
	Slot string

	// Publication to stream; default DefaultPublication. Lower-case letters,
	// digits and underscores, starting with a letter or underscore.
	Publication string

	// StatusInterval is how often the stream sends a standby status update
	// (received and acked positions), whether or not the caller calls Next.
	// Default DefaultStatusInterval. It must be at most half of the server's
	// wal_sender_timeout, or the server may end the connection between two
	// updates; Open checks it.
	StatusInterval time.Duration

	// ResumeAfter is the EndLSN of the last Tx the caller acked on an earlier
	// stream of the same slot (0: none). The stream drops every Tx whose
	// CommitLSN is before it: those are transactions the caller already
	// processed, sent again because the server's confirmed position lagged.
	// It is also reported as the initial flush position.
	ResumeAfter pglogrepl.LSN

	// Logger receives one line per stream transition (slot created, stream
	// started, stream ended). Default: discard.
	Logger *slog.Logger

	// tap, when set (tests only), receives a copy of every CopyData payload
	// before it is decoded.
	tap func(data []byte)
}

// withDefaults returns c with the defaults filled in.
func (c Config) withDefaults() Config {
	if c.Publication == "" {
		c.Publication = DefaultPublication
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = DefaultStatusInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that breaks its rule, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.ConnConfig == nil {
		return errors.New("logical: Config.ConnConfig is required")
	}
	if c.Slot != "" && !validSlotName(c.Slot) {
		return fmt.Errorf("logical: slot name %q must be 1 to 63 lower-case letters, digits or underscores", c.Slot)
	}
	if !validPublicationName(c.Publication) {
		return fmt.Errorf("logical: publication name %q must be 1 to 63 lower-case letters, digits or underscores, not starting with a digit", c.Publication)
	}
	if c.StatusInterval < 0 {
		return fmt.Errorf("logical: status interval (%v) must be positive", c.StatusInterval)
	}
	return nil
}

// validSlotName applies PostgreSQL's rule for replication slot names
// (ReplicationSlotValidateName), which also makes them safe to splice into
// replication commands unquoted.
func validSlotName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// validPublicationName accepts the names that need no quoting anywhere: in SQL,
// and in pgoutput's publication_names option (parsed as an identifier list).
func validPublicationName(s string) bool {
	return validSlotName(s) && !(s[0] >= '0' && s[0] <= '9')
}
