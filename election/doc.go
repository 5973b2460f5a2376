// Package election elects one leader per scope among the replicas of a Go service,
// through the PostgreSQL the service already runs, and hands the leader a fencing
// epoch that the database itself enforces.
//
// # Using it
//
//	e, err := election.New(election.Config{
//		DSN:    os.Getenv("DATABASE_URL"), // or ConnConfig: pool.Config().ConnConfig
//		Scopes: []string{"billing"},       // NodeID defaults to <hostname>-<pid>-<random>
//	})
//	if err != nil {
//		return err // the field and the rule it breaks
//	}
//	if err := e.Start(ctx); err != nil {
//		return err // unreachable, no schema, no grants: now, not never
//	}
//	http.Handle("/readyz", e.HealthHandler()) // 200 while it reaches the database
//
//	err = e.Scope("billing").Lead(ctx, func(ctx context.Context, tok election.Token) error {
//		for {
//			select {
//			case <-ctx.Done():
//				return ctx.Err() // leadership lost: stop at once
//			case <-tok.Draining():
//				return nil // SIGTERM or a handover: finish, the next leader takes over
//			case <-time.After(time.Second):
//			}
//			err := election.FencedTx(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
//				_, err := tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE due < now()")
//				return err
//			})
//			if err != nil {
//				return err // ErrFenced: a successor took over; nothing was written
//			}
//		}
//	})
//	return errors.Join(err, e.Wait()) // Lead returns at SIGTERM; Wait, once handed over
//
// (Example_service compiles exactly this.) Start checks what campaigning needs and
// reports it at once, then campaigns in the background for the lifetime of ctx;
// when ctx ends the Elector drains (in-flight work gets Config.DrainTimeout),
// releases every scope so that a follower takes over at once, and Wait returns.
// Lead waits for leadership and calls its function once per term: the function's
// context is cancelled the moment leadership is lost (its cause is a *LostError),
// while a stop (ctx, the Elector's shutdown, Resign, a handover) first closes
// tok.Draining() and keeps the term valid until the function returns or
// DrainTimeout passes. FencedTx begins, fences, runs and commits a transaction,
// mapping the outcomes to ErrFenced, ErrFencedTxIdle and ErrLeadershipLost.
//
// The smaller verbs remain: Require returns a Token (scope, epoch, holder) or
// ErrNotLeader without waiting; Await waits for one; Token.Valid re-checks the gate
// just in time; Do runs a function under a context cancelled when the gate closes;
// Fence fences a transaction the caller manages (FenceSQLTx one of database/sql);
// Observe delivers the engine's events, elected and revoked with the term's Token;
// HealthHandler serves
// the node's role per scope to a readiness probe. Package electionprom exports the
// node's metrics to Prometheus; package electiontest gives a service's unit tests
// an Elector that leads when the test says so.
//
// # Moving parts (per node): three connections, whatever the number of scopes
//
// docs/design.md §4 lists a node's connections, what runs on each, and how a
// follower learns that leadership ended; what the invariants below rely on:
//
//   - The leadership session holds the session advisory lock of every scope the
//     node leads, and runs the schema's claim, heartbeat and release functions and
//     nothing else: the server ends it L after its last statement
//     (idle_session_timeout), and its locks go with it.
//   - The guard session holds the node's guard lock while any gate of the node may
//     be open (with the same lease while the node leads): a successor that waits
//     for it waits until the predecessor cannot trust its gate (below).
//   - The watch session is the node's doorbell (below) and its ring watch: it
//     waits on the beacon of the next live node in node_id order (every
//     leadership session is watched by one node) and serves a new term's waits
//     for its predecessors' guards. No session of a node LISTENs.
//   - Wake-ups (the ring's wait on a peer's beacon, a doorbell) are hints: the
//     locks and the claim function decide, and a follower's heartbeat (every I)
//     finds any scope without a live holder, so a lost wake-up costs at most I.
//   - Followers hold nothing per scope: N nodes need the same connections for one
//     scope or ten thousand.
//
// # The doorbell
//
// A wake-up is a signal with no content: pg_cancel_backend on the node's watch
// session, sent by the transaction whose change the node should act on. A
// signal that finds the watch statement in its WAIT makes it READ at once, in
// the same statement; anywhere else it ends the statement (SQLSTATE 57014) and
// the next one re-reads. What the node acts on is always what the re-read
// returns, never the signal.
//
//	doorbell_register   the watch session proves itself (the login of a live
//	                    registered node, not that node's leadership session,
//	                    holding no advisory lock) and records its backend pid,
//	                    backend_start and application_name in
//	                    pgleader.doorbells, with whether the owner role may
//	                    signal it at all (ringable).
//	watch               READ: lock its own doorbell row FOR UPDATE, which waits
//	                    for every ringer holding it; read what the node should
//	                    act on (free scopes it campaigns for whose holder is not
//	                    live, scopes reserved for it, resign and handover
//	                    requests on its terms, its ring peer); give the row lock
//	                    back (a subtransaction rolled back). If the read holds
//	                    anything the caller has not seen (p_seen): return it.
//	                    WAIT: else wait on the peer's beacon or a guard (a
//	                    sleep when alone) for at most the slice; return. A
//	                    signal during the WAIT is a ring if the row has a new
//	                    locker (its xmax changed since the WAIT began): then
//	                    READ, and return what it holds; else (the caller's own
//	                    cancel request) the statement ends with 57014.
//	ringing             a function whose change concerns node N (a release: the
//	                    scope's live candidates, or the handover's target; a lost
//	                    node: the candidates of its scopes left free; a resign or
//	                    handover request: the holder; a registration: the ring
//	                    predecessor) locks N's doorbell row FOR KEY SHARE as its
//	                    last act, held until it commits, and then signals N's
//	                    watch session if that backend is still the one recorded
//	                    (pid, backend_start, login, application_name), is in a
//	                    statement, and is not already waiting for a transaction
//	                    lock (its READ, which will see this commit).
//
// The watch loop calls watch again after every outcome (rows, a free key, the
// slice's end, a cancel); it re-reads first after every outcome but a slice that
// ran out with nothing new (then it only waits again). So these hold:
//
//   - The re-read never answers a ring with a state from before the ringer's
//     commit. Let the ringer R take its KEY SHARE at t. A READ whose FOR UPDATE
//     is granted after t is granted only after R ended, and reads with a later
//     snapshot; a READ whose lock was granted before t released it before t (R
//     waited for it). So at t the watch session is in a WAIT (R's signal ends
//     it; the next READ follows t), returning or idle between calls (the next
//     call's READ follows t, signal or not: a call without a READ, after a
//     slice that ran out, compares the row's locker with the one its last wait
//     began with, finds R's and READs first), or waiting in a
//     READ's FOR UPDATE (granted after R ends). In every case the first READ
//     after t sees R's commit.
//   - A lost wake-up costs at most one heartbeat interval, I. A wake-up is lost
//     only when the watch session is down or reconnecting (each new one
//     registers and re-reads), when the doorbell cannot ring (the owner may not
//     signal the node's login: a superuser node, or pg_signal_backend or
//     pg_read_all_stats not granted — logged once, and shown by pgleader status),
//     or when a READ gave up waiting for a ringer that kept its transaction
//     open (it waits at most min(I, 1 s), then reads anyway, so that no open
//     transaction can stall the watch). A follower's heartbeat reports every
//     followed scope that has no live holder, and the follower claims it then.
//     A foreign session squatting a scope's key is likewise retried at every
//     heartbeat.
//   - No signal reaches a backend that is not a proven watch session: the only
//     pid the ringers read is one doorbell_register recorded as its own caller's
//     pg_backend_pid() after the proof above, and a ringer signals it only while
//     pg_stat_activity shows the same backend_start (a reused pid never has it),
//     login and application_name. The ordering lock is a row lock on a table
//     only the owner may lock, so no role can squat it, and it is no advisory
//     key: it cannot collide with a scope's key, a guard, a beacon or a fence
//     key.
//
// A re-read returns only rows the caller has not seen (p_seen: the hashes of
// the rows of its last answer): a scope that stays free (squatted, deferred to
// another node, cooling down) does not wake the loop again; its heartbeat
// retries it every I, as before.
//
// Nothing of a node LISTENs, so a NOTIFY flood on leader_change cannot reach
// it: no heartbeat waits behind notifications and no wake-up is forged. The
// doorbells are rung only by the schema's functions, each of which proves its
// caller; a role that may call one (an operator asking for resignations in a
// loop) costs the watcher a re-read per call.
//
// # States of a scope
//
//	follower ──claim queued──▶ claiming ──won──▶ pending ──predecessor safe──▶ leader
//	   ▲                          │ lost / busy                                   │
//	   └──────────────────────────┘◀──────── lost / resigned / drained ───────────┘
//
// follower: waiting, at no cost, for a claim to be queued by a wake-up above (or at
// session start). claiming: the scope is in a claim batch (pgleader.claim_scopes:
// pg_try_advisory_lock, then the claim, for every scope of the batch in one
// transaction). pending: this node holds the lock and the new epoch, but its gate
// stays closed until the predecessor can no longer trust its own (below). leader:
// the gate opens and closes with the trust window; the term ends when the session
// is lost, a heartbeat is rejected, the scope is resigned, or Run's context is
// cancelled (drain).
//
// # The gate and the timing inequalities
//
// Knobs: heartbeat interval I, heartbeat timeout T, trust window W, session lease L.
// Config.Validate requires
//
//	I + T < W < L   (and L − W ≥ 100 ms)
//
// A heartbeat that starts at monotonic time s and succeeds within T sets
// trust_until = s + W. The gate of a scope is open iff this node holds the scope's
// term and the monotonic clock, read at the moment of the check, is before
// trust_until. Nothing else opens it, so a process resuming from a pause finds its
// gate closed before any of its goroutines runs anything (S4).
//
//   - I + T < W: heartbeat k+1 starts by s_k + I and succeeds by s_k + I + T, before
//     s_k + W; a healthy leader's gate never blinks.
//   - W < L: the server ends an idle leadership session at the earliest L after its
//     last statement finished, which is after that statement started, so at a time
//     later than s_last + L > s_last + W = trust_until. A frozen or partitioned leader
//     has closed its gate L − W before the server frees its locks and a successor can
//     claim. The keepalives are set so they cannot fire before L either.
//   - A heartbeat that fails or exceeds T closes the gate at once and abandons the
//     session (pgx closes a connection whose query missed its deadline, which sends
//     Terminate and frees the locks).
//
// Safety never depends on a wall clock: durations are local monotonic time; table
// timestamps come from the server and serve observability only.
//
// # No overlap (S5), and why crash failover stays fast
//
// The risky case is a leader whose leadership backend is terminated from outside
// (pg_terminate_backend, a pooler, an operator) while its process lives on: the lock
// is free at once, but the old process may trust its gate until s_last + W. The
// successor therefore must not open its gate until the predecessor provably cannot.
//
// The predecessor's guard lock is that proof. A node holds its guard while any of its
// gates may be open and releases it only after closing them all; the guard session
// dies with the process (kill -9 closes its socket), and with a frozen process (while
// the node leads, it is pinged with every heartbeat and has the same
// idle_session_timeout L; the lease is armed right after a won claim, before the gate
// can open). When a claim finds the previous term not closed cleanly, it reports
// the guards to wait on: the predecessor's, and those of earlier holders carried
// forward in leader_state.unresolved_guards (a successor may die while it waits out
// its predecessor; the next one inherits that debt). Only guards still held are
// kept, since a released guard is final. The successor then waits, in
// pgleader.await_release on its watch connection, until
//
//	every such guard is free                   (process dead, frozen ≥ L, or gates closed), or
//	W_max + margin after its claim returned    (their trust has expired),
//
// whichever comes first. The second bound holds because the predecessor's last
// successful heartbeat started before the server executed it, which was before its
// lock was released, which was before the successor's claim batch took it, which was before
// the claim returned: trust_until_pred < claim_returned + W_pred; the same holds for
// every earlier holder in the chain, whose lock was released earlier still. W_max is
// the largest of their trust windows and ours. The margin (W/50, at least 10 ms)
// covers differences in clock rate between hosts. Once a gate has opened after such a
// wait, the next heartbeat clears unresolved_guards (and a clean release does too).
//
// So: kill -9 → both locks free, the successor opens within a millisecond or two;
// frozen → both sessions expire together after L, same; terminated backend with a
// live process → the predecessor notices through its watcher, closes its gates and
// releases its guard (a millisecond), or, if it is too slow, the successor waits out
// W_pred. A clean release (resign, drain) closes the gate before unlocking and marks
// the term closed in the same transaction, so the successor opens without waiting.
// If the guard session itself is lost, the node treats its leadership session as lost
// too: gates close, both connections are dropped, and it campaigns again.
//
// What is not covered, plainly: if an operator terminates both sessions of a live
// node at the same instant, the successor sees a free guard, exactly as after a crash,
// and may open its gate before the old process has observed its broken sockets
// (normally well under a millisecond). And no lease can protect an action whose gate
// check happened before a process pause and whose effect lands after it (Kleppmann's
// window): only writes fenced in the database (Fence, S3) are safe there. Check
// Token.Valid right before an external side effect, and keep the window short.
//
// # Epochs across a primary failover
//
// A promoted standby may have missed the last epoch bumps of its primary
// (asynchronous replication, or a synchronous commit whose wait was cancelled).
// Each WAL timeline therefore owns the epochs above (timeline − 1)·2^40, and a claim
// bumps from greatest(stored epoch, that floor): a promotion starts a higher
// timeline, so every epoch granted after it is above every epoch granted before it
// (fewer than 2^40 grants of a scope per timeline assumed; no clock involved). The
// schema enforces it: a trigger refuses an epoch at or below the floor, Fence
// refuses a token at or below it (a term of the old primary is over), and a standby
// cannot compute a floor, so it never grants. For the engine a failover is a lost
// session like any other: gates close within the trust window, the node reconnects
// through its DSN (use a multi-host DSN with target_session_attrs=read-write, or a
// read-write endpoint), Run waits out a database in transition, and
// the new session claims anew on the new primary. See docs/ha.md.
//
// # Lease mode
//
// Behind a transaction pooler, session locks do not hold (Start refuses lock mode
// there with ErrPooler; docs/poolers.md). In lease mode (Config.Mode = ModeLease)
// a node has one connection, every statement its own transaction, and no guard,
// beacon or ring. A scope's row is the lease; lease_seq counts its changes.
//
//	FOLLOWING  each heartbeat reads the followed rows. Free: claim now. Held at
//	           lease_seq q: remember when a heartbeat first returned q (o); a
//	           newer q' restarts the watch. At o + L (a timer) with q unchanged:
//	           claim, expecting q.
//	CLAIM      lease_claim_scopes: the row is free, or still at lease_seq q and
//	           expired in server time — tested and locked in one statement — then
//	           epoch + 1, lease_seq + 1. The gate opens at once.
//	LEADING    each heartbeat renews the row (lease_seq + 1) if holder, epoch and
//	           token are still this node's; the gate stays open until the start of
//	           the last renewal that returned ok plus W. ok = false: the term ends.
//	RELEASE    gate closed and fenced writers drained first, then the row is freed.
//
// Timing, besides I + T < W < L: a holder's renewal that set q started at s ≤ the
// commit ≤ o, so its gate closed at s + W < o + L, before any claim expecting q:
// the old gate closes at least L − W before the new one opens, with clocks whose
// rates differ by less than (L − W)/L over a lease (docs/design.md §4b has the
// proof). A release is noticed within I (no notifications through a pooler), a
// crash within L + I of the holder's last renewal. A scope runs in one mode:
// ErrModeConflict at Start when a live node of the other mode campaigns for it.
// docs/poolers.md says which mode to choose for PgBouncer, RDS Proxy, Supavisor,
// pgcat and the pooled endpoints of managed services.
//
// # Fencing (S3)
//
// Fence calls pgleader.fence(scope, epoch, holder) in the caller's transaction. It
// locks the scope's leader_state row FOR KEY SHARE until commit: a successor's claim
// (FOR UPDATE) waits for the transaction, and a write that arrives after the claim
// sees the new epoch and fails with ErrFenced. KEY SHARE does not conflict with the
// heartbeat's non-key UPDATE, so application transactions never delay heartbeats.
// The fence also sets idle_in_transaction_session_timeout = L for the rest of the
// transaction: a fenced transaction left open by a frozen client is ended by the
// server like the client's leadership session, so it cannot block a failover.
// A busy one (a long statement) is not idle: a successor whose claim has found the
// scope's row held by fenced transactions for the trust window W ends them
// (pgleader.end_fenced: only while no session leads the scope; audited with pid
// and login; the owner role needs pg_signal_backend). Termination aborts
// the transaction, so S3 holds: every fenced write that committed did so while its
// epoch was current.
//
// # Observing
//
// Elector.Observe is the one way to watch an Elector, and Event its one
// vocabulary: the fine-grained events of the --events file (acquired, gate_open,
// heartbeat_ok, gate_closed, lost, resigned, leader_observed; a heartbeat is
// one event per round trip, followers' included, listing the terms it
// confirmed) and a service's view of a term, elected (its gate opened for the
// first time; Event.Token is the term's) and revoked (an elected term ended).
// By default an observer runs on a goroutine of its own and events reach it
// through a queue (4096; beyond that they are dropped and counted in
// Event.Dropped), so a slow observer cannot delay a heartbeat, as raft's
// observers. With Synchronous, the engine calls it before it goes on, and it
// must not block: the events file of `pgleader node --events` needs that order
// (an event is on file before the engine acts on it), and package
// electionprom's metrics stay consistent with the API (atomic adds, no I/O).
package election
