//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/supervisor"
	"github.com/pgleader/pgleader/workload"
)

// runFlags are the flags of `pgleader run` beyond those of `pgleader node`.
type runFlags struct {
	node    nodeFlags
	restart string
	once    bool
	wait    time.Duration
	oncePer time.Duration
	onceKey string
	skipped int
}

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --scope NAME [flags] -- COMMAND [ARGS…]",
		Short: "Run a command only while this node leads a scope (any language)",
		Long: `run campaigns like pgleader node for one --scope and runs COMMAND only while
this node leads it, in a process group of its own, with the leadership in its
environment: PGLEADER_SCOPE, PGLEADER_EPOCH, PGLEADER_NODE_ID (and PGLEADER_HOLDER,
PGLEADER_LISTEN with --listen, PGLEADER_RUN_KEY with --once-per). Fence every
write of COMMAND with SELECT pgleader.fence($PGLEADER_SCOPE, $PGLEADER_EPOCH) in
its own transaction (docs/any-language.md).

Leadership ends gently or suddenly:
  - a stop (SIGTERM or SIGINT to run, pgleader resign, pgleader handover, a
    failback): SIGTERM to COMMAND's group, --drain-timeout, then SIGKILL; only
    then is the scope released, so the next leader's COMMAND never overlaps.
  - a loss (heartbeat failure, session terminated, trust window over): SIGKILL
    to the group at once.
If run itself dies (kill -9, OOM), a guard process kills COMMAND's group; if
run is frozen (SIGSTOP), the guard kills it when the trust window ends. A frozen
host freezes both: only the fence keeps its writes out then.

When COMMAND exits while leading, --restart decides: never (default: release
the scope and exit with COMMAND's code), on-failure (restart a non-zero exit
with backoff; exit 0 ends as never) or always.

--once runs COMMAND at most once, if this node wins within --wait (0: only the
first claim round, like flock -n); when another node leads, run exits 0
without running it. Each run is recorded in pgleader.runs (pgleader history says
whether it completed). --once-per PERIOD (implies --once) makes runs of every
host one: a run that completed (exit 0) in the current period (aligned to UTC
midnight for 24h, by the database's clock) is not run again by any host. A run
that failed (or whose host died) did not complete: the next host to win runs it
again. So hosts whose cron fires together with --wait D retry a failed run, one
after the other, while D lasts; with --wait 0 only a later firing retries it.
--once-key KEY does the same for an explicit key.

With --once, run is quiet unless something is wrong: warnings and errors only on
stderr (--log-level info says why a run was skipped); COMMAND's own output is its
own. Exit codes: COMMAND's when it ran; when it was skipped (another node led, or
the period's run had completed), 0 or --skipped-exit N (like flock -E); 2 bad
input; 1 other.`,
		Example: `  pgleader run --scope billing --listen 127.0.0.1:8008 -- ./billing-worker
  pgleader run --scope nightly-report --once-per 24h --wait 0 -- ./report.sh
  pgleader run --scope nightly-report --once-per 24h --wait 30m --skipped-exit 75 -- ./report.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 0 || len(args) == 0 {
				return errors.New("no command: put it after --, e.g. pgleader run --scope nightly -- /usr/local/bin/job")
			}
			return nil
		},
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			f.node.idSet = cmd.Flags().Changed("id")
			if cmd.Flags().Changed("once-per") || cmd.Flags().Changed("once-key") {
				f.once = true
			}
			if cmd.Flags().Changed("wait") && !f.once {
				return cli.BadInput("--wait applies to --once: add --once, or drop --wait")
			}
			if f.once && !cmd.Flags().Changed("log-level") {
				// A cron job mails whatever it prints: on success, nothing.
				log, err := cli.NewLogger(a.stderr, a.logFormat, "warn")
				if err != nil {
					return err
				}
				a.log = log
			}
			return a.runRun(cmd.Context(), &f, args)
		}),
	}
	f.node.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.restart, "restart", string(supervisor.RestartNever), "`POLICY` when COMMAND exits while leading: never (release and exit with its code), on-failure or always (restart with backoff)")
	fl.BoolVar(&f.once, "once", false, "run COMMAND at most once, if this node wins within --wait; exit 0 without running it when another node leads")
	fl.DurationVar(&f.wait, "wait", 0, "with --once: how long to wait for leadership (0: the first claim round only)")
	fl.DurationVar(&f.oncePer, "once-per", 0, "run at most once per `PERIOD` (e.g. 24h) across every host, recorded in the database (implies --once)")
	fl.StringVar(&f.onceKey, "once-key", "", "run at most once per explicit run `KEY` (e.g. a date) across every host, recorded in the database (implies --once)")
	fl.IntVar(&f.skipped, "skipped-exit", 0, "with --once: exit `N` when COMMAND was not run (another node led, or the period's run had completed), to tell it from a run")
	_ = cmd.MarkFlagRequired("scope")
	return cmd
}

// absPath is path made absolute ("" stays ""): the child may change directory.
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// runRun checks everything (the command included) before it campaigns, then
// supervises COMMAND until a signal or the policy ends it.
func (a *app) runRun(parent context.Context, f *runFlags, args []string) error {
	if n := len(f.node.scopes); n != 1 {
		return cli.BadInput("pgleader run takes exactly one --scope (got %d): one command, one scope; run one per scope", n)
	}
	if f.node.workInterval > 0 {
		return cli.BadInput("--work-interval is pgleader node's demo workload; under pgleader run, COMMAND does the work")
	}
	t, lead, cfg, err := a.checkNode(&f.node)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the pgleader binary for the guard process: %w", err)
	}
	scfg := supervisor.Config{
		Scope: cfg.Scopes[0], Command: args, Guard: []string{self, supervisor.GuardArg},
		Restart: supervisor.Restart(f.restart), DrainTimeout: cfg.DrainTimeout,
		Once: f.once, Wait: f.wait, OncePer: f.oncePer, RunKey: f.onceKey, SkippedExit: f.skipped,
		Listen: f.node.listen.addr, Events: absPath(f.node.events), Log: a.log,
	}
	if f.once {
		// Every --once run is recorded (history says how it ended); a key of
		// its own unless a period or a key makes runs of several hosts one.
		scfg.Ledger = &supervisor.Ledger{} // its pool is opened below, after the checks
		if f.oncePer == 0 && f.onceKey == "" {
			scfg.RunKey = "once/" + cfg.NodeID + "/" + time.Now().UTC().Format(time.RFC3339Nano)
		}
	}
	if err := scfg.Check(); err != nil {
		return cli.BadInput("%v", err)
	}
	// The term outlives the command's drain by DrainMargin: SIGKILL at
	// --drain-timeout, release only after the group is gone.
	cfg.DrainTimeout += supervisor.DrainMargin
	// A lost session keeps its guard (so every successor's gate closed) until
	// the child's group is reaped: the next leader's child never overlaps it.
	cfg.HoldGuardOnLoss = supervisor.LossHold
	ln, err := f.node.listen.open()
	if err != nil {
		return err
	}
	ctx, stop := a.signalContext(parent, cfg.NodeID)
	defer stop()
	ns, err := a.setupNode(ctx, &f.node, t, lead, cfg)
	if ns == nil || err != nil {
		closeListener(ln)
		return err
	}
	if ns.events != nil {
		scfg.Recorder = ns.events
	}
	stopHUP := a.reopenOnSIGHUP(ns.events)
	defer stopHUP()
	if scfg.Ledger != nil {
		// The run ledger's connection (never the leadership session's). It
		// connects lazily, and only --once uses it.
		pool, err := workload.NewPool(t.Config, cfg.NodeID, 1, cfg.SessionLease, f.node.leaderDSN != "" || cfg.Mode == election.ModeLease)
		if err != nil {
			closeListener(ln)
			return errors.Join(err, closeEvents(ns.events))
		}
		defer pool.Close()
		scfg.Ledger.Pool = pool
	}
	report, stopReport := supervisor.ReportTo(t.Config, cfg.NodeID, a.log)
	defer stopReport()
	scfg.Report = report
	scfg.RecordExit = supervisor.ExitRecorderTo(t.Config)
	sup, err := supervisor.New(ns.e, scfg)
	if err != nil {
		closeListener(ln)
		return errors.Join(cli.BadInput("%v", err), closeEvents(ns.events))
	}
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	waitAPI := a.serveAPI(apiCtx, ln, &f.node.listen, ns.e, func() any { return sup.Status() },
		func(string) bool { st := sup.Status(); return st.State == "running" && st.PID > 0 })
	defer waitAPI()
	defer stopAPI()

	stopResign := resignOnSIGUSR1(ctx, ns.e, a.log)
	code, runErr := sup.Run(ctx)
	stopResign()
	if err := errors.Join(runErr, closeEvents(ns.events)); err != nil {
		return err
	}
	if code != 0 {
		return &cli.StatusError{Code: code}
	}
	return nil
}
