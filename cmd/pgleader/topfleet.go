package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/operator"
	"github.com/pgleader/pgleader/tui"
)

// topFleetHelp is the paragraph of top's help on several databases.
const topFleetHelp = `With several databases (--target repeated, or --all-targets) top shows them
all in one view: a DATABASE column, a header that counts the verdicts per
database ("orders ✖ UNREACHABLE 14s │ billing 998 ✔ · 2 ✖ │ …"), and d to
pick one database for every pane, or all of them; / and p work across all of
them. Each database is read on its own: one that cannot be read, or
reads too slowly, is shown unreachable with its last-known state greyed and its
age, never as NO LEADER, and never holds up the others. [ replays them all,
--at TIME opens at a past moment of every database (see above).`

// topFleetOptions are top's settings that a fleet's dashboard uses.
type topFleetOptions struct {
	allowActions bool
	once         bool
	output       string
	width        int
	at           time.Time // --at: replay this moment (zero: live)
	ui           tui.Options
	collector    func(t cli.Target) (*collector.Collector, error)
}

// topFleet runs the dashboard (or --once) over several named databases: a
// collector per database, merged by a collector.Fleet; actions go to the
// operator of the scope's database, which acts on its collector's snapshots. --once exits 6 when a database could
// not be read, as status does.
func (a *app) topFleet(ctx context.Context, ts []cli.NamedTarget, o topFleetOptions) error {
	replayers := make(tui.ReplayFleet, len(ts))
	for i, t := range ts {
		replayers[i] = tui.DatabaseReplayer{Database: t.Name, Replayer: topReplayer{t.Config}}
	}
	if !o.at.IsZero() {
		hist, err := a.fleetHistory(ctx, ts, o.at)
		if err != nil {
			return err
		}
		if o.once {
			return a.fleetReplayOnce(hist, o)
		}
		o.ui.ReplayFrom, o.ui.ReplayAt = hist, o.at
	}
	members := make([]collector.FleetMember, 0, len(ts))
	names := make([]string, 0, len(ts))
	ops := map[string]*operator.Operator{} // with --allow-actions: by database
	for _, t := range ts {
		c, err := o.collector(t.Target)
		if err != nil {
			return cli.ForTarget(t.Name, err)
		}
		members = append(members, collector.FleetMember{Name: t.Name, Collector: c})
		names = append(names, t.Name)
		if o.allowActions {
			if ops[t.Name], err = newOperator(t.Target, c.Snapshot, quietLogger()); err != nil {
				return cli.ForTarget(t.Name, err)
			}
		}
	}
	fleet, err := collector.NewFleet(members, collector.FleetConfig{})
	if err != nil {
		return err
	}
	if o.once {
		pctx, cancel := context.WithTimeout(ctx, targetTimeout)
		defer cancel()
		snap, _ := fleet.Poll(pctx) // an unreachable database is in it, as such
		if o.width == 0 {
			o.width = terminalWidth()
		}
		if err := tui.RenderOnce(a.stdout, snap, nil, o.output, o.width); err != nil {
			return err
		}
		// As status: a database that cannot be read is said on stderr, and
		// exits 6 once the others are printed.
		failed := false
		for _, d := range snap.Databases {
			if !d.Up() {
				fmt.Fprintln(a.stderr, a.targetError(d.Name, errors.New(d.Reason)))
				failed = true
			}
		}
		if failed {
			return &cli.StatusError{Code: cli.ExitUnreachable}
		}
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fleet.Run(runCtx) }()
	opts := o.ui
	opts.Database = plural(len(ts), "database") + ": " + strings.Join(names, ", ")
	opts.Replay = replayers
	if o.allowActions {
		opts.Actions = tui.ActionsByDatabase(func(db string) tui.Actions {
			if op := ops[db]; op != nil {
				return topActions{op}
			}
			return nil
		})
	}
	err = tui.Run(ctx, fleet, opts)
	cancel()
	if rerr := <-done; rerr != nil {
		// A database whose collector failed (e.g. --source logical where it
		// cannot stream) was shown unreachable with its error; say it again.
		return errors.Join(err, collectorError(rerr))
	}
	return err
}

// redactedError is an error whose text has the secrets taken out; it unwraps to
// the original (which exit code it means), whose text is never printed.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// fleetHistory reads the window of history around at of every database, in
// parallel: a database that cannot be read is in it with its error (the
// dashboard shows it unreachable). It fails when none can be read.
func (a *app) fleetHistory(ctx context.Context, ts []cli.NamedTarget, at time.Time) ([]tui.DatabaseHistory, error) {
	results := readTargets(ctx, ts, func(ctx context.Context, t cli.NamedTarget) (*replay.History, error) {
		return readHistory(ctx, t.Config, at)
	})
	out := make([]tui.DatabaseHistory, len(results))
	var errs []error
	for i, r := range results {
		out[i] = tui.DatabaseHistory{Database: r.target.Name, History: r.value}
		if r.err != nil {
			out[i].History = nil
			out[i].Err = redactedError{cli.Message(r.err, a.secrets...), r.err}
			errs = append(errs, cli.ForTarget(r.target.Name, r.err))
		}
	}
	if len(errs) == len(ts) {
		return nil, errs[0] // the same for all, mostly (a TIME in the future: bad input)
	}
	return out, nil
}

// fleetReplayOnce prints the replayed moment of a fleet (top --at --once): as
// live --once, a database whose history could not be read is said on stderr,
// and once the others are printed it exits 6 (could not be reached) or 1.
func (a *app) fleetReplayOnce(hist []tui.DatabaseHistory, o topFleetOptions) error {
	if o.width == 0 {
		o.width = terminalWidth()
	}
	snap, events := tui.Replayed(hist, o.at, onceReplayEvents)
	names := make([]string, len(hist))
	for i, h := range hist {
		names[i] = h.Database
	}
	snap.Health.Database = plural(len(hist), "database") + ": " + strings.Join(names, ", ")
	if err := tui.RenderOnce(a.stdout, snap, events, o.output, o.width); err != nil {
		return err
	}
	code := 0
	for _, h := range hist {
		if h.Err != nil {
			fmt.Fprintln(a.stderr, a.targetError(h.Database, h.Err))
			c := cli.ExitFailure
			if cli.Unreachable(h.Err) {
				c = cli.ExitUnreachable
			}
			code = max(code, c)
		}
	}
	if code != 0 {
		return &cli.StatusError{Code: code}
	}
	return nil
}
