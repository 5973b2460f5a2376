//go:build pgleader_lab

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/conformance"
)

func (a *app) conformanceCommand() *cobra.Command {
	var (
		node     string
		self     bool
		seed     int64
		rounds   int
		faults   []string
		jsonPath string
		keep     bool
		refArgs  string
	)
	cmd := &cobra.Command{
		Use:   "conformance --node 'COMMAND {id} {scope} {dsn} {events}' | --self-check",
		Short: "Check a node written in another language against the protocol, beside pgleader node processes",
		Long: `conformance runs a node implementation of the SQL protocol written outside pgleader
(the "foreign" node: docs/protocol.md is its specification) beside two
` + "`pgleader node`" + ` processes on one scope, every node doing fenced writes, and
applies the faults that concern it: kill -9, SIGTERM, SIGSTOP, its session
terminated, a PostgreSQL restart, pgleader resign, a handover from it and to it, and
takeovers by it from a reference node that crashed or froze. Then it checks the
history as chaos does:

  H1 each epoch granted at most once, to one node
  H2 epochs strictly increase and never regress
  H3 every accepted fenced write carries the epoch current at its commit
  H4 its writer held that epoch
  H5 acknowledged writes appear exactly once, rejected ones never, unknown at most once

plus: no two gates open at once; after each fault the node that must lead next
does; the foreign node's own releases carry the protocol's reasons (shutdown,
resigned, handed_over) and it exits 0 after SIGTERM; it campaigns again after every
fault; its events file keeps the contract; takeovers happen in both directions.

--node is the foreign node's command line, split as a shell splits words (no shell
runs it), with {id}, {scope}, {dsn} and {events} replaced; DATABASE_URL is set too.
Its obligations — the flags it takes, the events it writes, the fenced writes
into pgleader.demo_actions — are in docs/protocol.md §16; docs/conformance.md says
how to read a failure. --self-check runs the kit against this binary's own
pgleader node (the kit's check of itself).

Faults: ` + strings.Join(conformance.Names(), ", ") + `.
Without --dsn or DATABASE_URL it starts a throwaway PostgreSQL (needed by
pg-restart); with one, pg-restart is skipped and the verdict says so. Exit status
1 when the node is not conformant.`,
		Example: `  pgleader-lab conformance --node 'python3 examples/python-native/pgleader_native.py --id {id} --scope {scope} --dsn {dsn} --events {events}'
  pgleader-lab conformance --self-check --rounds 1 --json conformance.json`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if self == (node != "") {
				return cli.BadInput("give either --node 'COMMAND {id} {scope} {dsn} {events}' (the node to check) or --self-check (this binary's pgleader node)")
			}
			for _, f := range faults {
				if !contains(conformance.Names(), f) {
					return cli.BadInput("unknown --fault %q; choose from %s", f, strings.Join(conformance.Names(), ", "))
				}
			}
			if rounds < 1 || rounds > 100 {
				return cli.BadInput("--rounds %d: give 1 to 100", rounds)
			}
			if !cmd.Flags().Changed("seed") {
				seed = time.Now().UnixNano() % 1_000_000
			}
			if self {
				bin, err := os.Executable()
				if err != nil {
					return err
				}
				node = fmt.Sprintf("'%s' node --id {id} --scope {scope} --dsn {dsn} --events {events} %s",
					strings.ReplaceAll(bin, "'", `'\''`), strings.Join(conformance.RefArgs, " "))
			}
			tmpl, err := conformance.ParseTemplate(node)
			if err != nil {
				return cli.BadInput("%v", err)
			}
			return a.withHarness(cmd, "conformance", keep, func(ctx context.Context, h *harness) error {
				fmt.Fprintf(a.stderr, "conformance: seed %d, %d rounds per fault, foreign node: %s\n", seed, rounds, tmpl)
				rep, runErr := conformance.Run(ctx, conformance.Options{Bin: h.bin, Node: tmpl, DSN: h.dsn, Server: h.srv,
					Dir: h.dir, Seed: seed, Rounds: rounds, Faults: faults, RefArgs: strings.Fields(refArgs), Progress: a.stderr})
				fmt.Fprintln(a.stdout)
				conformance.WriteReport(a.stdout, rep)
				if err := writeJSON(jsonPath, rep); err != nil {
					return err
				}
				if runErr != nil {
					return runErr
				}
				if !rep.OK() {
					return fmt.Errorf("conformance: not conformant (seed %d)", seed)
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "the foreign node's command line, with {id}, {scope}, {dsn} and {events}")
	f.BoolVar(&self, "self-check", false, "check this binary's pgleader node instead (the kit's check of itself)")
	f.Int64Var(&seed, "seed", 0, "seed of the scopes and choices (default: random, printed)")
	f.IntVar(&rounds, "rounds", 2, "times each fault strikes")
	f.StringArrayVar(&faults, "fault", nil, "fault to apply; repeat for several (default: all)")
	f.StringVar(&jsonPath, "json", "", "also write the verdicts as JSON to `FILE`")
	f.BoolVar(&keep, "keep", false, "keep the nodes' events files and logs (the path is printed)")
	f.StringVar(&refArgs, "ref-args", "", "extra flags for the reference pgleader node processes")
	return cmd
}
