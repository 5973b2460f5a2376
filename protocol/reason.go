package protocol

// Reason says why a term ended or a gate closed. The same vocabulary names the
// release_reason of pgleader.terms (written by the schema's functions), the reason
// of the engine's Revoked transitions and of its gate_closed, lost and resigned
// events, and the reason label of the pgleader_losses_total metric. Compare with the constants;
// Known tells the vocabulary from anything else; Recorded tells the reasons
// pgleader.terms may hold (its CHECK constraint terms_release_reason_check).
type Reason string

// Why terms end and gates close.
const (
	// ReasonResigned: the holder released the term on request (Scope.Resign,
	// pgleader resign, SIGUSR1): a clean release.
	ReasonResigned Reason = "resigned"
	// ReasonShutdown: the holder released the term because it stopped (Run's or
	// Start's context ended): a clean release.
	ReasonShutdown Reason = "shutdown"
	// ReasonHandedOver: the holder released the term to a chosen successor
	// (pgleader handover): a clean release.
	ReasonHandedOver Reason = "handed_over"
	// ReasonLostConnection: the leadership or guard session broke (the server
	// closed it, the network failed, the backend was terminated).
	ReasonLostConnection Reason = "lost_connection"
	// ReasonHeartbeatTimeout: a heartbeat failed or took longer than
	// Config.HeartbeatTimeout, so the node gave up its session. In pgleader.terms:
	// the successor found the holder's heartbeats stopped.
	ReasonHeartbeatTimeout Reason = "heartbeat_timeout"
	// ReasonEvicted: a heartbeat found that the term was no longer this node's (an
	// operator terminated its session, or its lock was taken over).
	ReasonEvicted Reason = "evicted"
	// ReasonCrashed: written by a successor that closed a term its holder never
	// closed (the process died): in pgleader.terms only.
	ReasonCrashed Reason = "crashed"
	// ReasonDatabaseFailover: written by a successor that closed a term whose
	// holder's sessions ended with the database: the server restarted since the
	// holder's last heartbeat, or a standby was promoted (the WAL timeline
	// changed). In pgleader.terms only (schema 14).
	ReasonDatabaseFailover Reason = "database_failover"
	// ReasonClosed: the session was closed as the Elector stopped, with terms the
	// drain could not release.
	ReasonClosed Reason = "closed"
	// ReasonTrustExpired: the gate closed because no heartbeat confirmed the term
	// within the trust window; the term may continue (gate_closed only).
	ReasonTrustExpired Reason = "trust_expired"
)

// reasons is the vocabulary, for Known; true marks the reasons pgleader.terms
// admits, for Recorded.
var reasons = map[Reason]bool{
	ReasonResigned: true, ReasonShutdown: true, ReasonHandedOver: true, ReasonLostConnection: true,
	ReasonHeartbeatTimeout: true, ReasonEvicted: true, ReasonCrashed: true, ReasonDatabaseFailover: true, ReasonClosed: false,
	ReasonTrustExpired: false,
}

// Known reports whether r is one of the Reason constants. Metrics use it to keep
// label values bounded: anything else is reported as "other".
func (r Reason) Known() bool {
	_, ok := reasons[r]
	return ok
}

// Recorded reports whether r is a value pgleader.terms.release_reason admits (the
// CHECK constraint terms_release_reason_check); closed and trust_expired are the
// engine's own and never written there.
func (r Reason) Recorded() bool { return reasons[r] }

// Clean reports whether r ends a term with a release recorded in the database
// (resigned, shutdown, handed_over): its successor may open its gate at once.
func (r Reason) Clean() bool {
	return r == ReasonResigned || r == ReasonShutdown || r == ReasonHandedOver
}
