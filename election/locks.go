// Locks of package election, and the order in which they may be held together.
// (Not the package doc: a blank line separates this comment from the clause.)
//
// Every sync.Mutex of the package, what it guards:
//
//	session.termsMu   session.terms, watches, leaseTimer
//	batchQueue.mu     the queued claims, releases and announcements, closed
//	endedNodes.mu     the nodes whose leadership session was seen to end (ended.go)
//	Scope.cmu         the campaign's claim state: following, queued, rewoken, outcome
//	Scope.obsMu       observedHolder, observedEpoch
//	leaseWatch.mu     a followed scope's lease watch (lease mode)
//	term.mu           the term's gate: allowOpen, lastHB, period, inflight, idle,
//	                  ended, reason, clean (and writes of draining)
//	ring.mu           ring.peer, stale, read, bell, waits, a guard wait's deadline
//	Elector.sessMu    Elector.sess, sessReady
//	observers.mu      changes to the observer list (emitting reads it without a lock;
//	                  a queued observer's queue is a channel, never waited on)
//	broker.mu         the subscribers, closed
//	subscriber.mu     a subscriber's queue
//	manualDriver.mu   electiontest's epochs, ctx, closed, served
//
// The connections have owners, not mutexes: the leadership connection (lead)
// belongs to leadLoop once the session is shared, and every statement on it is a
// leadDo request run there, one at a time (claim, release, heartbeat,
// markStopped, nameBlockers, endFenced: each a whole round trip); the guard
// connection belongs to guardLoop (guardDo); the watch connection to the ring's
// loop (ring.go). close closes lead and guard after those loops have returned.
//
// Nesting (held → taken), every place two are held at once:
//
//	batchQueue.mu → Scope.cmu       requestClaims → Scope.queueClaim
//	broker.mu     → subscriber.mu   broker.publish
//
// So the order is batchQueue.mu, then Scope.cmu; and broker.mu, then
// subscriber.mu. Every other mutex is a leaf: nothing else is taken while it is
// held. A new nesting must follow this order, and be added here.
//
// Locks taken in a leadDo request (on leadLoop, nothing held): endedNodes.mu and
// Scope.obsMu (runClaims → lockMode.claim → retryEnded → ended.justEnded,
// Scope.observed), leaseWatch.mu (runClaims → leaseMode.claim → runLeaseClaims →
// lease.expected, reset); each is a leaf, taken and let go within the request.
//
// Waits that count as nesting. A request never waits for leadLoop: not through
// leadDo (a request in a request would wait for itself), nor through close
// (which waits for leadLoop to return); lose does not wait for it (it closes the
// socket under a statement in flight), so a request may lose the session, and
// the ones that do so call it on a goroutine of its own (go s.lose).
// The heartbeat's request waits for guardBeat while leadLoop is busy with it:
// guardLoop runs guardBeat under session.termsMu, and guardLoop never waits for
// leadLoop (no guardDo request, nor anything guardLoop calls, sends a leadDo
// request; its lose does not wait for leadLoop), so that wait closes no cycle;
// it is also bounded by the heartbeat's deadline and by the session's loss
// (guardDo gives up on either). termsMu must never be held while waiting for
// leadLoop (close and runClaims take it before or after their request, never
// across it).
//
// Modes (mode.go) add no mutex but manualDriver.mu. The sessionMode methods
// claim, releaseQuery and stopped run in a leadDo request (claim takes
// endedNodes.mu, Scope.obsMu or leaseWatch.mu in it, as listed above; the
// warm-up calls the lock mode's claim and release statements on lead before the
// session is shared and leadLoop started, from the opening goroutine); heartbeat
// sends one leadDo request for its round trip; open, beforeClaim, armGuard and
// awaitPredecessors run outside leadLoop, with no lock held.
// A new mode keeps to the same order.
//
// Callbacks under a lock: term.mu is held while openPeriodLocked and
// closePeriodLocked emit gate_open and gate_closed, so synchronous observers
// (Observe with Synchronous) run with it held and must not enter the term (Scope.Do, Scope.Lead) on the same
// goroutine; Token.Valid takes no lock. The test hook testHooks.retryWait runs
// in a leadDo request, on leadLoop: it must not wait for the leadership
// connection (a heartbeat, a claim, a release) to answer.

package election
