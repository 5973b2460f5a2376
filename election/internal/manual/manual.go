// Package manual is what package electiontest and the engine share of the manual
// Elector (election's mode_manual.go): the Driver through which a test grants and
// ends terms by hand. Nothing else uses it.
package manual

// Driver grants and ends the terms of a manual Elector.
type Driver interface {
	Lead(scope string) error
	Lose(scope, reason string) error
	Elsewhere(scope, node string) error
	Epoch(scope string) int64
}
