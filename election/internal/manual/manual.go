// Package manual is what package electiontest and the engine share of the manual
// Elector (election's mode_manual.go): the Driver through which a test grants and
// ends terms by hand. Nothing else uses it.
package manual

// New makes a manual Elector: package election sets it when it is initialised
// (mode_manual.go), package electiontest calls it. cfg is an election.Config and
// the Elector an *election.Elector: this package cannot name them (election
// imports it).
var New func(cfg any) (elector any, d Driver, err error)

// Driver grants and ends the terms of a manual Elector.
type Driver interface {
	Lead(scope string) error
	Lose(scope, reason string) error
	Elsewhere(scope, node string) error
	Epoch(scope string) int64
}
