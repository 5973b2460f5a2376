package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/internal/pgdial"
)

// Collector watches one pgleader database and publishes immutable Snapshots and an
// ordered stream of Events. Create it with New, run it with Run; Poll reads once
// without Run. Its methods are safe for concurrent use.
type Collector struct {
	cfg      Config
	log      *slog.Logger
	database string
	hub      *hub

	interval   atomic.Int64 // PollInterval, nanoseconds
	refreshCh  chan struct{}
	notifyCh   chan struct{} // wakes the loop for a notification (notifyPending)
	intervalCh chan struct{}
	pollReq    chan chan pollResult

	runMu    sync.Mutex
	started  bool
	running  bool
	loopDone chan struct{} // closed when Run stops serving Poll requests

	readMu sync.Mutex // one read (cursor, query, apply) at a time

	stateMu    sync.Mutex // guards st and the fields below
	st         *state
	polls      uint64
	pollErrors uint64
	lastPoll   time.Time
	pollDur    time.Duration
	version    string
	lastErr    string
	lastErrAt  time.Time

	listening atomic.Bool
	dial      *pgdial.Dialer // opens every connection; knows whether a pooler is in the way
	// nodesLoginRole: watch_nodes_v1 has login_role, as the last reader
	// connection found it (connectReader); reads on it select the column.
	nodesLoginRole atomic.Bool
	// nodesSupervisor: watch_nodes_v1 has supervisor (schema 15), as the last
	// reader connection found.
	nodesSupervisor atomic.Bool
	// nodesDoorbell: watch_nodes_v1 has doorbell_why_not (schema 17, the
	// doorbell), as the last connection's catalog said.
	nodesDoorbell atomic.Bool
	// guards: the schema has the caller proofs' tables and read grants (schema
	// 16: fence_waits, fenced_blockers, may_campaign), as the last connection
	// found.
	guards        atomic.Bool
	truth         atomic.Bool // schema 17: terms' last_sign, nodes' restarts
	notifications atomic.Uint64
	notifyPending atomic.Bool   // a notification arrived since the last read started
	coalesced     atomic.Uint64 // notifications that arrived while one was pending
	reconnects    atomic.Uint64

	// The source of changes between polls (source.go).
	feed          atomic.Int32  // feedKind, decided by Run
	streamUp      atomic.Bool   // a logical stream is open (Health.Source logical)
	auditByStream atomic.Bool   // temporary slot: the stream delivers the audit rows
	catchUpReq    atomic.Uint64 // reads of the audit table asked for after a decode error
	catchUpDone   atomic.Uint64 // the last of them a read served (under readMu)
	lastChange    atomic.Int64  // unix ns of the stream's last transaction
	streamTxs     atomic.Uint64
	decodeErrors  atomic.Uint64
	fatal         error // why the source cannot run (written by Run's feed goroutine before it cancels)

	// Under stateMu.
	slotName string
	slotLag  int64 // -1: unknown or not a permanent slot
	lagAt    time.Time
}

// ErrClosed: Run was called on a collector that has run already.
var ErrClosed = errors.New("collector: already run (a Collector runs once)")

type pollResult struct {
	snap *Snapshot
	err  error
}

// New checks cfg (see Config.Validate) and returns a collector. It does not
// connect: Run and Poll do.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc := cfg.ConnConfig
	c := &Collector{
		cfg: cfg, log: cfg.Logger, hub: newHub(), st: newState(),
		database:   fmt.Sprintf("%s @ %s:%d", cc.Database, cc.Host, cc.Port),
		refreshCh:  make(chan struct{}, 1),
		notifyCh:   make(chan struct{}, 1),
		intervalCh: make(chan struct{}, 1),
		pollReq:    make(chan chan pollResult),
		loopDone:   make(chan struct{}),
		slotLag:    -1,
	}
	c.dial = pgdial.New(cc, c.poolerFound)
	c.interval.Store(int64(cfg.PollInterval))
	return c, nil
}

// Snapshot returns the latest snapshot, nil before the first successful read.
// Snapshots are immutable: never modify one.
func (c *Collector) Snapshot() *Snapshot { return c.hub.current.Load() }

// Updates subscribes to snapshots, latest wins: the channel has a buffer of one,
// and a snapshot not yet taken is replaced by the next, so a slow reader misses
// intermediate snapshots, never the newest. The current snapshot, if any, is in
// the buffer at once. cancel unsubscribes and closes the channel; the channel is
// also closed when Run returns (at once, if Run has returned already).
func (c *Collector) Updates() (<-chan *Snapshot, func()) { return c.hub.subscribeUpdates() }

// Subscribe returns the ordered event stream (Event.Seq increases by one per
// event of the collector). Delivery never blocks the collector: events wait in a
// queue of the subscription until the channel (buffer DefaultEventBuffer if
// buffer ≤ 0) has room, so a burst — two events per scope of a mass failover,
// at once — reaches a subscriber that reads on. Only a subscriber that stopped
// reading while 65536 events queued up for it loses events: they are counted in
// Health.DroppedEvents, and the next event it gets is an EventDropped saying
// how many it missed. cancel unsubscribes and closes the channel; the channel is
// also closed when Run returns, after what is still queued goes into it as far
// as it fits without waiting (the rest is counted as dropped).
func (c *Collector) Subscribe(buffer int) (<-chan Event, func()) {
	return c.hub.subscribeEvents(buffer)
}

// Refresh asks Run for a read now. It does not block; requests made while a read
// is pending or running are coalesced into one more read.
func (c *Collector) Refresh() {
	select {
	case c.refreshCh <- struct{}{}:
	default:
	}
}

// SetPollInterval changes the poll interval, clamped to [MinPollInterval,
// MaxPollInterval]. The next tick comes d after the previous one.
func (c *Collector) SetPollInterval(d time.Duration) {
	d = min(max(d, MinPollInterval), MaxPollInterval)
	c.interval.Store(int64(d))
	select {
	case c.intervalCh <- struct{}{}:
	default:
	}
}

// PollInterval returns the current poll interval.
func (c *Collector) PollInterval() time.Duration { return time.Duration(c.interval.Load()) }

// Run watches the database until ctx ends, then returns nil. It keeps a reader
// connection and the source of Config.Source — a listener connection (LISTEN
// leader_change) or a logical replication stream — and re-opens each with
// backoff (100ms doubling to 5s) for as long as it runs; while reads fail it
// re-publishes the last good snapshot with Health.Source = disconnected. With
// Config.Source = SourceModeLogical and a database that cannot serve the logical
// source, Run returns an error wrapping ErrLogicalUnavailable that says why and
// how to fix it. Run returns only after every goroutine it started has stopped,
// and closes the channels of Updates and Subscribe. A Collector runs once: a
// second call returns ErrClosed.
func (c *Collector) Run(ctx context.Context) error {
	c.runMu.Lock()
	if c.started {
		c.runMu.Unlock()
		return ErrClosed
	}
	c.started, c.running = true, true
	c.runMu.Unlock()
	defer c.hub.close()
	defer func() {
		c.runMu.Lock()
		c.running = false
		c.runMu.Unlock()
	}()

	c.log.Info("collector starting", "database", c.database, "poll_interval", c.PollInterval(), "source", c.cfg.Source)
	ctx, cancel := context.WithCancel(ctx)
	var tasks sync.WaitGroup
	tasks.Go(func() { c.follow(ctx, cancel) })
	c.loop(ctx, &tasks)
	cancel()
	tasks.Wait()
	c.log.Info("collector stopped", "database", c.database)
	return c.fatal // logged by the caller
}

// Poll makes one full read and returns its snapshot. While Run runs, the read is
// made by Run (on its connection, published as usual); otherwise Poll opens a
// connection of its own and closes it afterwards (for one-shot tools such as
// `pgleader status`), and checks that depend on how long a condition lasted
// (grace, NoLeaderAfter) only see what this and earlier reads observed.
func (c *Collector) Poll(ctx context.Context) (*Snapshot, error) {
	c.runMu.Lock()
	running := c.running
	c.runMu.Unlock()
	if running {
		reply := make(chan pollResult, 1)
		select {
		case c.pollReq <- reply:
			select {
			case r := <-reply:
				return r.snap, r.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case <-c.loopDone: // Run is ending: read alone
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	conn, version, err := c.connectReader(ctx)
	if err != nil {
		err = fmt.Errorf("collector: connect to %s: %w", c.database, err)
		c.noteError(err, time.Now())
		return nil, err
	}
	defer closeConn(conn)
	c.stateMu.Lock()
	c.version = version
	c.stateMu.Unlock()
	snap, _, _, err := c.readAndApply(ctx, conn, time.Now(), SourcePolling, false)
	if err != nil {
		c.noteError(err, time.Now())
		return nil, err
	}
	return snap, nil
}

// healthLocked returns the collector's health; stateMu must be held.
func (c *Collector) healthLocked(src Source) Health {
	return Health{
		Source: src, Database: c.database, ServerVersion: c.version,
		LastPoll: c.lastPoll, PollDuration: c.pollDur, LastError: c.lastErr, LastErrorAt: c.lastErrAt, Pooler: c.dial.Pooled(),
		Polls: c.polls, PollErrors: c.pollErrors,
		Notifications: c.notifications.Load(), NotificationsCoalesced: c.coalesced.Load(),
		Reconnects: c.reconnects.Load(), DroppedEvents: c.hub.dropped.Load(),
		Slot: c.slotName, SlotLagBytes: c.slotLag, LastChange: unixNano(c.lastChange.Load()),
		Transactions: c.streamTxs.Load(), DecodeErrors: c.decodeErrors.Load(),
	}
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// noteError records a failed read or connection for Health.
func (c *Collector) noteError(err error, at time.Time) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.pollErrors++
	c.lastErr, c.lastErrAt = err.Error(), at
}

// noteSourceError records a failure of the listener or the stream for Health
// (not a poll error); what names which.
func (c *Collector) noteSourceError(what string, err error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.lastErr, c.lastErrAt = what+": "+err.Error(), time.Now()
}

// logEvents logs the transitions worth a line: source changes and alerts.
func (c *Collector) logEvents(evs []Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case EventSourceChanged:
			c.log.Warn("collector source changed", "change", ev.Detail, "database", c.database)
		case EventAlertFiring:
			lvl := slog.LevelWarn
			if ev.Alert.Severity == SeverityCritical {
				lvl = slog.LevelError
			}
			c.log.Log(context.Background(), lvl, "alert firing", "alert", ev.Alert.Kind, "severity", ev.Alert.Severity,
				"scope", ev.Alert.Scope, "node", ev.Alert.Node, "summary", ev.Alert.Summary, "hint", ev.Alert.Hint)
		case EventAlertResolved:
			c.log.Info("alert resolved", "alert", ev.Alert.Kind, "scope", ev.Alert.Scope, "node", ev.Alert.Node,
				"since", ev.Alert.Since)
		case EventAuditReset:
			c.log.Warn("audit history reset", "database", c.database, "reason", ev.Detail)
		}
	}
}
