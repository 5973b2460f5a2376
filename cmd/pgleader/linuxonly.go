package main

import (
	"runtime"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
)

// platform is the operating system this binary runs on. Tests set another to
// see what a build for it does (TestLinuxOnlyCommands); nothing else changes it.
var platform = runtime.GOOS

// linuxOnly are the commands that need a Linux facility, with what they need
// it for. Elsewhere (a darwin build) they refuse in one line, exit 2; every
// other command works there. The node works too: without POLLRDHUP
// (election/watch_other.go) it learns of a closed leadership session from its
// next heartbeat instead of at once, which the trust window already covers.
var linuxOnly = map[string]struct{ short, needs string }{
	"run": {"Run a command only while this node leads a scope (Linux only)",
		"its guard ties the child's life to the supervisor's (PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG: supervisor/guard.go)"},
	"demo": {"Run a local cluster you can break and watch heal (Linux only)",
		"its throwaway PostgreSQL and nodes die with it (PR_SET_PDEATHSIG: lab/pgserver, lab/cluster)"},
}

// linuxOnlyCommand is command name as a build for another system has it:
// any arguments, one line naming what it needs, exit 2.
func (a *app) linuxOnlyCommand(name string) *cobra.Command {
	lo := linuxOnly[name]
	return &cobra.Command{
		Use:                name,
		Short:              lo.short,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: a.runE(func(*cobra.Command, []string) error {
			return cli.BadInput("%s needs Linux and this is %s: %s; run it on a Linux host (status, history, top and the other commands work here)", name, platform, lo.needs)
		}),
	}
}

// onlyOnLinux replaces root's Linux-only commands by their refusals when this
// is not Linux: a build for another system has no other (linuxonly_other.go),
// and a test that sets platform sees the same.
func (a *app) onlyOnLinux(root *cobra.Command) {
	if platform == "linux" {
		return
	}
	for _, c := range root.Commands() {
		if _, ok := linuxOnly[c.Name()]; ok {
			root.RemoveCommand(c)
			root.AddCommand(a.linuxOnlyCommand(c.Name()))
		}
	}
}
