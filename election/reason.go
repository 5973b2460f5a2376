package election

import "github.com/pgleader/pgleader/protocol"

// Reason says why a term ended or a gate closed: protocol.Reason (an alias: the
// two are one type). Its values are protocol's constants (protocol.ReasonResigned,
// protocol.ReasonLostConnection, …), each documented there.
type Reason = protocol.Reason
