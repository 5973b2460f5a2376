//go:build !linux

package bench

import "time"

// exitWatch times process exits where the system has pidfds (Linux); elsewhere
// it times nothing, and the split reports the server's timestamps only.
type exitWatch struct{}

func watchExits(map[string]int) *exitWatch { return &exitWatch{} }

func (*exitWatch) wait(time.Duration) map[string]int64 { return nil }
