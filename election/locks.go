// Locks of package election, and the order in which they may be held together.
// (Not the package doc: a blank line separates this comment from the clause.)
//
// Every sync.Mutex of the package, what it guards:
//
//	session.mu        statements on the leadership connection (lead): held for a
//	                  whole round trip (claim, release, heartbeat, markStopped,
//	                  nameBlockers, endFenced) and by close
//	session.termsMu   session.terms, watches, leaseTimer
//	batchQueue.mu     the queued claims, releases and announcements, closed
//	endedNodes.mu     the nodes whose leadership session was seen to end (ended.go)
//	Scope.cmu         the campaign's claim state: following, queued, rewoken, outcome
//	Scope.obsMu       observedHolder, observedEpoch
//	leaseWatch.mu     a followed scope's lease watch (lease mode)
//	term.mu           the term's gate: allowOpen, lastHB, period, inflight, idle,
//	                  ended, reason, clean (and writes of draining)
//	ring.mu           ring.peer, stale, read, waits, a guard wait's deadline
//	Elector.sessMu    Elector.sess, sessReady
//	observers.mu      changes to the observer list (emitting reads it without a lock;
//	                  a queued observer's queue is a channel, never waited on)
//	broker.mu         the subscribers, closed
//	subscriber.mu     a subscriber's queue
//	manualDriver.mu   electiontest's epochs, ctx, closed, served
//
// Nesting (held → taken), every place two are held at once:
//
//	session.mu    → endedNodes.mu   runClaims → lockMode.claim → retryEnded → ended.justEnded
//	session.mu    → Scope.obsMu     runClaims → lockMode.claim → retryEnded → Scope.observed
//	session.mu    → leaseWatch.mu   runClaims → leaseMode.claim → runLeaseClaims → lease.expected, reset
//	batchQueue.mu → Scope.cmu       requestClaims → Scope.queueClaim
//	broker.mu     → subscriber.mu   broker.publish
//
// So the order is session.mu, then batchQueue.mu, then Scope.cmu; session.mu,
// then endedNodes.mu, Scope.obsMu or leaseWatch.mu; and broker.mu, then
// subscriber.mu. Every other mutex is a leaf:
// nothing else is taken while it is held. A new nesting must follow this order,
// and be added here.
//
// Waits that count as nesting: heartbeat holds session.mu while it waits for
// guardBeat, which guardLoop runs under session.termsMu; so termsMu must never be
// held while waiting for session.mu (close and runClaims take them one after
// the other, never together).
//
// Modes (mode.go) add no mutex but manualDriver.mu. The sessionMode methods
// claim, releaseQuery and stopped are called with session.mu held (claim takes
// endedNodes.mu, Scope.obsMu or leaseWatch.mu under it, as listed above; the
// warm-up calls the lock mode's claim and release statements before the session
// is shared, without it); heartbeat takes session.mu for its round trip; open,
// beforeClaim, armGuard and awaitPredecessors are called with no lock held.
// A new mode keeps to the same order.
//
// Callbacks under a lock: term.mu is held while openPeriodLocked and
// closePeriodLocked emit gate_open and gate_closed, so synchronous observers
// (Config.Observer, ObserveSync) run with it held and must not enter the term (Scope.Do, Scope.Lead) on the same
// goroutine; Token.Valid takes no lock. The test hook testHooks.retryWait runs
// under session.mu.

package election
