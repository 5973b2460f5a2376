package protocol

// NotifyChannel is the channel the schema's functions NOTIFY at commit. A payload is
// a JSON object (json_build_object: parse it, do not match it as a string) with an
// "event" field. Anyone who may connect may NOTIFY any channel: a notification is
// a hint to re-read the tables, never a fact.
const NotifyChannel = "leader_change"

// NotifyEvent is the "event" field of a NotifyChannel payload.
type NotifyEvent string

// The events the schema sends on NotifyChannel.
const (
	// NotifyElected: a claim opened a term (scope, epoch, holder).
	NotifyElected NotifyEvent = "elected"
	// NotifyReleased: a holder released a term (scope, epoch, holder, reason; "to"
	// when the scope is reserved for a handover target).
	NotifyReleased NotifyEvent = "released"
	// NotifyResignRequested: an operator asked the holder of a scope to resign.
	NotifyResignRequested NotifyEvent = "resign_requested"
	// NotifyHandoverRequested: an operator asked the holder of a scope to hand it
	// over.
	NotifyHandoverRequested NotifyEvent = "handover_requested"
	// NotifyNodeJoined: a node registered (holder: its node id).
	NotifyNodeJoined NotifyEvent = "node_joined"
	// NotifyNodeLost: a node's leadership session was found gone (holder: its node
	// id); its scopes are free to claim.
	NotifyNodeLost NotifyEvent = "node_lost"
	// NotifyFailover: a claim found a new WAL timeline and raised the epoch floor.
	NotifyFailover NotifyEvent = "failover"
	// NotifyEvicted: an operator terminated a holder's leadership backend.
	NotifyEvicted NotifyEvent = "evicted"
	// NotifyFenceRejected: a fenced write was refused and audited.
	NotifyFenceRejected NotifyEvent = "fence_rejected"
	// NotifyRetired: a scope was retired.
	NotifyRetired NotifyEvent = "retired"
)
