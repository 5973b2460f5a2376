package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
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
fencing token), the leader and its host, when the term started, how long it was
held (still open: so far), how it ended, and the gap before it: from the
predecessor's release, or its last heartbeat when it ended otherwise, to this
term's start (an upper bound of the time without a leader, longer than the real
one by at most a heartbeat interval; milliseconds below a second).

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

Output: -o table (default), json (one array of terms, DESIGN §5) or tsv.

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
// within the window w.
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
		// The runs of pgleader run --once-per (schema 15), where the table exists.
		// The exits of pgleader run's children (schema 17), where recorded.
		var runs, child bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass('pgleader.runs') IS NOT NULL,
		       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = 'pgleader.terms'::regclass
		                  AND a.attname = 'child_exits' AND NOT a.attisdropped)`).Scan(&runs, &child); err != nil {
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
		out, err = scanTerms(tx.Query(ctx, `
		SELECT t.id, t.scope, t.epoch, t.holder, coalesce(t.hostname, ''), coalesce(t.holder_pid, 0),
		       t.acquired_at, t.released_at, coalesce(t.release_reason, ''),
		       coalesce(extract(epoch FROM t.handover_gap), 0)::float8,
		       extract(epoch FROM coalesce(t.released_at, now()) - t.acquired_at)::float8,
		       coalesce(t.handed_to, ''), `+run+`, `+childCols+`
		  FROM pgleader.terms t `+join+`
		 WHERE (coalesce(cardinality($1::text[]), 0) = 0 OR t.scope = ANY ($1))
		   AND ($2::float8 = 0 OR coalesce(t.released_at, 'infinity') > now() - make_interval(secs => $2))
		   AND ($4::timestamptz IS NULL OR coalesce(t.released_at, 'infinity') > $4)
		   AND ($5::timestamptz IS NULL OR t.acquired_at <= $5)
		 ORDER BY t.acquired_at DESC, t.id DESC
		 LIMIT $3`, scopes, w.since.Seconds(), limit, timeArg(w.from), timeArg(w.until)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read pgleader.terms: %w", err)
	}
	return out, nil
}

// scanTerms reads the rows of readTerms' query.
func scanTerms(rows pgx.Rows, err error) ([]collector.Term, error) {
	if err != nil {
		return nil, err
	}
	var out []collector.Term
	for rows.Next() {
		var (
			t            collector.Term
			released     *time.Time
			gap, heldFor float64
			runKey       *string
			runExit      *int32
			childExits   int32
			childCode    *int32
			childCause   *string
		)
		if err := rows.Scan(&t.ID, &t.Scope, &t.Epoch, &t.Holder, &t.Hostname, &t.HolderPID,
			&t.AcquiredAt, &released, &t.EndedBy, &gap, &heldFor, &t.HandedTo, &runKey, &runExit,
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
		t.HandoverGap = time.Duration(gap * float64(time.Second))
		t.HeldFor = time.Duration(heldFor * float64(time.Second))
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
		// Columns are only added at the end: the ones before keep their places.
		tail, eol := "", "\n"
		if targets != nil {
			tail = "\ttarget"
		}
		fmt.Fprintln(w, "scope\tepoch\tleader\thost\tstarted\theld_for_s\tended_by\thandover_gap_s\thanded_to\trun_key\trun_exit\tchild_exit"+tail)
		for i, t := range terms {
			if targets != nil {
				eol = "\t" + targets[i] + "\n"
			}
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
			childExit := ""
			if t.Child != nil {
				childExit = t.Child.String()
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%.3f\t%s\t%.3f\t%s\t%s\t%s\t%s%s", safe(t.Scope), t.Epoch, safe(t.Holder), safe(t.Hostname),
				t.AcquiredAt.UTC().Format(time.RFC3339Nano), t.HeldFor.Seconds(), safe(ended), t.HandoverGap.Seconds(), safe(t.HandedTo),
				safe(runKey), runExit, childExit, eol)
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
	fmt.Fprintln(tw, head+"SCOPE\tTERM\tLEADER\tHOST\tSTARTED\tHELD FOR\tENDED BY\tGAP BEFORE")
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
		if t.Open() {
			ended, held = "(leading)", held+" so far"
		}
		gap := human.Duration(t.HandoverGap)
		if t.Epoch == 1 && t.HandoverGap == 0 {
			gap = "—"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(t.Scope), collector.EpochLabel(t.Epoch), safe(t.Holder), orDash(safe(t.Hostname)),
			t.AcquiredAt.Local().Format("2006-01-02 15:04:05.000"), held, ended, gap)
	}
	return tw.Flush()
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
