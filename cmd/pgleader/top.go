package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/operator"
	"github.com/pgleader/pgleader/tui"
)

func (a *app) topCommand() *cobra.Command {
	var (
		interval     time.Duration
		allowActions bool
		evictStale   bool
		once         bool
		output       string
		width        int
		noColor      bool
		theme        string
		source       sourceFlags
		targets      targetFlags
		at           string
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "The on-call dashboard: every scope's leader, heartbeat, history, events and alerts, live",
		Long: `top opens a terminal dashboard over the collector: one verdict per scope in the
header (✔ OK, ▲ DEGRADED, ✖ NO LEADER, ‼ SPLIT BRAIN, and · IDLE for a scope nobody
is meant to lead: its candidates stopped cleanly), an alert banner with what to do
first, the scopes (a pending handover shows as "node-a → node-c") and nodes (with
their priority: 0 never leads), a timeline of terms with their failover gaps, and
a live event log. Enter on a scope or a node shows its detail. ? lists every
key (type to search it); q quits.

With more scopes than fit on one line (or more than 16) the header counts them
per verdict and names only those in trouble, neither OK nor IDLE ("998 ✔ OK ·
2 · IDLE · 2 ✖ NO LEADER │ ✖ scope-0011 ✖ scope-0500"), then the retired scopes
("3 retired"); PgUp/PgDn and Home/End page the tables, / filters by substring and
p keeps the problems.

It is read-only unless --allow-actions, which enables three actions on the
selected scope, each after a y/N confirmation and audited:
  R  resign gracefully through the database: the leader drains in-flight work,
     releases, and a follower takes over, usually within one heartbeat interval
     (needs only the pgleader tables; the leader must be alive to see it);
  x  evict: terminate the leader's session; a follower takes over at once and
     in-flight work is cut off (for a zombie that no longer heartbeats; needs
     pg_signal_backend or the leader's role);
  O  hand the scope over to its best eligible follower (live, highest priority,
     then node id), which the question names: like pgleader handover SCOPE --to
     NODE, given up and withdrawn after 10s (needs the operator role).

--once prints one frame (-o text) or the snapshot (-o json) and exits, for scripts
and bug reports. NO_COLOR=1 or --no-color renders without colours. --theme light or
dark picks colours readable on that background; auto (the default) asks the
terminal for its background, and until it answers uses colours that read on a
light and on a dark one alike.

` + sourceHelp + `

` + targetsHelp + `

` + replayHelp + ` The dashboard opens in replay mode under a REPLAY
banner; [ and ] step to the previous and next transition (reading further
history past the hour read on either side), L goes live; no action and no
fault key acts while replaying. Live, [ enters replay at the last transition.
Over several databases each one's history is read, the rows name their
database, and [ and ] step through the transitions of all of them; a
database whose history cannot be read shows as unreachable. With --once it
prints that moment (-o json: the snapshot's replay object says what is not
rebuilt).

` + topFleetHelp,
		Example: `  pgleader top --dsn postgres://ops@db:5432/app
  pgleader top --once -o text > frame.txt
  pgleader top --allow-actions
  pgleader top --at 2026-11-27T03:12:04.250Z
  pgleader top --all-targets`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return cli.BadInput("-o/--output must be text or json (got %q)", output)
			}
			th, err := tui.ParseTheme(theme)
			if err != nil {
				return cli.BadInput("--%v", err)
			}
			if interval < 100*time.Millisecond || interval > time.Minute {
				return cli.BadInput("--interval must be between 100ms and 1m (got %v)", interval)
			}
			if !once && !isTerminal(os.Stdout) {
				return cli.BadInput("the dashboard needs a terminal: run it in one, or use --once")
			}
			var when time.Time
			if at != "" {
				if when, err = parseAt("at", at, time.Now()); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			ts, err := a.topTargets(&targets)
			if err != nil {
				return err
			}
			if len(ts) > 1 {
				if source.slot != "" {
					return cli.BadInput("--slot names one replication slot, and two databases of one server cannot share it: give --slot with a single --target, or leave it out (temporary slots)")
				}
				return a.topFleet(ctx, ts, topFleetOptions{allowActions: allowActions, once: once, output: output, width: width,
					at: when, ui: tui.Options{NoColor: noColor, Theme: th},
					collector: func(t cli.Target) (*collector.Collector, error) {
						return newCollector(t, interval, evictStale, quietLogger(), source)
					}})
			}
			t, err := a.topTarget(ctx, ts)
			if err != nil {
				return err
			}
			var hist []tui.DatabaseHistory
			if at != "" {
				h, err := readHistory(ctx, t.Config, when)
				if err != nil {
					return err
				}
				hist = []tui.DatabaseHistory{{History: h}}
				if once {
					if width == 0 {
						width = terminalWidth()
					}
					snap, events := tui.Replayed(hist, when, onceReplayEvents)
					snap.Health.Database = redacted(t)
					return tui.RenderOnce(a.stdout, snap, events, output, width)
				}
			}
			col, err := newCollector(t, interval, evictStale, quietLogger(), source)
			if err != nil {
				return err
			}
			if once {
				snap, err := col.Poll(ctx)
				if err != nil {
					return err
				}
				if width == 0 {
					width = terminalWidth()
				}
				return tui.RenderOnce(a.stdout, snap, nil, output, width)
			}
			opts := tui.Options{Database: redacted(t), NoColor: noColor, Theme: th,
				Replay: topReplayer{t.Config}, ReplayFrom: hist, ReplayAt: when}
			if allowActions {
				op, err := newOperator(t, col.Snapshot, quietLogger())
				if err != nil {
					return err
				}
				opts.Actions = topActions{op}
			}
			runCtx, cancel := context.WithCancel(ctx)
			uiCtx, stopUI := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				err := col.Run(runCtx)
				if err != nil {
					stopUI() // e.g. --source logical on a database without it
				}
				done <- err
			}()
			err = tui.Run(uiCtx, col, opts)
			cancel()
			stopUI()
			if rerr := <-done; rerr != nil {
				return collectorError(rerr)
			}
			return err
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&interval, "interval", time.Second, "poll interval (+/- change it live)")
	f.BoolVar(&allowActions, "allow-actions", false, "enable R (graceful resign through the database), x (evict: terminate the leader's session) and O (hand the scope over to its best follower); each asks y/N")
	f.BoolVar(&evictStale, "evict-stale", false, "terminate a zombie leader's session after a safe delay (audited; needs pg_signal_backend)")
	f.BoolVar(&once, "once", false, "print one frame and exit")
	f.StringVarP(&output, "output", "o", "text", "with --once: text or json")
	f.IntVar(&width, "width", 0, "with --once -o text: frame width (default: the terminal's, else 120)")
	f.BoolVar(&noColor, "no-color", false, "no colours (also: NO_COLOR=1)")
	f.StringVar(&theme, "theme", "auto", "colours for the terminal's background: light, dark or auto (ask the terminal)")
	f.StringVar(&at, "at", "", "open at the past moment `TIME`, rebuilt from history (RFC 3339, local 2006-01-02 15:04:05[.000], or -15m; see above)")
	source.register(cmd)
	targets.register(cmd)
	return cmd
}

// onceReplayEvents is how many events top --at --once prints.
const onceReplayEvents = 50

// topTargets are the named databases of top (nil: --dsn's, as before).
func (a *app) topTargets(f *targetFlags) ([]cli.NamedTarget, error) {
	if !f.named() && f.config == "" {
		return nil, nil
	}
	return a.targets(f)
}

// topTarget is the database of a dashboard over one database: --dsn's (ts
// nil), or the one --target names, checked. Several go to topFleet.
func (a *app) topTarget(ctx context.Context, ts []cli.NamedTarget) (cli.Target, error) {
	if ts == nil {
		return a.checkedTarget(ctx)
	}
	return ts[0].Target, cli.ForTarget(ts[0].Name, dbcheck.Database(ctx, ts[0].Config, migrations.Latest))
}

// topHandoverTimeout is how long a handover asked from the dashboard waits for
// its target to lead before the request is withdrawn: well within the
// dashboard's bound on one action, so the withdrawal runs before it gives up.
const topHandoverTimeout = 10 * time.Second

// topActions are the dashboard's operator actions on the database of the
// collector it shows: Evict and Resign as they are, Handover with
// topHandoverTimeout.
type topActions struct{ *operator.Operator }

var _ tui.Actions = topActions{}

func (a topActions) Handover(ctx context.Context, scope, to, via string) error {
	_, err := a.Operator.Handover(ctx, scope, to, via, topHandoverTimeout)
	return err
}

func terminalWidth() int {
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col >= 60 {
		return int(ws.Col)
	}
	return 120
}

// redacted names the target database for a header, without a password.
func redacted(t cli.Target) string {
	c := t.Config
	return c.Database + " @ " + c.Host + ":" + itoa(int(c.Port))
}
