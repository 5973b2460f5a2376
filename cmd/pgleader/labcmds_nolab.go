//go:build !pgleader_lab

package main

import (
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
)

// labCommands: the shipped binary has none but conformance's pointer to the
// lab binary.
func (a *app) labCommands() []*cobra.Command {
	return []*cobra.Command{a.movedToLab("conformance")}
}

// The fault lab (chaos, with toxiproxy) and the benchmarks are built into
// pgleader-lab only: they would double the production binary's dependencies
// for commands no production host runs. Their names stay here, hidden, so that
// a script or a doc that runs them learns in one line where they went.
func (a *app) benchCommand() *cobra.Command { return a.movedToLab("bench") }
func (a *app) chaosCommand() *cobra.Command { return a.movedToLab("chaos") }

// movedToLab is a hidden command that takes any arguments and exits 2 naming
// the binary that has it.
func (a *app) movedToLab(name string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              name + " lives in pgleader-lab",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: a.runE(func(*cobra.Command, []string) error {
			return cli.BadInput("%s is in the lab binary, not this one: run `pgleader-lab %s …` (make build-lab builds bin/pgleader-lab; releases ship it as the pgleader-lab archive)", name, name)
		}),
	}
}
