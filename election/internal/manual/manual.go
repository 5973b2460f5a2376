// Package manual connects package electiontest to the engine: package election
// sets Hook, which makes an Elector whose terms are granted and taken by hand (no
// database), and electiontest wraps it for users' tests. Nothing else uses it.
package manual

// Driver grants and ends the terms of a manual Elector.
type Driver interface {
	Lead(scope string) error
	Lose(scope, reason string) error
	Elsewhere(scope, node string) error
	Epoch(scope string) int64
}

// Hook makes a manual Elector from an election.Config (cfg) and returns it
// (*election.Elector) with its Driver. Set by package election.
var Hook func(cfg any) (elector any, d Driver, err error)
