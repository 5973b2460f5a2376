//go:build !linux

package main

import "github.com/spf13/cobra"

// Outside Linux, run and demo are the one-line refusals of linuxOnlyCommand.
func (a *app) runCommand() *cobra.Command  { return a.linuxOnlyCommand("run") }
func (a *app) demoCommand() *cobra.Command { return a.linuxOnlyCommand("demo") }

// reapCommand stands for the demo's hidden reaper child (demo/reaper's Command).
func (a *app) reapCommand() *cobra.Command {
	c := a.linuxOnlyCommand("demo")
	c.Use, c.Hidden = "__reap", true
	return c
}
