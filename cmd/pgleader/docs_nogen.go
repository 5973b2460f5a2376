//go:build !pgleader_docs

package main

import "github.com/spf13/cobra"

// docsCommands: only a docs build (-tags pgleader_docs) has gen-docs.
func (a *app) docsCommands() []*cobra.Command { return nil }
