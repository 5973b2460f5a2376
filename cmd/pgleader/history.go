package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

func (a *app) historyCommand() *cobra.Command {
	var (
		scopes  []string
		since   string
		until   string
		limit   int
		output  string
		targets targetFlags
	)
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Print the leadership history of scopes: who led, when, for how long, how it ended",
		Long: `history prints the terms of pgleader.terms, newest first: the epoch (the term's
fencing token), the leader and its host, the gap before the term: from the
predecessor's release, or its last heartbeat when it ended otherwise, to this
term's start (an upper bound of the time without a leader, longer than the real
one by at most a heartbeat interval; milliseconds below a second), when the term
started, how long it was held, and how it ended. A term is held until its
holder's last sign of life (its release, or its last heartbeat): a crash or a
database outage is the next term's gap, not time held. A term still led reads
"(leading)", held "so far"; a term open on record whose holder leads no more
(crashed, frozen or cut off, and no successor has closed it yet) reads "holder
silent since" its last heartbeat.

How a term ended (release_reason):
  resigned           the leader gave the scope up (Resign, SIGUSR1)
  shutdown           the leader stopped cleanly (SIGTERM, context cancelled)
  handed_over        an operator handed the scope to a chosen node (pgleader
                     handover): shown as "handed_over → NODE" (handed_to)
  lost_connection    its session ended while its process lived on: the successor
                     found its guard alive, or its sessions ended only after a
                     heartbeat timeout of silence (a failed link it gave up on)
  heartbeat_timeout  it was silent for its whole session lease (frozen, cut off)
  crashed            its sessions and process ended at once, within a heartbeat
                     of its last (kill -9, OOM, host crash)
  database_failover  its sessions ended with the database: the server restarted
                     or a standby was promoted since its last heartbeat
  evicted            an operator or the collector terminated it

A term of pgleader run whose command ended on its own while it led says how
after its reason: "shutdown · command crashed (exit 3)", "· command crashed
(signal 9 (SIGKILL))", "· command exited (exit 0)" (×N when a restart policy
restarted it N−1 times). JSON: "child" {exits, exit_code, cause}; TSV:
child_exit.

--since and --until bound a window: the terms open at some point of it. --since
takes a duration before now (1h) or a TIME, --until a TIME; TIME is RFC 3339
(2026-11-27T03:12:04.250Z), a local time (2026-11-27 03:12:04, optionally
.250), or a duration before now (-15m). pgleader status --at and top --at show
the whole cluster at one moment.

Output: -o table (default), json (one array of terms, DESIGN §5; last_sign is
the holder's last sign of life, silent true for an open term whose holder leads
no more) or tsv (last_sign, silent and child_exit are its last columns).

Over named targets (--target, --all-targets) the newest terms of every database
are merged, newest first: the table gains a DATABASE column, the TSV a target
column at the end, each JSON term a "target".

` + targetsHelp,
		Example: `  pgleader history --scope billing
  pgleader history --scope billing --since 1h -o json
  pgleader history --limit 100 -o tsv
  pgleader history --since '2026-11-27 03:00' --until '2026-11-27 03:30'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(output); err != nil {
				return err
			}
			if limit < 1 {
				return cli.BadInput("--limit must be at least 1 (got %d)", limit)
			}
			w, err := parseWindow(since, until, time.Now())
			if err != nil {
				return err
			}
			if err := checkScopes(scopes); err != nil {
				return err
			}
			if targets.named() || targets.config != "" {
				ts, err := a.targets(&targets)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return a.historyTargets(ctx, ts, termQuery{scopes, w, limit}, output)
			}
			return a.withCheckedTarget(cmd, func(ctx context.Context, t cli.Target) error {
				terms, err := readTerms(ctx, t.Config, scopes, w, limit)
				if err != nil {
					return err
				}
				return writeTerms(a.stdout, terms, output)
			})
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&scopes, "scope", nil, "scope to show; repeat for several (default: all)")
	f.StringVar(&since, "since", "", "only terms open at some point after `D|TIME`: a duration before now (1h) or a TIME (default: no limit)")
	f.StringVar(&until, "until", "", "only terms that began by `TIME` (RFC 3339, local 2006-01-02 15:04:05[.000], or -15m)")
	f.IntVar(&limit, "limit", 50, "at most `N` terms")
	f.StringVarP(&output, "output", "o", cli.FormatTable, "output `FORMAT`: table, json or tsv")
	targets.register(cmd)
	return cmd
}

// termsWindow bounds the terms history lists: open at some point of the
// last since (0: no bound), after from, and begun by until (zero: no bound).
type termsWindow struct {
	since       time.Duration
	from, until time.Time
}

// parseWindow parses --since (a duration or a TIME) and --until (a TIME).
func parseWindow(since, until string, now time.Time) (termsWindow, error) {
	var w termsWindow
	if since != "" {
		if d, err := time.ParseDuration(since); err == nil {
			w.since = d.Abs() // 1h, or -1h as a TIME: the same instant
		} else if w.from, err = parseAt("since", since, now); err != nil {
			return w, cli.BadInput("--since %q: neither a duration such as 30m nor a TIME (%s)", since, atForms)
		}
	}
	if until != "" {
		var err error
		if w.until, err = parseAt("until", until, now); err != nil {
			return w, err
		}
	}
	if !w.from.IsZero() && !w.until.IsZero() && w.until.Before(w.from) {
		return w, cli.BadInput("--until (%s) is before --since (%s)", w.until.Format(time.RFC3339), w.from.Format(time.RFC3339))
	}
	return w, nil
}

// timeArg is t for a query argument: NULL when zero.
func timeArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// readTerms reads the newest terms (by acquired_at) of scopes (all when empty)
// within the window w, each with its holder's last sign of life and how long
// it was held up to it (collector.Term.LastSign and HeldFor): a crash or a
// database outage is the next term's gap, not time held. An open term's
// holder is judged by the collector (settleOpen): one that leads no more is
// Silent.
func readTerms(ctx context.Context, cfg *pgx.ConnConfig, scopes []string, w termsWindow, limit int) ([]collector.Term, error) {
	cfg = cfg.Copy()
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // unnamed statements: through any pooler
	conn, err := pgsession.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var out []collector.Term
	err = pgsession.InTx(ctx, conn, func(tx pgx.Tx) error {
		// The runs of pgleader run --once-per (schema 15), where the table
		// exists; terms.last_sign and the children's exits (schema 17), where
		// the columns exist.
		var runs, lastSign, child bool
		if err := tx.QueryRow(ctx, sqlHistoryShape).Scan(&runs, &lastSign, &child); err != nil {
			return err
		}
		childCols := `0, NULL::int, NULL::text`
		if child {
			childCols = `t.child_exits, t.child_exit_code, t.child_exit_cause`
		}
		run := `NULL::text, NULL::int`
		join := ``
		if runs {
			run = `r.run_key, r.exit_code`
			join = `LEFT JOIN LATERAL (SELECT r.run_key, r.exit_code FROM pgleader.runs r
			                            WHERE r.scope = t.scope AND r.epoch = t.epoch
			                            ORDER BY r.started_at DESC LIMIT 1) r ON true`
		}
		recorded := `NULL::timestamptz`
		if lastSign {
			recorded = `t.last_sign`
		}
		out, err = scanTerms(tx.Query(ctx, fmt.Sprintf(sqlHistoryTerms, recorded, run, join, childCols),
			scopes, w.since.Seconds(), limit, timeArg(w.from), timeArg(w.until)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read pgleader.terms: %w", err)
	}
	if err := settleOpen(ctx, cfg, out); err != nil {
		return nil, fmt.Errorf("judge the open terms' holders: %w", err)
	}
	return out, nil
}

const (
	// Whether pgleader.runs (schema 15), terms.last_sign and terms.child_exits
	// (schema 17) exist.
	sqlHistoryShape = `
SELECT pg_catalog.to_regclass('pgleader.runs') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = 'pgleader.terms'::regclass AND a.attname = 'last_sign' AND NOT a.attisdropped),
       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = 'pgleader.terms'::regclass AND a.attname = 'child_exits' AND NOT a.attisdropped)`

	// The terms, newest first. sign is a closed term's last sign of life:
	// as recorded (schema 17), else its release when its holder ended it,
	// else its successor's start minus its handover gap (the holder's last
	// heartbeat); NULL while open. %[1]s: t.last_sign or NULL; %[2]s the run
	// columns, %[3]s their join; %[4]s the child's exit columns. $1 scopes, $2 since (s), $3 limit, $4 from,
	// $5 until.
	sqlHistoryTerms = `
SELECT t.id, t.scope, t.epoch, t.holder, coalesce(t.hostname, ''), coalesce(t.holder_pid, 0),
       t.acquired_at, t.released_at, coalesce(t.release_reason, ''),
       coalesce((extract(epoch FROM t.handover_gap) * 1000000)::bigint, 0),
       (extract(epoch FROM coalesce(t.released_at, now()) - t.acquired_at) * 1000000)::bigint,
       coalesce(t.handed_to, ''), sign.at, %[2]s, %[4]s
  FROM pgleader.terms t
  LEFT JOIN LATERAL (
       SELECT CASE WHEN t.released_at IS NULL THEN NULL::timestamptz
                   ELSE coalesce(%[1]s,
                                 CASE WHEN t.release_reason IN ('resigned', 'shutdown', 'handed_over') THEN t.released_at
                                      ELSE (SELECT s.acquired_at - s.handover_gap FROM pgleader.terms s
                                             WHERE s.scope = t.scope AND s.epoch > t.epoch AND s.handover_gap IS NOT NULL
                                             ORDER BY s.epoch LIMIT 1) END) END AS at) sign ON true
  %[3]s
 WHERE (coalesce(cardinality($1::text[]), 0) = 0 OR t.scope = ANY ($1))
   AND ($2::float8 = 0 OR coalesce(t.released_at, 'infinity') > now() - make_interval(secs => $2))
   AND ($4::timestamptz IS NULL OR coalesce(t.released_at, 'infinity') > $4)
   AND ($5::timestamptz IS NULL OR t.acquired_at <= $5)
 ORDER BY t.acquired_at DESC, t.id DESC
 LIMIT $3`
)

// settleOpen gives each open term of terms its holder's last sign of life,
// whether it is silent (open on record, its holder leading no more: crashed,
// frozen or cut off, and no successor has closed the term yet) and how long
// it was held, as the collector judges them from one read of the database.
func settleOpen(ctx context.Context, cfg *pgx.ConnConfig, terms []collector.Term) error {
	if !slices.ContainsFunc(terms, collector.Term.Open) {
		return nil
	}
	ccfg := collector.DefaultConfig()
	ccfg.ConnConfig, ccfg.Logger, ccfg.Source = cfg, quietLogger(), collector.SourceModeNotify
	c, err := collector.New(ccfg)
	if err != nil {
		return err
	}
	snap, err := c.Poll(ctx)
	if err != nil {
		return err
	}
	for i := range terms {
		t := &terms[i]
		if !t.Open() {
			continue
		}
		if sc, ok := snap.Scope(t.Scope); ok && sc.OpenTerm != nil && sc.OpenTerm.Epoch == t.Epoch {
			t.LastSign, t.Silent, t.HeldFor = sc.OpenTerm.LastSign, sc.OpenTerm.Silent, sc.OpenTerm.HeldFor
		}
	}
	return nil
}

// scanTerms reads the rows of readTerms' query.
func scanTerms(rows pgx.Rows, err error) ([]collector.Term, error) {
	if err != nil {
		return nil, err
	}
	var out []collector.Term
	for rows.Next() {
		var (
			t              collector.Term
			released, sign *time.Time
			gap, heldFor   int64 // microseconds: exact (a float of seconds is not: 265.908 ms read back as 265.907999)
			runKey         *string
			runExit        *int32
			childExits     int32
			childCode      *int32
			childCause     *string
		)
		if err := rows.Scan(&t.ID, &t.Scope, &t.Epoch, &t.Holder, &t.Hostname, &t.HolderPID,
			&t.AcquiredAt, &released, &t.EndedBy, &gap, &heldFor, &t.HandedTo, &sign, &runKey, &runExit,
			&childExits, &childCode, &childCause); err != nil {
			return nil, err
		}
		if childExits > 0 && childCode != nil && childCause != nil {
			t.Child = &collector.TermChild{Exits: int(childExits), ExitCode: int(*childCode), Cause: *childCause}
		}
		if runKey != nil {
			t.Run = &collector.TermRun{Key: *runKey}
			if runExit != nil {
				code := int(*runExit)
				t.Run.ExitCode = &code
			}
		}
		if released != nil {
			t.ReleasedAt = *released
		}
		if sign != nil {
			t.LastSign = *sign
		}
		t.HandoverGap = time.Duration(gap) * time.Microsecond
		t.HeldFor = max(0, time.Duration(heldFor)*time.Microsecond) // open: so far (settleOpen may end it)
		if !t.Open() {
			end := t.ReleasedAt
			if !t.LastSign.IsZero() && t.LastSign.Before(end) {
				end = t.LastSign
			}
			t.HeldFor = max(0, end.Sub(t.AcquiredAt))
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// writeTerms prints terms. Scopes, holders, hosts and reasons come from the
// database: the table and the TSV print them through termsafe.String, the JSON
// through cli.WriteJSON (see writeStatus).
func writeTerms(w io.Writer, terms []collector.Term, format string) error {
	return writeTargetTerms(w, terms, nil, format)
}

// targetTerm is a term of a named target, in -o json: the term's fields and
// "target".
type targetTerm struct {
	Target string `json:"target"`
	collector.Term
}

// writeTargetTerms is writeTerms for the terms of named targets: targets[i] is
// the target of terms[i] (nil: one database, as writeTerms). The table gains a
// DATABASE column first, the TSV a target column last, each JSON term a target.
func writeTargetTerms(w io.Writer, terms []collector.Term, targets []string, format string) error {
	safe := termsafe.String
	switch format {
	case cli.FormatJSON:
		if targets == nil {
			return cli.WriteJSON(w, orEmpty(terms))
		}
		out := make([]targetTerm, len(terms))
		for i, t := range terms {
			out[i] = targetTerm{targets[i], t}
		}
		return cli.WriteJSON(w, out)
	case cli.FormatTSV:
		// Columns are only added at the end: the ones before keep their places
		// (target, over named targets, before last_sign, silent and child_exit).
		target := ""
		if targets != nil {
			target = "\ttarget"
		}
		fmt.Fprintln(w, "scope\tepoch\tleader\thost\tstarted\theld_for_s\tended_by\thandover_gap_s\thanded_to\trun_key\trun_exit"+target+"\tlast_sign\tsilent\tchild_exit")
		for i, t := range terms {
			eol := ""
			if targets != nil {
				eol = "\t" + targets[i]
			}
			sign := ""
			if !t.LastSign.IsZero() {
				sign = t.LastSign.UTC().Format(time.RFC3339Nano)
			}
			childExit := ""
			if t.Child != nil {
				childExit = t.Child.String()
			}
			eol += "\t" + sign + "\t" + strconv.FormatBool(t.Silent) + "\t" + childExit + "\n"
			ended := string(t.EndedBy)
			if t.Open() {
				ended = "open"
			}
			runKey, runExit := "", ""
			if t.Run != nil {
				runKey, runExit = t.Run.Key, "unfinished"
				if t.Run.ExitCode != nil {
					runExit = strconv.Itoa(*t.Run.ExitCode)
				}
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%.3f\t%s\t%.3f\t%s\t%s\t%s%s", safe(t.Scope), t.Epoch, safe(t.Holder), safe(t.Hostname),
				t.AcquiredAt.UTC().Format(time.RFC3339Nano), t.HeldFor.Seconds(), safe(ended), t.HandoverGap.Seconds(), safe(t.HandedTo),
				safe(runKey), runExit, eol)
		}
		return nil
	}
	if len(terms) == 0 {
		fmt.Fprintln(w, "no terms recorded (no node has led these scopes yet)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := ""
	if targets != nil {
		head = "DATABASE\t"
	}
	// GAP BEFORE is the time without a leader before the term began: it
	// stands before STARTED, not beside the ENDED BY of a term that ended
	// after it.
	fmt.Fprintln(tw, head+"SCOPE\tTERM\tLEADER\tHOST\tGAP BEFORE\tSTARTED\tHELD FOR\tENDED BY")
	for i, t := range terms {
		if targets != nil {
			fmt.Fprint(tw, targets[i]+"\t")
		}
		ended, held := safe(string(t.EndedBy)), human.Duration(t.HeldFor)
		if t.HandedTo != "" {
			ended += " → " + safe(t.HandedTo)
		}
		if c := t.Child; c != nil && (t.Run == nil || t.Run.ExitCode == nil) {
			// pgleader run: the supervised command ended on its own in the term
			// (a run of the ledger that ended says so itself, below).
			ended += " · " + childPhrase(*c)
		}
		if r := t.Run; r != nil {
			// pgleader run --once-per: the term says whether its run completed.
			switch {
			case r.ExitCode == nil:
				ended += " · run unfinished"
			case *r.ExitCode == 0:
				ended += " · run completed"
			default:
				ended += " · run failed (exit " + strconv.Itoa(*r.ExitCode) + ")"
			}
		}
		switch {
		case t.Open() && t.Silent:
			// Open on record, its holder gone: held until its last sign of
			// life, never "(leading)".
			ended = "holder silent"
			if !t.LastSign.IsZero() {
				ended += " since " + localStamp(t.LastSign, t.AcquiredAt)
			}
		case t.Open():
			ended, held = "(leading)", held+" so far"
			if c := t.Child; c != nil {
				ended += " · " + childPhrase(*c) // a restart policy restarted it
			}
		}
		gap := human.Duration(t.HandoverGap)
		if t.Epoch == 1 && t.HandoverGap == 0 {
			gap = "—"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(t.Scope), show.Epoch(t.Epoch), safe(t.Holder), orDash(safe(t.Hostname)),
			gap, t.AcquiredAt.Local().Format("2006-01-02 15:04:05.000"), held, ended)
	}
	return tw.Flush()
}

// localStamp is at in local time: the time of day, the date too when it is
// not the day of since.
func localStamp(at, since time.Time) string {
	at, since = at.Local(), since.Local()
	if y, m, d := since.Date(); at.Year() != y || at.Month() != m || at.Day() != d {
		return at.Format("2006-01-02 15:04:05")
	}
	return at.Format("15:04:05")
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

// childPhrase says how a term's supervised command ended on its own: "command
// crashed (exit 3)", "command crashed (signal 11 (SIGSEGV))" or "command exited
// (exit 0)", with "×N" when a restart policy saw it end N times.
func childPhrase(c collector.TermChild) string {
	what := "command exited"
	if c.Crashed() {
		what = "command crashed"
	}
	what += " (" + c.String() + ")"
	if c.Exits > 1 {
		what += fmt.Sprintf(" ×%d", c.Exits)
	}
	return what
}
