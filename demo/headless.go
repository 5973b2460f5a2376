package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
)

// headless runs until ctx ends, applying a fault every few seconds when o.Faults,
// then stops the nodes, judges the history and prints the summary.
func headless(ctx context.Context, o Options, l *lab) error {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 7))
	out := o.Out
	if o.Faults {
		fmt.Fprintf(out, "demo: a fault every 1.5–3s (seed %d: --seed %d repeats the schedule)\n", o.Seed, o.Seed)
	}
	kinds := []string{"kill9", "freeze", "hang", "resign"}
	if l.srv != nil {
		kinds = append(kinds, "pg-restart")
	}
	for _, s := range l.scopes { // faults strike a settled cluster
		if err := waitLeader(ctx, l, s, 15*time.Second); err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
	}
	for o.Faults && ctx.Err() == nil {
		sleep(ctx, time.Duration(1500+rng.IntN(1500))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		scope := l.scopes[rng.IntN(len(l.scopes))]
		if err := waitLeader(ctx, l, scope, 15*time.Second); err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		kind := kinds[rng.IntN(len(kinds))]
		if err := applyFault(ctx, l, kind, scope, out); err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("fault %s on %s: %w", kind, scope, err)
		}
	}
	if !o.Faults {
		<-ctx.Done() // just watch
	}
	end := monotime.Now()
	// Stop the nodes before judging: their last events are then on disk.
	l.c.Close()
	if _, err := l.c.Poll(); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	l.mu.Lock()
	faults := slices.Clone(l.faults)
	failovers := slices.Clone(l.failover)
	l.mu.Unlock()
	h, err := checker.ReadHistory(jctx, l.dsn, l.scopes, l.c.Events(), faults, end)
	if err != nil {
		return fmt.Errorf("read the history: %w", err)
	}
	expect := checker.Footprint{}
	if o.Faults && len(faults) > 0 {
		expect = checker.Footprint{Takeover: true, FaultApplied: true}
	}
	rep := checker.Check(h, expect)
	writeSummary(out, rep, failovers, len(faults))
	if !rep.OK() || rep.Figures.GateOverlap > 0 {
		return fmt.Errorf("demo: %w (see the summary)", ErrUnsafe)
	}
	return nil
}

// applyFault applies one fault to scope's leader and, for the faults that hold,
// undoes it once a follower took over.
func applyFault(ctx context.Context, l *lab, kind, scope string, out io.Writer) error {
	var (
		msg string
		w   *watch
		err error
	)
	switch kind {
	case "kill9":
		msg, w, err = l.kill9(ctx, scope)
	case "freeze":
		msg, w, err = l.freeze(ctx, scope)
	case "hang":
		msg, w, err = l.hang(ctx, scope)
	case "resign":
		msg, w, err = l.resign(ctx, scope)
	case "pg-restart":
		msg, err = l.restartPG(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s  FAULT %s\n", stamp(), msg)
	if w != nil {
		select {
		case f := <-w.done:
			fmt.Fprintf(out, "%s  failover %s: %s → %s (epoch %d) in %s\n", stamp(), f.Scope, f.From, f.To, f.Epoch, human.Duration(f.Duration))
		case <-time.After(20 * time.Second):
			return fmt.Errorf("no takeover within 20s after %s", kind)
		case <-ctx.Done():
		}
	}
	switch kind { // undo the faults that hold, as the keys' second press does
	case "freeze", "hang":
		uctx := context.WithoutCancel(ctx) // undone even when the run ends meanwhile
		sleep(uctx, 200*time.Millisecond)
		var undo string
		if kind == "freeze" {
			undo, _, err = l.freeze(uctx, scope)
		} else {
			undo, _, err = l.hang(uctx, scope)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s  %s\n", stamp(), undo)
	case "pg-restart":
		for _, s := range l.scopes {
			if err := waitLeader(ctx, l, s, 20*time.Second); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
	return nil
}

// waitLeader waits until scope has a running leader.
func waitLeader(ctx context.Context, l *lab, scope string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, _, err := l.leader(scope); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		if sleep(ctx, 20*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func stamp() string { return time.Now().Format("15:04:05.000") }

// writeSummary prints the verdict of a headless run.
func writeSummary(w io.Writer, rep checker.Report, failovers []Failover, faults int) {
	fmt.Fprintf(w, "\n── summary ─────────────────────────────────────────\n")
	fmt.Fprintf(w, "faults applied      %d\n", faults)
	byFault := map[string][]time.Duration{}
	var kinds []string
	for _, f := range failovers {
		if _, ok := byFault[f.Fault]; !ok {
			kinds = append(kinds, f.Fault)
		}
		byFault[f.Fault] = append(byFault[f.Fault], f.Duration)
	}
	fmt.Fprintf(w, "failovers           %d\n", len(failovers))
	for _, k := range kinds {
		ds := byFault[k]
		slices.Sort(ds)
		fmt.Fprintf(w, "  %-18s n=%d  median %s  max %s\n", k, len(ds), human.Duration(ds[len(ds)/2]), human.Duration(ds[len(ds)-1]))
	}
	fg := rep.Figures
	fmt.Fprintf(w, "gate overlap        %s\n", human.Duration(fg.GateOverlap))
	fmt.Fprintf(w, "stale writes        %d rejected by the database, %d accepted\n", fg.StaleRejected, fg.StaleAccepted)
	fmt.Fprintf(w, "fenced writes       %d acknowledged\n", fg.Acked)
	if rep.OK() && fg.GateOverlap == 0 {
		fmt.Fprintf(w, "verdict             SAFE: no violation of H1–H5\n")
		return
	}
	fmt.Fprintf(w, "verdict             UNSAFE\n")
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
	for _, m := range rep.Missing {
		fmt.Fprintf(w, "  missing: %s\n", m)
	}
}

// logRecords prints the nodes' leadership events as they come (headless).
func logRecords(w io.Writer, rs []eventlog.Record) {
	for _, r := range rs {
		var line string
		switch r.Event {
		case "gate_open":
			line = fmt.Sprintf("%s leads %s (epoch %d)", r.Node, r.Scope, r.Epoch)
		case "lost":
			line = fmt.Sprintf("%s lost %s (epoch %d): %s", r.Node, r.Scope, r.Epoch, r.Reason)
		case "resigned":
			line = fmt.Sprintf("%s handed %s over (epoch %d): %s", r.Node, r.Scope, r.Epoch, r.Reason)
		case "action_rejected":
			line = fmt.Sprintf("%s: a write under stale epoch %d of %s was refused by the database", r.Node, r.Epoch, r.Scope)
		case "process_exit":
			line = fmt.Sprintf("%s exited (%s)", r.Node, strings.TrimSpace(r.Reason))
		}
		if line != "" {
			fmt.Fprintf(w, "%s  %s\n", stamp(), line)
		}
	}
}

// logAlerts prints the collector's alerts as they fire and resolve (headless).
func logAlerts(ctx context.Context, w io.Writer, evs <-chan collector.Event) {
	for {
		var e collector.Event
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-evs:
			if !ok {
				return
			}
			e = ev
		}
		if e.Alert == nil || (e.Kind != collector.EventAlertFiring && e.Kind != collector.EventAlertResolved) {
			continue
		}
		verb := "ALERT"
		if e.Kind == collector.EventAlertResolved {
			verb = "resolved"
		}
		fmt.Fprintf(w, "%s  %s %s (%s): %s\n", stamp(), verb, e.Alert.Kind, e.Alert.Severity, e.Alert.Summary)
	}
}
