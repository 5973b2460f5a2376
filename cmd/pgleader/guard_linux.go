package main

import "github.com/pgleader/pgleader/supervisor"

// runGuard runs this process as the guard of pgleader run's child
// (supervisor/guard.go) when args say so, and returns its exit code; ok is
// false for every other command line. Nothing else may start in the process
// before it.
func runGuard(args []string) (code int, ok bool) {
	if len(args) > 2 && args[1] == supervisor.GuardArg && args[2] == "--" {
		return supervisor.RunGuard(args[3:]), true
	}
	return 0, false
}
