package protocol

// SQLSTATEs the schema's functions and triggers raise (class PL, pgleader's own).
// Each names the refusal; the message says which scope, node or key.
const (
	// SQLStateFenced (PLF01): pgleader.fence refused a write whose epoch is not the
	// scope's current open term, is at or below the timeline's epoch floor, or whose
	// holder differs. The writer's transaction rolls back.
	SQLStateFenced = "PLF01"
	// SQLStateLockNotHeld (PLF02): claim, or release's unlock, on a backend that
	// does not hold the scope's advisory lock.
	SQLStateLockNotHeld = "PLF02"
	// SQLStateLockKeyMismatch (PLF03): the scope is recorded with another lock_key
	// than the caller computed or than its binding in scope_keys (check_lock_key).
	SQLStateLockKeyMismatch = "PLF03"
	// SQLStateBelowEpochFloor (PLF04): a write of an epoch at or below the epoch
	// floor of the current timeline (trigger check_epoch_floor).
	SQLStateBelowEpochFloor = "PLF04"
	// SQLStateScopeKey (PLF05): session_lock on the lock key of a scope (it takes
	// guard and beacon keys only).
	SQLStateScopeKey = "PLF05"
	// SQLStateNodeLive (PLF06): register_node of a node id that is live under
	// another login role.
	SQLStateNodeLive = "PLF06"
	// SQLStateRefused (PLF07): an operator request the state refuses:
	// request_handover (unknown or retired scope, bad target, timeout),
	// set_lock_key on a held scope, end_fenced on a led scope.
	SQLStateRefused = "PLF07"
	// SQLStateRetireRefused (PLF08): retire_scope of a scope running nodes campaign
	// for, or of an unknown scope.
	SQLStateRetireRefused = "PLF08"
	// SQLStateModeConflict (PLF09): a claim in one mode (lock or lease) of a scope
	// whose live candidates use the other (trigger check_mode).
	SQLStateModeConflict = "PLF09"
	// SQLStateBindingRefused (PLF10): a login role campaigns for a scope bound to
	// roles it is not a member of (refuse_unbound).
	SQLStateBindingRefused = "PLF10"
	// SQLStateOutOfBounds (PLF11): an argument outside the bounds the protocol
	// states: timing (I + T < W < L, L − W ≥ 100 ms, L ≤ 10 minutes), a name
	// (control or invisible characters, quotes in a node id, over 200 bytes), a
	// count or a wait (check_timing, check_name, check_registration).
	SQLStateOutOfBounds = "PLF11"
	// SQLStateNotCaller (PLF12): the calling session is not the one the function
	// acts for: not the registered session of that node (its leadership backend,
	// or its lease token, under its login), not a candidate of that scope, or not
	// the login of that term's holder (caller_node, term_login).
	SQLStateNotCaller = "PLF12"
	// SQLStateFenceKeyHeld (PLF13): fence found the scope's fence key held
	// exclusively by another session, which would hide the fenced transaction
	// from end_fenced; the message names that session.
	SQLStateFenceKeyHeld = "PLF13"
	// SQLStateSessionCap (PLF14): session_lock on a session that holds two keys
	// taken through it already (a guard and a beacon).
	SQLStateSessionCap = "PLF14"
)
