package election

import "github.com/pgleader/pgleader/protocol"

// Reason says why a term ended or a gate closed: protocol.Reason, under the name
// this package has always exported (an alias: the two are one type, and its
// methods Known, Recorded and Clean are protocol's).
type Reason = protocol.Reason

// Why terms end and gates close: protocol's constants, under this package's names
// (each documented in protocol).
const (
	ReasonResigned         = protocol.ReasonResigned
	ReasonShutdown         = protocol.ReasonShutdown
	ReasonHandedOver       = protocol.ReasonHandedOver
	ReasonLostConnection   = protocol.ReasonLostConnection
	ReasonHeartbeatTimeout = protocol.ReasonHeartbeatTimeout
	ReasonEvicted          = protocol.ReasonEvicted
	ReasonCrashed          = protocol.ReasonCrashed
	ReasonDatabaseFailover = protocol.ReasonDatabaseFailover
	ReasonClosed           = protocol.ReasonClosed
	ReasonTrustExpired     = protocol.ReasonTrustExpired
)
