// Package logical is the collector's logical-replication source: it streams the
// committed changes of pgleader.leader_state, pgleader.terms and pgleader.audit from
// PostgreSQL's pgoutput plugin (protocol version 1, publication pgleader_events,
// created by migration 003) and hands them out one whole transaction at a time.
//
// It is optional. Polling sees every leadership change as well, one poll later;
// this source only brings the latency down to a few milliseconds and never misses
// an audit row between two polls. It needs wal_level = logical and a role with
// REPLICATION (or a superuser): Available says whether a database offers both and,
// if not, why not in one sentence.
//
// # Slot kinds
//
// A stream reads through a replication slot, which remembers on the server how far
// the reader got.
//
//   - Temporary (Config.Slot empty): created by Open under a random name and dropped
//     by the server when the connection ends, whatever the reason. Nothing is left
//     behind, but whatever committed while no stream was open is never decoded: the
//     caller re-reads state by polling after each Open. This is the default and the
//     right choice for the dashboard and for most collectors.
//   - Permanent (Config.Slot set): created by Open when missing, kept by the server
//     across disconnects and restarts, resumed at its confirmed_flush_lsn. Nothing
//     committed while the collector was away is lost.
//
// # WAL retention: the danger of an abandoned permanent slot
//
// The server keeps every WAL segment a slot may still need, for as long as the slot
// exists, whether or not anyone reads it. A permanent slot whose collector was
// decommissioned keeps WAL forever: pg_wal grows until the disk is full and the
// whole database stops (unless max_slot_wal_keep_size is set, in which case the slot
// is invalidated instead). Watch SlotLag (or ListSlots' RetainedBytes), and drop
// slots nobody reads with DropSlot (`pgleader slots drop NAME`). Prefer temporary
// slots unless losing changes during a collector restart matters.
//
// # The LSN acknowledgement rule
//
// Every Tx carries CommitLSN (where its commit record starts) and EndLSN (where it
// ends). After the caller has processed a Tx it calls Ack(tx.EndLSN): the flush
// position reported to the server, which becomes the slot's confirmed_flush_lsn,
// never passes what was acked, so a transaction the caller did not finish is sent
// again after a reconnect. The write position reported is what was received.
//
// One refinement keeps an idle slot from retaining WAL: when every Tx handed out
// has been acked and no transaction is half received, the stream also confirms the
// WAL position of the server's latest keepalive and the end of transactions it
// skipped (ones without changes to the published tables, and duplicates). Such WAL
// holds nothing for the caller, and a transaction still open on the server at that
// point is sent in full after a reconnect anyway: PostgreSQL re-decodes from the
// slot's restart_lsn and skips only transactions whose commit lies before
// confirmed_flush_lsn.
//
// # Status updates versus wal_sender_timeout
//
// The server ends a replication connection that has not replied for
// wal_sender_timeout (60 s by default). A Stream owns its connection in a goroutine
// of its own, which sends a standby status update every Config.StatusInterval
// (10 s by default; Open refuses an interval longer than half of the server's
// wal_sender_timeout) and answers at once every keepalive that asks for a reply,
// however long the caller takes between two calls of Next. While the caller does
// not call Next, the goroutine stops reading once a small buffer of decoded
// transactions is full, and keeps sending status updates.
//
// # Reconnecting and duplicates
//
// Open does not reconnect by itself. When Next returns an error that does not wrap
// ErrDecode (the connection broke, the server shut down, the slot was dropped), the
// caller closes the stream and opens a new one with backoff. With a permanent slot
// the new stream resumes at the slot's confirmed_flush_lsn, which may lie before the
// last Tx the caller processed (the final status update of the old connection may
// not have reached the server), so a Tx may come twice. Pass the last acked EndLSN
// as Config.ResumeAfter: the stream then drops every Tx whose CommitLSN is before
// it. The collector additionally deduplicates audit rows by id.
//
// # Decoding
//
// Messages are parsed with github.com/jackc/pglogrepl, after a bounds check of the
// whole message that this package does itself: pglogrepl trusts the lengths inside
// a message, so a truncated or corrupt one can make it panic or allocate gigabytes.
// A message that fails the check (or, as a last defence, panics anyway) makes Next
// return an error wrapping ErrDecode; the stream drops the rest of that transaction
// and stays usable. Column values are the server's text representation (nil for SQL
// NULL); converting them is the caller's business.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package logical
