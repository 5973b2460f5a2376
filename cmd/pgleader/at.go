package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/internal/human"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/tui"
)

// atForms names the forms a TIME flag accepts, for its error.
const atForms = "RFC 3339 (2026-11-27T03:12:04.250Z), a local time 2026-11-27 03:12:04[.250], or a duration before now (-15m)"

// replayHelp is the paragraph the --at commands share: what a replay can
// and cannot rebuild (collector.Replay says it in full).
const replayHelp = `--at TIME shows a past moment rebuilt from pgleader.terms, pgleader.audit and
the current rows of leader_state and nodes: TIME is RFC 3339
(2026-11-27T03:12:04.250Z), a local time (2026-11-27 03:12:04, optionally
.250), or a duration before now (-15m). Rebuilt exactly: each scope's leader,
epoch, tenure and previous term; a holder that died shows as no leader from its
last heartbeat plus its trust window (the successor's handover gap records
it); retired scopes are left out while retired. Nodes: their current lifetime
(registered to stopped or last seen); before it a node is live only where it
held a term, else "unknown". Not rebuilt, shown as n/a: heartbeat ages (exact
only after a term's last heartbeat), lock holders other than the term's holder,
waiters, foreign sessions, the collector's health, and every alert but
no_leader. Candidate lists, priorities and timing are today's. A TIME in the
future is refused (exit 2).`

// parseAt parses the TIME of flag (--at, --since, --until) against now.
func parseAt(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		if d, err := time.ParseDuration(s[1:]); err == nil && d > 0 {
			return now.Add(-d), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.Local(), nil // shown as the database's times are: in the local zone
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04"} {
		// Parsing accepts a fraction after the seconds even where the layout has none.
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, cli.BadInput("--%s %q: not a time; use %s", flag, s, atForms)
}

// readHistory reads the window of history around at on a connection of its
// own (collector.ReadHistory) and rebuilds it (replay.New). A TIME in the
// future is bad input.
func readHistory(ctx context.Context, cfg *pgx.ConnConfig, at time.Time) (*replay.History, error) {
	cfg = cfg.Copy()
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // unnamed statements: through any pooler
	conn, err := pgsession.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := collector.ReadHistory(ctx, conn, at, collector.ReplayWindow)
	if errors.Is(err, collector.ErrReplayFuture) {
		return nil, cli.BadInput("--at: %v", err)
	}
	if err != nil {
		return nil, err
	}
	return replay.New(rows), nil
}

// topReplayer reads further windows of history for the dashboard.
type topReplayer struct{ cfg *pgx.ConnConfig }

var _ tui.Replayer = topReplayer{}

func (r topReplayer) History(ctx context.Context, at time.Time) (*replay.History, error) {
	return readHistory(ctx, r.cfg, at)
}

// replayLine is status's first line for a replayed moment: it cannot be
// mistaken for live.
func replayLine(info *collector.ReplayInfo) string {
	at := info.At.Format("2006-01-02 15:04:05.000 MST") // local: parseAt and pgx give local times
	return fmt.Sprintf("REPLAY %s — %s ago; heartbeat ages, locks and sessions cannot be rebuilt (n/a)",
		at, human.Duration(info.DBNow.Sub(info.At)))
}

// writeReplayHead writes the replay line and its notes.
func writeReplayHead(w io.Writer, info *collector.ReplayInfo) {
	fmt.Fprintln(w, replayLine(info))
	for _, n := range info.Notes {
		fmt.Fprintln(w, "note: "+termsafe.String(n))
	}
	fmt.Fprintln(w)
}

// statusAt prints status for a past moment: the table after the replay line
// (for TSV the line goes to stderr, the columns stay clean), JSON with a
// replay object.
func (a *app) statusAt(ctx context.Context, t cli.Target, at time.Time, scopes []string, output string) error {
	h, err := readHistory(ctx, t.Config, at)
	if err != nil {
		return err
	}
	snap := h.At(at)
	snap.Health.Database = redacted(t)
	switch output {
	case cli.FormatTable:
		writeReplayHead(a.stdout, snap.Replay)
	case cli.FormatTSV:
		fmt.Fprintln(a.stderr, replayLine(snap.Replay))
	}
	return statusExit(writeStatus(a.stdout, snap, scopes, output))
}
