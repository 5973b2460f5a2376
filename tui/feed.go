package tui

import (
	"context"
	"os"
	"time"

	"github.com/pgleader/pgleader/collector"
)

// Feed is what the dashboard reads; *collector.Collector satisfies it.
type Feed interface {
	// Snapshot returns the latest snapshot, or nil before the first read.
	Snapshot() *collector.Snapshot
	// Updates delivers snapshots, latest wins (a slow reader skips some). The
	// channel is closed when the collector stops; the func unsubscribes.
	Updates() (<-chan *collector.Snapshot, func())
	// Subscribe delivers the ordered event stream with the given buffer; the func
	// unsubscribes.
	Subscribe(buffer int) (<-chan collector.Event, func())
	// Refresh asks for a read now.
	Refresh()
	// SetPollInterval changes the poll interval.
	SetPollInterval(time.Duration)
	// PollInterval returns the poll interval.
	PollInterval() time.Duration
}

// Actions are operator actions, enabled only with --allow-actions; a nil
// Actions makes the dashboard read-only. The dashboard asks y/N before each.
// *collector.Collector has Evict and Resign as they are; `pgleader top` adapts
// its Handover (which takes a timeout and reports the new term).
type Actions interface {
	// Evict terminates the backend of the scope holder's leadership session, so
	// that a follower takes over at once; in-flight work is cut off. It is the
	// action for a leader that no longer heartbeats (key x).
	Evict(ctx context.Context, scope, reason string) error
	// Resign asks the scope's holder through the database to hand over
	// gracefully: it drains in-flight work, releases, and a follower takes over
	// within about one heartbeat interval (key R).
	Resign(ctx context.Context, scope, reason string) error
	// Handover asks the scope's leader through the database to hand the scope
	// to the node to, and returns once to leads it, or with why not: refused
	// (nothing changed), timed out (the request withdrawn), or another node took
	// over. A scope without a leader is reserved for to, which claims it. via
	// names the tool in the audit (key O).
	Handover(ctx context.Context, scope, to, via string) error
}

// Faults are the demo's fault keys (nil outside `pgleader demo`). A fault acts
// on the selected scope without confirmation.
type Faults interface {
	// Keys lists the fault keys, e.g. {Key: "k", Help: "kill -9 leader"}. A key
	// the dashboard already uses is ignored (and said so in the event log).
	Keys() []FaultKey
	// Do runs the fault bound to key against scope and returns a one-line
	// message for the event log.
	Do(ctx context.Context, key string, scope string) (string, error)
}

// FaultKey is one fault key and its help text.
type FaultKey struct{ Key, Help string }

// Options configure the dashboard. The zero value is a read-only dashboard.
type Options struct {
	// Database names the database while nothing has been read yet
	// ("connecting to <Database>…"); afterwards Health.Database is shown.
	Database string
	// DSN, when set, is shown in the header in full, to be pasted into psql or
	// pgleader --dsn, and the copy key (c) puts it on the terminal's clipboard
	// (OSC 52). The demo sets it: its database is throwaway. It must carry no
	// password: it is printed as it is.
	DSN string
	// Actions enables operator actions (nil = read-only).
	Actions Actions
	// Faults enables the demo's fault keys (nil = none).
	Faults Faults
	// NoColor renders without colours (glyphs and words still say everything).
	// The NO_COLOR environment variable has the same effect.
	NoColor bool
	// Theme picks the colours for a light or a dark background; the default,
	// ThemeAuto, asks the terminal. No effect with NoColor.
	Theme Theme
	// Now is the wall clock, for "updated Ns ago"; tests fix it. Default time.Now.
	Now func() time.Time
	// Title is the header's first word. Default "pgleader top".
	Title string
	// Notes, when set, are lines for the event log from outside the collector
	// (the demo reports measured failover times through it).
	Notes <-chan string
	// Replay, when set, lets the dashboard step back in time: [ from live
	// enters replay at the last transition, and stepping past a window of
	// history reads the next one through it. Over a fleet, a ReplayFleet.
	Replay Replayer
	// ReplayFrom and ReplayAt open the dashboard in replay mode at ReplayAt,
	// from windows of history already read (pgleader top --at): one, of
	// Database "", for one database; one per database over a fleet.
	ReplayFrom []DatabaseHistory
	ReplayAt   time.Time
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Title == "" {
		o.Title = "pgleader top"
	}
	if os.Getenv("NO_COLOR") != "" {
		o.NoColor = true
	}
	return o
}
