// Package collector watches a pgleader database from the outside and turns it into
// immutable Snapshots and an ordered stream of Events, with the checks an on-call
// engineer needs: no leader, split brain, stale leader, stale nodes, flapping,
// refused fenced writes, lock-table pressure, and the collector's own outage. The
// exporter and the dashboard render its output; nothing here talks to nodes.
//
//	c, err := collector.New(collector.Config{ConnConfig: cfg})
//	go c.Run(ctx)
//	snaps, stop := c.Updates()        // latest wins
//	events, unsub := c.Subscribe(256) // ordered, never blocks the collector
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
// (DESIGN.md §3), notifications are lost while the listener is disconnected, and
// the payload of a claim says nothing about the lock table. So the collector
// ignores the payload and re-reads the state. The first notification after a quiet
// period is read at once (commit → event takes a notification round trip plus one
// read, milliseconds); a burst is coalesced into at most one read per 5 ms. The poll
// ticker (Config.PollInterval) reads too: heartbeat ages, stale nodes and holders
// that died without a word change nothing anyone notifies about.
//
// # One read, one picture
//
// A read is one REPEATABLE READ, READ ONLY transaction sent as a single pipelined
// batch (one round trip): the scopes (every leader_state row, plus every scope a
// not-stopped node is a candidate for), their locks, their newest term and the
// index-only counts behind flapping and epoch checks; now(); the nodes; the last
// RecentTerms terms; the audit rows after the last one seen. All rows come from
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
// When reads fail the collector keeps the last good snapshot and re-publishes it
// with Health.Source = disconnected, the error, and after Config.CollectorDownAfter
// AlertCollectorDown; when only the listener is down, reads go on with
// Source = polling. Both connections reconnect with backoff, 100 ms doubling to 5 s.
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
//     free and the alert resolves. With Config.EvictStale the collector terminates
//     the holder's backend once the alert has lasted EvictAfter (once per term,
//     audited as kind evicted).
//   - stale_node (warning): a node that did not stop cleanly (stopped_at NULL) with
//     last_seen older than StaleNodeAfter. Clean shutdowns set stopped_at; every
//     live node heartbeats every I.
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
package collector
