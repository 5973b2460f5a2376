package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

func (a *app) statusCommand() *cobra.Command {
	var (
		scopes   []string
		output   string
		watch    bool
		interval time.Duration
		source   sourceFlags
		targets  targetFlags
		at       string
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print who leads each scope, since when, how fresh its heartbeat is, and any alert",
		Long: `status reads pgleader.leader_state, nodes, terms, audit and the advisory locks in
pg_locks once and prints one row per scope: its state, leader, epoch (the fencing
token), tenure, heartbeat age (database time, so no clock skew), followers and
alerts, then the active alerts with what to do first. The table opens with the
count of scopes per state and names the scopes not OK (the first ten), so that
they are found at a glance among a thousand rows; -o json carries the counts as
verdict_counts.

States: OK; IDLE (no leader, and nobody is meant to lead: every candidate stopped
cleanly and no term is left open; not a problem, and pgleader scope retire NAME
takes the scope out of the views); DEGRADED (an alert on the scope, or a late
heartbeat); NO LEADER (no open term with its lock held while someone is meant to
lead); SPLIT BRAIN (the lock holder is not the leader on record, two nodes claim
to lead, or the epoch went backwards). A pending handover shows as the leader's
target ("n1@host → n2"). The nodes follow the scopes, with their priority: a free
scope goes to its live candidate of highest priority, and priority 0 never leads.
Retired scopes are counted, not shown (-o json: retired).

Exit codes, for scripts and health checks:
  0  every scope is OK or IDLE
  1  runtime failure
  2  bad input: flags, connection string, wrong login or password, no such
     database, missing schema
  3  some scope has no leader
  4  some scope has a split brain (the worst: 4 wins over 6, 3 and 5)
  5  every scope is led, but some are DEGRADED (alerts: a late heartbeat, a
     fence rejection, no live follower, …)
  6  a database could not be read (not reached, refused, timed out, shutting
     down or starting, or the connection was lost), with --dsn as with --target;
     6 wins over 3 and 5: an unread database may hide either

Over named targets (--target, --all-targets) each database is read in
parallel: -o table prints a section per database, -o tsv adds a leading target
column, -o json is {"verdict": …, "targets": [{"target": NAME, "status": {the
single database's object}} or {"target": NAME, "error": "…"}]}; the top-level
verdict is the worst of the databases', UNREACHABLE included. A database that
cannot be read says so on stderr, in every format (the table keeps its section,
marked UNREACHABLE), and makes the exit code 6, unless a split brain elsewhere
makes it 4.

With --watch it redraws every --interval until Ctrl-C (exit code of the last frame),
and on every change the collector learns of in between. With --watch:

` + sourceHelp + `

` + targetsHelp + `

` + replayHelp + ` The table opens with a REPLAY line; -o json gains a
replay object (at, db_now, the window read, prev/next transitions, unknown,
notes); -o tsv prints the REPLAY line on stderr. The exit code is the moment's.
Over named targets, --at replays each database at TIME, a section (or status
object) each, as status over targets reads them live.`,
		Example: `  pgleader status
  pgleader status --all-targets
  pgleader status --scope billing -o json
  pgleader status --watch --interval 1s
  pgleader status -o tsv | cut -f1,3
  pgleader status --at '2026-11-27 03:12:04'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(output); err != nil {
				return err
			}
			if interval < 100*time.Millisecond {
				return cli.BadInput("--interval must be at least 100ms (got %v)", interval)
			}
			if err := checkScopes(scopes); err != nil {
				return err
			}
			if at != "" {
				if watch {
					return cli.BadInput("--at shows one past moment: it does not go with --watch")
				}
				when, err := parseAt("at", at, time.Now())
				if err != nil {
					return err
				}
				if targets.named() || targets.config != "" {
					ts, err := a.targets(&targets)
					if err != nil {
						return err
					}
					// Each database's clock refuses a future TIME too; said once
					// here, as bad input, rather than once per database.
					if now := time.Now(); when.After(now.Add(time.Second)) {
						return cli.BadInput("--at %s is in the future (now is %s): give a past moment",
							when.Format(time.RFC3339Nano), now.Format(time.RFC3339))
					}
					ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
					defer stop()
					return a.statusTargets(ctx, ts, scopes, output, source, when)
				}
				return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
					return a.statusAt(ctx, t, when, scopes, output)
				})
			}
			if targets.named() {
				if watch {
					return cli.BadInput("--watch redraws one database: give one --target, or watch a fleet with pgleader top --all-targets")
				}
				ts, err := a.targets(&targets)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return a.statusTargets(ctx, ts, scopes, output, source, time.Time{})
			}
			if targets.config != "" {
				_, err := a.targets(&targets) // says what --config alone lacks
				return err
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				// The report lists every alert; the collector's log would repeat each
				// one on stderr as it "fires" at the first read (a thousand lines at a
				// thousand scopes) and tear the --watch redraw. Errors still come back
				// from Poll and Run.
				c, err := newCollector(t, interval, false, quietLogger(), source)
				if err != nil {
					return err
				}
				if !watch {
					snap, err := c.Poll(ctx)
					if err != nil {
						return err
					}
					return statusExit(writeStatus(a.stdout, snap, scopes, output))
				}
				return a.watchStatus(ctx, c, scopes, output)
			})
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&scopes, "scope", nil, "scope to show; repeat for several (default: all)")
	f.StringVarP(&output, "output", "o", cli.FormatTable, "output `FORMAT`: table, json or tsv")
	f.BoolVarP(&watch, "watch", "w", false, "redraw every --interval until Ctrl-C")
	f.DurationVar(&interval, "interval", 2*time.Second, "refresh interval of --watch")
	f.StringVar(&at, "at", "", "show the past moment `TIME` rebuilt from history (RFC 3339, local 2006-01-02 15:04:05[.000], or -15m; see above)")
	source.register(cmd)
	targets.register(cmd)
	return cmd
}

// watchStatus redraws on every snapshot of a running collector.
func (a *app) watchStatus(ctx context.Context, c *collector.Collector, scopes []string, output string) error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	updates, cancel := c.Updates()
	defer cancel()
	tty := isTerminal(a.stdout)
	worst := collector.VerdictOK
	for {
		select {
		case <-ctx.Done():
			<-done
			return statusExit(worst)
		case err := <-done:
			if err != nil {
				return collectorError(err)
			}
			return statusExit(worst)
		case snap, ok := <-updates:
			if !ok { // Run returned
				if err := <-done; err != nil {
					return collectorError(err)
				}
				return statusExit(worst)
			}
			if tty && output == cli.FormatTable {
				fmt.Fprint(a.stdout, "\x1b[H\x1b[2J") // home, clear
				fmt.Fprintf(a.stdout, "pgleader status — %s — every %v — %s (Ctrl-C to stop)\n\n",
					termsafe.String(snap.Health.Database), c.PollInterval(), time.Now().Format("15:04:05"))
			}
			worst = writeStatus(a.stdout, snap, scopes, output)
			if !tty && output == cli.FormatTable {
				fmt.Fprintln(a.stdout)
			}
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), getTermios)
	return err == nil
}

// statusExit maps the worst verdict to the documented exit code (IDLE, which
// never is the worst, exits 0 like OK).
func statusExit(worst collector.Verdict) error {
	switch worst {
	case collector.VerdictSplitBrain:
		return &cli.StatusError{Code: cli.ExitSplitBrain}
	case collector.VerdictUnreachable:
		return &cli.StatusError{Code: cli.ExitUnreachable}
	case collector.VerdictNoLeader:
		return &cli.StatusError{Code: cli.ExitNoLeader}
	case collector.VerdictDegraded:
		return &cli.StatusError{Code: cli.ExitDegraded}
	}
	return nil
}

// statusJSON is `pgleader status -o json` over one database: a contract other
// tools parse (docs/design.md §7, "The CLI contract"). Fields are only ever added, after the others.
type statusJSON struct {
	Database string            `json:"database"`
	DBTime   time.Time         `json:"db_time"`
	Verdict  collector.Verdict `json:"verdict"`
	// VerdictCounts: how many of the scopes shown have each verdict
	// ({"OK": 998, "NO LEADER": 2}); added after the fields above.
	VerdictCounts map[collector.Verdict]int `json:"verdict_counts"`
	Scopes        []collector.Scope         `json:"scopes"`
	Nodes         []collector.Node          `json:"nodes"`
	Alerts        []collector.Alert         `json:"alerts"`
	Health        collector.Health          `json:"health"`
	// Timeline and EpochFloor: the server's WAL timeline (it rises at every
	// failover) and the floor above which its epochs lie (added later).
	Timeline   int64 `json:"timeline"`
	EpochFloor int64 `json:"epoch_floor"`
	// Retired: scopes retired with pgleader scope retire, which scopes
	// leaves out (schema 8; scopes[].handover_to, scopes[].handover_deadline
	// and nodes[].priority came with it).
	Retired int `json:"retired"`
	// Replay: status --at, a moment rebuilt from history (added later;
	// absent live).
	Replay *collector.ReplayInfo `json:"replay,omitempty"`
}

// writeStatus prints snap (restricted to scopes when given) and returns the worst
// verdict among the printed scopes. Its cost is linear in the scopes, nodes and
// alerts: it runs on every frame of --watch, at thousands of scopes.
//
// Names, hosts and alert texts come from the database, written by whoever can
// write it: the table and the TSV print them through termsafe.String (no escape
// sequence reaches the terminal, no TAB or line break forges a column or a row),
// the JSON through cli.WriteJSON.
func writeStatus(w io.Writer, snap *collector.Snapshot, scopes []string, format string) collector.Verdict {
	wanted := make(map[string]bool, len(scopes))
	for _, s := range scopes {
		wanted[s] = true
	}
	var shown []collector.Scope
	for _, s := range snap.Scopes {
		if len(scopes) == 0 || wanted[s.Name] {
			shown = append(shown, s)
		}
	}
	worst := collector.VerdictOK
	counts := map[collector.Verdict]int{}
	for _, s := range shown {
		counts[s.Verdict]++
		// IDLE ranks after OK: never the worst. Nor is a verdict this build does
		// not know: it has no exit code, and the JSON's verdict stays one of ours.
		if s.Verdict.Known() && s.Verdict.Rank() < worst.Rank() {
			worst = s.Verdict
		}
	}
	var alerts []collector.Alert
	for _, al := range snap.Alerts {
		if len(scopes) == 0 || al.Scope == "" || wanted[al.Scope] {
			alerts = append(alerts, al)
		}
	}
	switch format {
	case cli.FormatJSON:
		_ = cli.WriteJSON(w, statusJSON{Database: snap.Health.Database, DBTime: snap.DBTime, Verdict: worst,
			VerdictCounts: counts, Scopes: orEmpty(shown), Nodes: orEmpty(snap.Nodes), Alerts: orEmpty(alerts),
			Health: snap.Health, Timeline: snap.Timeline, EpochFloor: snap.EpochFloor, Retired: snap.Retired,
			Replay: snap.Replay})
		return worst
	case cli.FormatTSV:
		fmt.Fprintln(w, "scope\tstate\tleader\tepoch\ttenure_s\theartbeat_age_s\tfollowers\talerts")
		for _, s := range shown {
			hb := fmt.Sprintf("%.3f", s.HeartbeatAge.Seconds())
			if snap.Replay != nil && s.LastHeartbeat.IsZero() {
				hb = "" // replayed: not recorded
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.3f\t%s\t%s\t%s\n", termsafe.String(s.Name), termsafe.String(string(s.Verdict)),
				termsafe.String(s.Leader), s.Epoch, s.Tenure.Seconds(), hb, nodeList(s.Followers), alertKinds(s.Alerts))
		}
		return worst
	}
	if len(shown) == 0 {
		if len(scopes) > 0 {
			why := "no node has campaigned for it yet"
			if snap.Retired > 0 {
				why += ", or it was retired"
			}
			fmt.Fprintf(w, "no such scope: %s (%s)\n", termsafe.String(strings.Join(scopes, ", ")), why)
			return collector.VerdictNoLeader
		}
		if snap.Retired > 0 {
			fmt.Fprintf(w, "no scopes in view: %s retired (pgleader history still lists their terms)\n", plural(snap.Retired, "scope"))
			return worst
		}
		fmt.Fprintln(w, "no scopes yet: start nodes with `pgleader node --scope NAME` or embed the election package")
		return worst
	}
	retired := snap.Retired
	if len(scopes) > 0 {
		retired = 0 // "2 of 1000 scopes": the retired ones are not among those asked for
	}
	writeSummary(w, shown, len(snap.Scopes), retired, counts)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tSTATE\tLEADER\tEPOCH\tTENURE\tHEARTBEAT\tFOLLOWERS\tALERTS")
	for _, s := range shown {
		leader, tenure, hb := "—", "—", "—"
		if s.Leader != "" {
			leader = termsafe.String(s.Leader)
			if s.LeaderHost != "" {
				leader += "@" + termsafe.String(s.LeaderHost)
			}
			tenure, hb = human.Duration(s.Tenure), human.Duration(s.HeartbeatAge)+" ago"
			if snap.Replay != nil && s.LastHeartbeat.IsZero() {
				hb = "n/a (replay)"
			}
		}
		if s.Leader != "" && !s.HasLeader() {
			// Open on record, but its holder no longer holds it: who led last, and
			// for how long there has been no leader.
			leader, tenure = "— (was "+leader+")", "none"
			if s.LeaderlessFor > 0 {
				tenure += " for " + human.Duration(s.LeaderlessFor)
			}
		} else if s.Leader == "" && s.LeaderlessFor > 0 {
			tenure = "none for " + human.Duration(s.LeaderlessFor)
		}
		if s.HandoverTo != "" {
			leader += " → " + termsafe.String(s.HandoverTo) // a pending handover
		}
		followers := nodeList(s.Followers)
		if followers == "" {
			followers = "—"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(s.Name), show.Verdict(s.Verdict), leader, show.Epoch(s.Epoch),
			tenure, hb, followers, orDash(alertKinds(s.Alerts)))
	}
	_ = tw.Flush()
	var bound []string
	for _, s := range shown {
		if len(s.BoundTo) > 0 {
			bound = append(bound, termsafe.String(s.Name)+" → "+termsafe.String(strings.Join(s.BoundTo, ", ")))
		}
	}
	if len(bound) > 0 {
		fmt.Fprintf(w, "bound to roles (only their logins campaign): %s\n", strings.Join(bound, "; "))
	}
	writeNodes(w, snap.Nodes, shown, len(scopes) > 0)
	if len(alerts) > 0 {
		fmt.Fprintln(w)
		for _, al := range alerts {
			where := al.Scope
			if al.Node != "" {
				where = strings.TrimPrefix(where+" "+al.Node, " ")
			}
			fmt.Fprintf(w, "%-8s %s %s: %s\n         → %s (%s)\n", termsafe.String(strings.ToUpper(string(al.Severity))), termsafe.String(string(al.Kind)),
				termsafe.String(where), termsafe.String(al.Summary), termsafe.String(al.Hint), termsafe.String(al.Runbook))
		}
	}
	if snap.Health.Source == collector.SourceDisconnected && snap.Health.LastError != "" {
		fmt.Fprintf(w, "\ncollector disconnected: %s\n", termsafe.String(snap.Health.LastError))
	}
	return worst
}

// nodeLeadsNamed is the most scopes a node's row names among those it leads.
const nodeLeadsNamed = 3

// writeNodes prints the nodes below the scopes: every running node (or, when
// the scopes were chosen, those that campaign for one of them), its state, its
// priority and the shown scopes it leads. Stopped nodes are counted only.
func writeNodes(w io.Writer, nodes []collector.Node, shown []collector.Scope, chosen bool) {
	names := make(map[string]bool, len(shown))
	for _, s := range shown {
		names[s.Name] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows, stopped := 0, 0
	// A RUNS column only when some node supervises a command (pgleader run).
	runs := slices.ContainsFunc(nodes, func(n collector.Node) bool { return n.Supervisor != nil && n.StoppedAt.IsZero() })
	for _, n := range nodes {
		if chosen && !slices.ContainsFunc(n.Scopes, func(s string) bool { return names[s] }) {
			continue
		}
		if !n.StoppedAt.IsZero() {
			stopped++
			continue
		}
		if rows == 0 {
			fmt.Fprintln(w)
			if runs {
				fmt.Fprintln(tw, "NODE\tHOST\tSTATE\tPRIORITY\tLEADS\tRUNS")
			} else {
				fmt.Fprintln(tw, "NODE\tHOST\tSTATE\tPRIORITY\tLEADS")
			}
		}
		rows++
		state := show.NodeState(n.State)
		prio := strconv.Itoa(n.Priority)
		switch {
		case n.Priority == 0:
			prio += " (never leads)"
		case !n.Eligible():
			prio += " (not live)"
		case n.FailbackAfter > 0:
			prio += " (preferred: fails back after " + n.FailbackAfter.String() + ")"
		}
		var leads []string
		for _, s := range n.Leads {
			if names[s] {
				leads = append(leads, s)
			}
		}
		led := nodeList(leads[:min(len(leads), nodeLeadsNamed)])
		if more := len(leads) - nodeLeadsNamed; more > 0 {
			led += fmt.Sprintf(" +%d more", more)
		}
		if runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(n.ID), orDash(termsafe.String(n.Hostname)), state, prio, orDash(led), supervisedText(n.Supervisor))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.String(n.ID), orDash(termsafe.String(n.Hostname)), state, prio, orDash(led))
		}
	}
	_ = tw.Flush()
	if stopped > 0 {
		if rows == 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s stopped (not shown; -o json lists them)\n", plural(stopped, "node"))
	}
	writeDoorbells(w, nodes, names, chosen)
}

// writeDoorbells says which shown, running nodes have a doorbell that cannot
// ring, one line per reason: their wake-ups (a release, a handover, a resign
// request) wait for their heartbeats, up to one interval.
func writeDoorbells(w io.Writer, nodes []collector.Node, names map[string]bool, chosen bool) {
	var why []string
	ids := map[string][]string{}
	for _, n := range nodes {
		if n.DoorbellUnringable == "" || !n.StoppedAt.IsZero() ||
			(chosen && !slices.ContainsFunc(n.Scopes, func(s string) bool { return names[s] })) {
			continue
		}
		if ids[n.DoorbellUnringable] == nil {
			why = append(why, n.DoorbellUnringable)
		}
		ids[n.DoorbellUnringable] = append(ids[n.DoorbellUnringable], n.ID)
	}
	for _, y := range why {
		who := nodeList(ids[y][:min(len(ids[y]), troubleNamed)])
		if more := len(ids[y]) - troubleNamed; more > 0 {
			who += fmt.Sprintf(" +%d more", more)
		}
		fmt.Fprintf(w, "doorbell cannot ring: %s (wake-ups come from heartbeats, within one interval): %s\n", who, termsafe.String(y))
	}
}

// troubleNamed is the most scopes the table's summary names.
const troubleNamed = 10

// writeSummary prints the lines above the table: the verdict counts, healthy
// first ("1000 scopes: 996 ✔ OK · 2 · IDLE · 2 ✖ NO LEADER", then "· 3
// retired" when scopes were retired), then the scopes not OK (nor IDLE),
// worst first, so that they are found without reading every row.
func writeSummary(w io.Writer, shown []collector.Scope, total, retired int, counts map[collector.Verdict]int) {
	head := plural(len(shown), "scope")
	if len(shown) != total {
		head = fmt.Sprintf("%d of %s", len(shown), plural(total, "scope"))
	}
	// OK first (the size of the healthy part), IDLE (nobody meant to lead), then
	// what is wrong, worst first (an unknown verdict last).
	troubled := func(v collector.Verdict) int {
		if v.Troubled() {
			return 1
		}
		return 0
	}
	order := slices.SortedFunc(maps.Keys(counts), func(a, b collector.Verdict) int {
		return cmp.Or(cmp.Compare(troubled(a), troubled(b)), cmp.Compare(a.Rank(), b.Rank()), strings.Compare(string(a), string(b)))
	})
	parts := make([]string, len(order), len(order)+1)
	for i, v := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[v], show.Verdict(v))
	}
	if retired > 0 {
		parts = append(parts, fmt.Sprintf("%d retired", retired))
	}
	fmt.Fprintf(w, "%s: %s\n", head, strings.Join(parts, " · "))

	var trouble []collector.Scope
	for _, s := range shown {
		if s.Verdict.Troubled() {
			trouble = append(trouble, s)
		}
	}
	if len(trouble) > 0 {
		slices.SortStableFunc(trouble, func(a, b collector.Scope) int {
			return cmp.Compare(a.Verdict.Rank(), b.Verdict.Rank()) // then by name, as shown is
		})
		names := make([]string, 0, troubleNamed+1)
		for _, s := range trouble[:min(len(trouble), troubleNamed)] {
			names = append(names, show.Glyph(s.Verdict)+" "+termsafe.String(s.Name))
		}
		if more := len(trouble) - troubleNamed; more > 0 {
			names = append(names, fmt.Sprintf("+%d more", more))
		}
		fmt.Fprintf(w, "not OK: %s\n", strings.Join(names, "  "))
	}
	fmt.Fprintln(w)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func alertKinds(as []collector.Alert) string {
	var ks []string
	for _, a := range as {
		ks = append(ks, termsafe.String(string(a.Kind)))
	}
	return strings.Join(ks, ",")
}

// nodeList joins node ids for a cell, each made safe to print (termsafe.String).
func nodeList(ids []string) string {
	safe := make([]string, len(ids))
	for i, id := range ids {
		safe[i] = termsafe.String(id)
	}
	return strings.Join(safe, ",")
}

// orEmpty is xs, or an empty slice for nil: -o json prints [] rather than null.
func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// supervisedText is a pgleader run node's command and child, for status: "worker:
// running pid 4242, 2 restarts" ("—" for a plain node).
func supervisedText(sv *collector.Supervised) string {
	if sv == nil {
		return "—"
	}
	t := termsafe.String(sv.Command) + ": " + termsafe.String(sv.State)
	if sv.PID > 0 {
		t += " pid " + strconv.Itoa(sv.PID)
	}
	if sv.Restarts > 0 {
		t += ", " + plural(sv.Restarts, "restart")
	}
	if sv.LastExit != nil && sv.PID == 0 {
		t += ", last " + termsafe.String(show.LastExit(sv))
	}
	return t
}
