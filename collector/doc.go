// Package collector watches a pgleader database from the outside and turns it into
// immutable Snapshots and an ordered stream of Events, with the checks an on-call
// engineer needs: no leader, split brain, stale leader, stale nodes, flapping,
// refused fenced writes, lock-table pressure, and the collector's own outage. The
// exporter and the dashboard render its output. It only reads: nothing here
// writes the database or talks to nodes. The operator actions (resign,
// handover, evict, retire, bind, lock key) are package operator's, the write
// path; a collector evicts a stale holder only through the Evictor it is given
// (Config.EvictStale), which decides nothing.
//
//	c, err := collector.New(collector.Config{ConnConfig: cfg}) // Source: auto
//	go c.Run(ctx)
//	snaps, stop := c.Updates()        // latest wins
//	events, unsub := c.Subscribe(256) // ordered, never blocks the collector
//
// Between polls, Run learns of changes from one of two sources (Config.Source):
// LISTEN/NOTIFY, or the committed changes of leader_state, terms and audit
// streamed by logical replication (package collector/logical). The default, auto,
// takes the stream when the database offers it (logical.Available: wal_level =
// logical, a role with REPLICATION) and logs once why it falls back to LISTEN
// otherwise; SourceModeLogical makes Run fail with the reason and the fix
// instead. Either way the poll goes on: locks, nodes and heartbeat ages are in
// no stream.
//
// A Fleet runs one Collector per database and merges their snapshots and
// events into one picture (Scope.Database and the others name the database):
// a database that cannot be read keeps its last snapshot, marked unreachable
// in Snapshot.Databases, and never holds up the others (fleet.go).
//
// ReadHistory reads the rows a window of the past is made of (terms, audit
// rows, the scopes' and nodes' current rows) in one snapshot; package
// collector/replay rebuilds any instant of the window from them (status --at,
// the dashboard's replay).
//
// # Reading: LISTEN first, then read, then notifications
//
// Run keeps two connections. The listener runs LISTEN leader_change and only then
// asks for a full read; the reader makes every read. Anything committed before the
// LISTEN is in that read, anything after it is notified, so no change falls between
// the two — the order matters, and it is repeated after every reconnection of the
// listener. While the listener waits, the reader is free, so nothing is missed
// while a read runs: a notification that arrives meanwhile asks for one more read.
//
// A notification is a hint, never data. Anyone may NOTIFY anything on the channel
// (docs/design.md §4c), notifications are lost while the listener is disconnected, and
// the payload of a claim says nothing about the lock table. So the collector
// ignores the payload and re-reads the state: a forged, garbage, huge or lying
// payload can cause a read, nothing else. The first notification after a quiet
// period is read at once (commit → event takes a notification round trip plus one
// read, milliseconds); notifications that arrive while one waits for its read are
// coalesced into it (Health.NotificationsCoalesced), and reads are at least 5 ms
// apart. The poll ticker (Config.PollInterval) reads too: heartbeat ages, stale
// nodes and holders that died without a word change nothing anyone notifies about.
//
// Any role that may connect can send notifications as fast as the server takes
// them, so the reads they cause are budgeted: a token bucket holds 8 reads and
// refills one per PollInterval/4 (at least 5 ms). A read asked for by nothing but
// notifications takes a token, and gives it back when it finds something new (it
// publishes an event): genuine changes are read as fast as they come, and only
// notifications that turn out to be empty wait for a token. A storm of forged
// notifications therefore costs at most 8 reads plus 4 per poll interval beyond
// the poll itself: with the default 1 s interval, 5 reads a second against 1 when
// idle, where it was one read per 5 ms (200 a second) before the budget. A real
// change during a storm is read with the next token, within PollInterval/4, or at
// the next tick.
//
// Receiving is a cost too, before any read: the listener parses every
// notification the server sends it. So the listener takes in at most 8192
// notifications and 4 MiB per second (internal/notifybudget); past that it closes
// its connection, which drops what the server still queues for it unread, reports
// the flood (Health.LastError, with the top sender pids) and polls for 1 s,
// doubling per consecutive flood up to 30 s, before it listens again (measured: a
// pgleader exporter in notify mode under three flooding connections used 0.68 s
// of CPU in 5 s of 7000-byte payloads and 0.06 s in 5 s of small ones, against
// 1.97 s and 3.8 s for the previous build in the same run; TestNotifyFloodBounded).
//
// # One read, one picture
//
// A read is one REPEATABLE READ, READ ONLY transaction sent as a single pipelined
// batch (one round trip): the scopes (every leader_state row, plus every scope a
// not-stopped node is a candidate for), their locks, their newest term and the
// index-only counts behind flapping and epoch checks; now(); the nodes; the last
// RecentTerms terms and, per scope, those that ended within TermsWindow (so a
// mass failover's closed terms are all there); the audit rows after the last
// one seen. All rows come from
// one MVCC snapshot, and every age (heartbeat, last seen, tenure) is measured
// against that transaction's now(), so clock skew between hosts does not matter.
// The lock table is the exception: pg_locks is not transactional. It is read by the
// first statement, the one that takes the snapshot, so both describe nearly the
// same instant; the remaining difference (a claim holds the lock a moment before
// its row commits, a release frees it a moment before) is what
// Config.SplitBrainGrace absorbs.
//
// Audit rows become events in id order, each id once: the collector remembers the
// highest id seen, continues from it after any reconnection, and looks again for
// ids a read skipped (taken by a transaction not committed yet) for a few seconds.
// The first read replays the rows of the last Config.FenceAlertFor.
//
// The audit table refuses UPDATE and DELETE, but its owner or a superuser can
// TRUNCATE it (the documented retention), and TRUNCATE … RESTART IDENTITY starts
// the ids again at 1, below the remembered id: the collector would wait above
// them forever. So every read notes the newest id, and a read that finds it
// below the newest an earlier read showed (rows committed stay visible in every
// later snapshot) reports EventAuditReset, logs it, forgets its ids and
// re-anchors as the first read does: the next read replays the FenceAlertFor
// window, without the rows it had delivered (by audit.at), and continues after
// the newest id. The logical stream sees the TRUNCATE itself, in commit order.
// A reset followed, before the next read, by more new rows than the old newest
// id goes unnoticed by a read: the new rows up to that id are then missed.
//
// When reads fail the collector keeps the last good snapshot and re-publishes it
// with Health.Source = disconnected, the error, and after Config.CollectorDownAfter
// AlertCollectorDown; when only the listener (or the stream) is down, reads go on
// with Source = polling. Every connection reconnects with backoff, 100 ms doubling
// to 5 s.
//
// # The logical source
//
// The stream (Health.Source = logical) replaces the listener. Its transactions
// are data, not hints: the changes arrive in commit order, milliseconds after the
// commit, and none falls between two polls.
//
// Events come from the stream's audit INSERTs, in commit order, each with its
// commit LSN (Event.LSN), mapped by the same function as the audit poll's rows.
// Both paths pass every row through one gate, so that no row becomes an event
// twice: a row is new if its id is above the highest id admitted or is one of the
// ids skipped below it (a transaction in flight, or rolled back), remembered for
// 10 s of database time. A transaction's events are published to the subscribers
// before its end is acknowledged to the server (Stream.Ack).
//
// Which path reads the audit rows depends on the slot. A temporary slot (the
// default) decodes only what commits after its creation, so after every opening
// one read takes the audit rows committed while no stream was open, before the
// stream's first transaction is handled (events stay in order); while the stream
// runs, reads leave the audit table to it; when it ends, reads take the audit rows
// again from the gate. A permanent slot (Config.Slot) keeps on the server what the
// collector has not acknowledged, across disconnections and restarts, so its
// stream is the only path: events that committed while the collector was away
// arrive when it is back, in commit order, and wait in the slot while its stream
// is down. Its first read takes the FenceAlertFor window for the fence_rejected
// alerts only: replaying the window as events would repeat what an earlier run
// delivered. Within a run, a reopened stream drops what was acknowledged already
// (logical.Config.ResumeAfter); across runs the slot's confirmed position does
// (Close waits until the server has it), so only a crash between an event and
// the next status update (10 s, Config.StatusInterval) can repeat events: they
// are at least once across crashes, exactly once otherwise.
//
// The stream asks for reads, coalesced like notifications: for every transaction
// with an audit or terms row, and for leader_state changes other than heartbeats.
// Every heartbeat rewrites last_heartbeat of each led scope, every interval; with
// the default replica identity pgoutput sends no old row for it, so the stream
// compares epoch, holder, holder_pid, released_at and lock_key with what it last
// saw of the scope and ignores the change when they are equal. The walsender
// decodes a transaction once its commit is in WAL, which can be an instant before
// other sessions see it: a read that shows a scope older than the stream saw it
// (lower epoch, or open where the stream saw it released) within the last second
// reads again.
//
// A message the stream cannot decode is logged and counted (Health.DecodeErrors);
// the stream drops the rest of that transaction and goes on, and a read of the
// audit table makes up for it: the rows of the dropped transaction are above the
// gate or among the missing ids (on a permanent slot, only missing ids above the
// first one the run admitted: lower ones may be rows an earlier run delivered).
//
// A permanent slot retains WAL for as long as it exists, read or not. Health
// reports how far it trails (SlotLagBytes, measured on the reader at most once a
// second; the exporter's pgleader_collector_slot_lag_bytes and the alert
// PgleaderSlotLagging); `pgleader slots drop NAME` removes the slot of a retired
// collector. Run waits (up to 2 s) until the server has released the slot before
// it returns, so that the slot can be opened again, or dropped, at once.
//
// # Operator actions
//
// The actions of package operator are audited, and so show up here as events
// like any other change: EventResignRequested, EventHandoverRequested,
// EventEvicted, EventScopeRetired. Snapshot is what they re-check a holder
// against (operator.Config.Latest).
//
// # The checks, and why a healthy cluster does not trip them
//
// The timing of a holder is in its leader_state row: heartbeat interval I, trust
// window W, session lease L with I + T < W < L. A live holder refreshes
// last_heartbeat every I. A frozen or partitioned holder closes its own gate at
// W and the server ends its session, freeing the lock, at L (idle_session_timeout).
// Resigns and shutdowns release in one transaction (term closed, lock freed) and a
// follower blocked on the lock claims within milliseconds; a killed holder's
// backend frees the lock when the socket closes, and the successor closes the dead
// term in its claim.
//
//   - no_leader (critical): no open term whose lock is held, for NoLeaderAfter
//     (default 10 s), while a live node is a candidate or the leader_state row still
//     has an open term (a holder died with nobody to succeed it). Failovers take
//     milliseconds and a frozen holder is replaced after L (2 s by default), far
//     below the threshold. A scope whose candidates all stopped cleanly is not
//     alerted on: nobody is meant to run it (its NO LEADER verdict still shows).
//     The leaderless clock of a scope first seen without a leader starts at its
//     release (or its dead holder's last heartbeat) in database time, so a restarted
//     collector does not reset it.
//   - split_brain (critical), on any of: (a) a term is open and the lock is held by
//     a backend other than leader_state.holder_pid — a squatter; right after a crash
//     the lock is free with the term still open, which is no leader, not this; (b)
//     more than one backend holds the lock exclusively; (c) another live node lists
//     the scope in nodes.leads with a last_seen after the current term began — every
//     heartbeat rewrites leads from the terms it could confirm with its own lock, so
//     the stale entry of a frozen or dead node (last_seen before the term) does not
//     count; (d) a term is open, nobody holds its lock, and its holder keeps
//     heartbeating and listing the scope — a heartbeat that runs after the lock was
//     seen free drops the scope, so a dead or frozen holder (no heartbeat) does not
//     count; (e) the epoch went below the highest this collector saw or the highest
//     in pgleader.terms (a restored backup, a manual edit). (a)–(d) must hold in
//     every read for SplitBrainGrace (2 s), which covers the instants between a
//     claim or release taking or freeing the lock and its commit; (e) fires at once
//     and lasts until the epoch is back at the highest granted.
//   - stale_leader (critical): the lock is held for an open term, but the heartbeat
//     is older than the holder's W + StaleMargin. A holder past W has closed its
//     own gate, so nobody acts while the lock keeps followers out. With a working
//     lease the server frees the lock at L, and with the defaults (W 1.5 s, L 2 s,
//     margin 1 s) L comes first, so a frozen node that is handled by its lease does
//     not alert; the lock held past W + margin means the lease did not work (a
//     statement running on the leadership session, no idle_session_timeout) and the
//     alert is right. Once the server or an eviction ends the session, the lock is
//     free and the alert resolves. With Config.EvictStale the collector has its
//     Evictor terminate the holder's backend once the alert has lasted EvictAfter
//     (once per term, audited as kind evicted).
//   - stale_node (warning): a node that did not stop cleanly (stopped_at NULL) with
//     last_seen older than StaleNodeAfter. Clean shutdowns set stopped_at; every
//     live node heartbeats every I.
//   - no_follower (warning, Node = the leader): a led scope with no live
//     follower while another of its candidates is late or down (not stopped).
//
// A node's State follows its own registered timing, not a collector-wide
// bound: live while seen within its trust window W; late past W (its gates have
// closed by its own rule); down past its session lease L, or at once when its
// leadership session is gone (lock mode: its beacon lock released,
// watch_nodes_v1.session_alive); stopped when it stopped cleanly. Only live
// nodes count as followers.
//   - flapping (warning): more than FlapMax terms of a scope within FlapWindow.
//   - fence_rejected (warning, Node = the zombie): a fence_rejected audit row within
//     FenceAlertFor. A healthy cluster writes none: a refused write means a holder
//     acted after losing its term.
//   - lock_pressure (warning): granted advisory locks of the database above
//     LockPressure of max_locks_per_transaction × (max_connections +
//     max_prepared_transactions).
//   - collector_down (critical): no successful read for CollectorDownAfter.
//
// An alert's Since is when its condition began (for no_leader, when the scope lost
// its leader; for grace-bound checks, the first read that saw the condition) and is
// kept across snapshots. EventAlertFiring and EventAlertResolved mark changes of
// the alert set, keyed by Alert.Key.
//
// The verdict of a scope is SPLIT BRAIN with a split_brain alert, NO LEADER when it
// has no leader (even before no_leader fires), DEGRADED with any other alert on it
// or a heartbeat older than twice its interval, and OK otherwise.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package collector
