package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// minReadGap spaces reads while notifications keep coming: the first one is
// read at once, a burst costs one read per gap.
const minReadGap = 5 * time.Millisecond

// reader is Run's reader connection and its reconnection state.
type reader struct {
	conn      *pgx.Conn
	connected bool // a connection was made before (the next one is a reconnect)
	failures  int  // consecutive failed reads or connects
	retryAt   time.Time
}

func (r *reader) close() {
	if r.conn != nil {
		closeConn(r.conn)
		r.conn = nil
	}
}

// loop is Run's reader: it reads on every tick, on Refresh, on notifications
// (within notifyBudget), on Poll requests, and when a reconnection is due.
func (c *Collector) loop(ctx context.Context, tasks *sync.WaitGroup) {
	defer close(c.loopDone)
	rd := &reader{}
	defer rd.close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		dirty     bool      // a read was asked for since the last one started
		lastStart time.Time // of the last read
		lastTick  = time.Now()
		nextTick  = lastTick.Add(c.PollInterval())
		budget    notifyBudget
	)
	// notifyDue is when a pending notification may be read.
	notifyDue := func() time.Time {
		return maxTime(lastStart.Add(minReadGap), budget.next(notifyCost(c.PollInterval())))
	}
	for {
		now := time.Now()
		due := nextTick
		if dirty {
			due = minTime(due, lastStart.Add(minReadGap))
		}
		if c.notifyPending.Load() {
			due = minTime(due, notifyDue())
		}
		if rd.conn == nil && !rd.retryAt.IsZero() {
			due = minTime(due, rd.retryAt)
		}
		timer.Reset(max(0, due.Sub(now)))
		var reply chan pollResult
		select {
		case <-ctx.Done():
			return
		case <-c.refreshCh:
			dirty = true
			continue
		case <-c.notifyCh:
			continue
		case <-c.intervalCh:
			nextTick = lastTick.Add(c.PollInterval())
			continue
		case reply = <-c.pollReq:
		case <-timer.C:
		}
		now = time.Now()
		tick := !now.Before(nextTick)
		if tick {
			lastTick, nextTick = now, now.Add(c.PollInterval())
		}
		asked := dirty && !now.Before(lastStart.Add(minReadGap))
		retry := rd.conn == nil && !rd.retryAt.IsZero() && !now.Before(rd.retryAt)
		notified := c.notifyPending.Load() && !now.Before(notifyDue())
		if reply == nil && !tick && !asked && !retry && !notified {
			continue
		}
		// Only a read that nothing but a notification asked for is charged.
		cost := time.Duration(0)
		if reply == nil && !tick && !asked && !retry {
			cost = notifyCost(c.PollInterval())
			budget.take(now, cost)
		}
		// From here on, a read covers every notification received so far.
		c.notifyPending.Store(false)
		dirty, lastStart = false, now
		snap, news, err := c.cycle(ctx, rd, now, reply != nil || retry, tasks)
		if news {
			budget.refund(cost) // the hint was right: a genuine change is never slowed
		}
		if reply != nil {
			reply <- pollResult{snap, err}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cycle makes one read on Run's reader connection, connecting first if needed,
// and reports whether the read published events (news). Without a connection
// and before its backoff has passed (unless force), it only re-publishes the
// outage, so Health and AlertCollectorDown stay current.
func (c *Collector) cycle(ctx context.Context, rd *reader, now time.Time, force bool, tasks *sync.WaitGroup) (snap *Snapshot, news bool, err error) {
	if rd.conn == nil && !force && now.Before(rd.retryAt) {
		c.publishDown(now)
		return nil, false, errors.New("collector: database unreachable (waiting to reconnect)")
	}
	fresh := false
	if rd.conn == nil {
		if err := c.connectRun(ctx, rd); err != nil {
			return nil, false, c.readFailed(ctx, rd, now, err)
		}
		fresh = true
	}
	src := SourcePolling
	switch {
	case c.streamUp.Load():
		src = SourceLogical
	case c.listening.Load():
		src = SourceLive
	}
	c.measureSlotLag(ctx, rd.conn, now)
	snap, orders, news, err := c.readAndApply(ctx, rd.conn, now, src, true)
	if err != nil && !fresh && ctx.Err() == nil && isConnErr(rd.conn, err) {
		// The connection died while idle (a restarted server, a terminated
		// backend): one immediate retry on a new one before declaring an outage.
		c.log.Info("collector reader connection lost; reconnecting", "err", err)
		rd.close()
		if err = c.connectRun(ctx, rd); err == nil {
			snap, orders, news, err = c.readAndApply(ctx, rd.conn, now, src, true)
		}
	}
	if err != nil {
		return nil, false, c.readFailed(ctx, rd, now, err)
	}
	if rd.failures > 0 {
		c.log.Info("collector reads the database again", "database", c.database, "after_failures", rd.failures)
	}
	rd.failures, rd.retryAt = 0, time.Time{}
	for _, o := range orders {
		tasks.Go(func() { c.autoEvict(ctx, o) })
	}
	return snap, news, nil
}

// connectRun opens Run's reader connection.
func (c *Collector) connectRun(ctx context.Context, rd *reader) error {
	conn, version, err := c.connectReader(ctx)
	if err != nil {
		return fmt.Errorf("collector: connect to %s: %w", c.database, err)
	}
	if rd.connected {
		c.reconnects.Add(1)
	}
	rd.conn, rd.connected = conn, true
	c.stateMu.Lock()
	c.version = version
	c.stateMu.Unlock()
	return nil
}

// readFailed records a failed read, schedules the next attempt and re-publishes
// the last good snapshot as disconnected.
func (c *Collector) readFailed(ctx context.Context, rd *reader, now time.Time, err error) error {
	rd.close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rd.failures++
	rd.retryAt = now.Add(backoff(rd.failures))
	c.noteError(err, now)
	if rd.failures == 1 {
		c.log.Warn("collector cannot read the database; retrying with backoff", "database", c.database, "err", err)
	} else {
		c.log.Debug("collector read failed again", "database", c.database, "err", err, "attempt", rd.failures)
	}
	c.publishDown(now)
	return err
}

func (c *Collector) publishDown(now time.Time) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	snap, evs := c.st.down(&c.cfg, now, c.healthLocked(SourceDisconnected))
	c.logEvents(evs)
	c.hub.publish(snap, evs)
}

// readAndApply reads once on conn and publishes the result; news: it published
// events.
func (c *Collector) readAndApply(ctx context.Context, conn *pgx.Conn, start time.Time, src Source, evict bool) (*Snapshot, []Holder, bool, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	catchUp := c.catchUpReq.Load()
	asked := catchUp > c.catchUpDone.Load()
	plan := c.auditPlan(asked)
	c.stateMu.Lock()
	cur := c.st.cursor(plan, asked)
	c.stateMu.Unlock()
	r, err := read(ctx, conn, &c.cfg, cur, readShape{pooled: c.dial.Pooled(), loginRole: c.nodesLoginRole.Load(), supervisor: c.nodesSupervisor.Load(), doorbell: c.nodesDoorbell.Load(), guards: c.guards.Load(), truth: c.truth.Load()})
	if err != nil {
		return nil, nil, false, fmt.Errorf("collector: read %s: %w", c.database, err)
	}
	if !cur.skip {
		c.catchUpDone.Store(max(c.catchUpDone.Load(), catchUp))
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.polls++
	c.lastPoll, c.pollDur = start, time.Since(start)
	snap, evs, orders := c.st.apply(&c.cfg, r, start, c.healthLocked(src))
	if !evict {
		for _, o := range orders {
			delete(c.st.evicted, o.Scope) // not acted on: a later Run may
		}
		orders = nil
	}
	c.logEvents(evs)
	c.hub.publish(snap, evs)
	if len(r.Audit) >= auditBatch || c.st.behind || c.st.auditReread {
		// More audit rows are waiting, a change the stream saw is not visible
		// yet, or the audit table was reset and the next read re-anchors.
		c.Refresh()
	}
	return snap, orders, len(evs) > 0, nil
}
