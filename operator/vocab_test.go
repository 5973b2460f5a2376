package operator

import "github.com/pgleader/pgleader/collector"

// The collector's vocabulary under the names its own tests use: the action
// tests came from there and read the same.
type (
	Snapshot = collector.Snapshot
	Event    = collector.Event
)

const (
	AlertNoLeader        = collector.AlertNoLeader
	AlertStaleLeader     = collector.AlertStaleLeader
	EventAlertResolved   = collector.EventAlertResolved
	EventElected         = collector.EventElected
	EventEvictFailed     = collector.EventEvictFailed
	EventEvicted         = collector.EventEvicted
	EventReleased        = collector.EventReleased
	EventResignRequested = collector.EventResignRequested
	VerdictIdle          = collector.VerdictIdle
)
