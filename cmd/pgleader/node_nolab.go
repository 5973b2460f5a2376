//go:build !pgleader_lab

package main

import "github.com/spf13/cobra"

// labBuild reports a lab build; this is the shipped one: `pgleader node` has no
// --test-* flags, and chaos skips the scenarios that need them.
const labBuild = false

// addHookFlags registers nothing: the shipped node has no fault-test hooks.
func addHookFlags(*cobra.Command, *nodeHooks) {}
