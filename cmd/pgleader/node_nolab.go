//go:build !pgleader_lab

package main

import "github.com/spf13/cobra"

// labBuild reports a lab build; this is the production one: `pgleader node` has
// no --test-* flags, and chaos and bench are in pgleader-lab.
const labBuild = false

// addHookFlags registers nothing: the shipped node has no fault-test hooks.
func addHookFlags(*cobra.Command, *nodeHooks) {}
