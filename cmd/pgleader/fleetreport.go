package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui/show"
)

// The reports of status and history over named targets (--target,
// --all-targets): every database read in parallel, each within targetTimeout,
// so that one slow or unreachable database neither holds up nor hides the
// others. A database that cannot be read is reported as such — in the table,
// the JSON (its "error") and on stderr — and makes the exit code 1 unless a
// split brain elsewhere makes it 4.

// targetResult is what one target's read gave.
type targetResult[T any] struct {
	target cli.NamedTarget
	value  T
	err    error // cli.Message-ready; nil: value is good
}

// readTargets runs read on every target in parallel, each within targetTimeout
// (after the same checks as a single database's).
func readTargets[T any](ctx context.Context, ts []cli.NamedTarget, read func(ctx context.Context, t cli.NamedTarget) (T, error)) []targetResult[T] {
	out := make([]targetResult[T], len(ts))
	checks := checkTargets(ctx, ts)
	var wg sync.WaitGroup
	for i, t := range ts {
		out[i].target = t
		if checks[i] != nil {
			out[i].err = checks[i]
			continue
		}
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, targetTimeout)
			defer cancel()
			out[i].value, out[i].err = read(rctx, t)
		})
	}
	wg.Wait()
	return out
}

// targetError is the one line of a target that could not be read.
func (a *app) targetError(name string, err error) string {
	return cli.Message(cli.ForTarget(name, err), a.secrets...)
}

// statusTargets is status over named targets: a section per database (-o
// table), one row set with a leading target column (-o tsv), or one JSON
// object {"verdict", "targets": [{"target", "status" | "error"}]} (-o json).
//
// With at set (--at), each database's moment is rebuilt from its history
// (replay.History) instead of read live: each section opens with its REPLAY
// line (on stderr for TSV), each status object carries its replay object.
func (a *app) statusTargets(ctx context.Context, ts []cli.NamedTarget, scopes []string, output string, src sourceFlags, at time.Time) error {
	results := readTargets(ctx, ts, func(ctx context.Context, t cli.NamedTarget) (*collector.Snapshot, error) {
		if !at.IsZero() {
			h, err := readHistory(ctx, t.Config, at)
			if err != nil {
				return nil, err
			}
			snap := h.At(at)
			snap.Health.Database = redacted(t.Target)
			return snap, nil
		}
		c, err := newCollector(t.Target, collectorInterval, false, quietLogger(), src)
		if err != nil {
			return nil, err
		}
		return c.Poll(ctx)
	})
	return statusExit(a.writeStatusTargets(results, scopes, output)) // UNREACHABLE, unless a split brain is known elsewhere
}

// targetsStatusJSON is `pgleader status -o json` over named targets: the
// worst verdict of them all (UNREACHABLE for a database that could not be
// read, unless a split brain is known elsewhere), then each database.
type targetsStatusJSON struct {
	Verdict collector.Verdict  `json:"verdict"`
	Targets []targetStatusJSON `json:"targets"`
}

// targetStatusJSON is one database of targetsStatusJSON: its status (as
// statusJSON, verbatim) or why it could not be read.
type targetStatusJSON struct {
	Target string          `json:"target"`
	Status json.RawMessage `json:"status,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// targetErrorJSON is a database `pgleader history -o json` over named targets
// could not read, after the terms of those it could (targetTerm): a reader of
// the JSON alone knows what it lacks.
type targetErrorJSON struct {
	Target string `json:"target"`
	Error  string `json:"error"`
}

// writeStatusTargets prints what statusTargets read and returns the worst
// verdict among the databases, UNREACHABLE for one that could not be read.
// Errors go to stderr, in every format.
func (a *app) writeStatusTargets(results []targetResult[*collector.Snapshot], scopes []string, output string) collector.Verdict {
	worst := collector.VerdictOK
	var docs []targetStatusJSON
	for i, r := range results {
		name := r.target.Name
		if r.err != nil {
			worst = collector.VerdictUnreachable.WorseOf(worst)
			line := a.targetError(name, r.err)
			fmt.Fprintln(a.stderr, line) // errors on stderr, in every format
			switch output {
			case cli.FormatJSON:
				docs = append(docs, targetStatusJSON{Target: name, Error: line})
			case cli.FormatTable:
				fmt.Fprintf(a.stdout, "%s── %s ── %s (see stderr)\n", sectionGap(i), name, show.Verdict(collector.VerdictUnreachable))
			}
			continue
		}
		var b bytes.Buffer
		v := writeStatus(&b, r.value, scopes, output)
		if v.Known() {
			worst = v.WorseOf(worst)
		}
		switch output {
		case cli.FormatJSON:
			docs = append(docs, targetStatusJSON{Target: name, Status: bytes.TrimSpace(b.Bytes())})
		case cli.FormatTSV:
			if info := r.value.Replay; info != nil {
				fmt.Fprintln(a.stderr, name+": "+replayLine(info))
			}
			writePrefixedTSV(a.stdout, b.String(), name, i == 0)
		default:
			fmt.Fprintf(a.stdout, "%s── %s ── %s\n", sectionGap(i), name, termsafe.String(r.value.Health.Database))
			if info := r.value.Replay; info != nil {
				writeReplayHead(a.stdout, info)
			}
			_, _ = io.Copy(a.stdout, &b)
		}
	}
	if output == cli.FormatJSON {
		_ = cli.WriteJSON(a.stdout, targetsStatusJSON{Verdict: worst, Targets: docs})
	}
	return worst
}

// collectorInterval is the poll interval of a collector that reads once.
const collectorInterval = 2 * time.Second

func sectionGap(i int) string {
	if i == 0 {
		return ""
	}
	return "\n"
}

// writePrefixedTSV writes the TSV text of one target with a leading target
// column: its header line only for the first target.
func writePrefixedTSV(w io.Writer, text, name string, first bool) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for j, l := range lines {
		switch {
		case j == 0 && first:
			fmt.Fprintln(w, "target\t"+l)
		case j == 0:
		default:
			fmt.Fprintln(w, name+"\t"+l)
		}
	}
}

// termQuery is what history asks of each database.
type termQuery struct {
	scopes []string
	window termsWindow
	limit  int
}

// historyTargets is history over named targets: the newest terms of every
// database merged newest first (at most limit in all).
func (a *app) historyTargets(ctx context.Context, ts []cli.NamedTarget, q termQuery, output string) error {
	results := readTargets(ctx, ts, func(ctx context.Context, t cli.NamedTarget) ([]collector.Term, error) {
		return readTerms(ctx, t.Config, q.scopes, q.window, q.limit)
	})
	return a.writeHistoryTargets(results, q.limit, output)
}

// writeHistoryTargets prints what historyTargets read: the newest terms of
// every database merged newest first (at most limit in all); a database that
// could not be read is said on stderr, in the JSON too, and exits 6.
func (a *app) writeHistoryTargets(results []targetResult[[]collector.Term], limit int, output string) error {
	type row struct {
		term   collector.Term
		target string
	}
	var rows []row
	var errs []targetErrorJSON
	for _, r := range results {
		if r.err != nil {
			line := a.targetError(r.target.Name, r.err)
			fmt.Fprintln(a.stderr, line) // errors on stderr, in every format
			errs = append(errs, targetErrorJSON{Target: r.target.Name, Error: line})
			continue
		}
		for _, t := range r.value {
			rows = append(rows, row{t, r.target.Name})
		}
	}
	slices.SortStableFunc(rows, func(x, y row) int { return y.term.AcquiredAt.Compare(x.term.AcquiredAt) })
	rows = rows[:min(len(rows), limit)]
	terms, targets := make([]collector.Term, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		terms[i], targets[i] = r.term, r.target
	}
	if output == cli.FormatJSON && len(errs) > 0 {
		// The terms, then one {"target", "error"} per database that could not be
		// read: a reader of the JSON alone knows what it lacks.
		out := make([]any, 0, len(terms)+len(errs))
		for i, t := range terms {
			out = append(out, targetTerm{targets[i], t})
		}
		for _, e := range errs {
			out = append(out, e)
		}
		if err := cli.WriteJSON(a.stdout, out); err != nil {
			return err
		}
	} else if err := writeTargetTerms(a.stdout, terms, targets, output); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &cli.StatusError{Code: cli.ExitUnreachable}
	}
	return nil
}
