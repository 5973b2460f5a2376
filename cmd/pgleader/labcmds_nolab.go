//go:build !pgleader_lab

package main

import "github.com/spf13/cobra"

// labCommands: the shipped binary has none.
func (a *app) labCommands() []*cobra.Command { return nil }
