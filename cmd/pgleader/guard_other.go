//go:build !linux

package main

// runGuard: only Linux has pgleader run, and so its guard.
func runGuard([]string) (int, bool) { return 0, false }
