package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/notifybudget"
	"github.com/pgleader/pgleader/protocol"
)

const (
	// notifyBurst and notifyShare bound the reads that notifications cause and
	// that find nothing new (notifyBudget): notifyBurst of them after a quiet
	// spell, then one per PollInterval/notifyShare.
	notifyBurst = 8
	notifyShare = 4
	// listenPing: a listener that heard nothing for this long pings its
	// connection, so a silently dead path is noticed even without keepalives.
	listenPing = 30 * time.Second
	// listenBudget and listenBudgetBytes bound what the listener takes in per
	// notifybudget.Window, before any read: receiving a notification costs the
	// collector a parse whatever it does next. A legitimate burst — each scope
	// of a claim or release batch announced, a failover releasing and claiming —
	// stays below it up to about 2,000 scopes; beyond, the collector polls for
	// a second (notifybudget.DeafFor), as it does for a flood.
	listenBudget      = 8192
	listenBudgetBytes = listenBudget * 512
)

// errFlood: the listener took in more than its budget in one window.
var errFlood = errors.New("notification flood on leader_change")

// listen keeps the listener connection: LISTEN first, then ask for a full read,
// then turn every notification into a read request (notified). Payloads are not
// read: anyone may NOTIFY anything on the channel. Past its budget (a flood) the
// listener closes its connection, which drops what the server still queues for
// it unread, and the collector polls for notifybudget.DeafFor before it listens
// again.
func (c *Collector) listen(ctx context.Context) {
	failures := 0
	connected := false
	floods := 0
	var since time.Time // when the listener last began to listen
	for ctx.Err() == nil {
		conn, err := c.connect(ctx, appListener, nil)
		if err == nil && c.dial.Pooled() {
			// Through a pooler a LISTEN would register on whichever server
			// connection ran it: poll only (connect said so once).
			closeConn(conn)
			c.Refresh() // Health.Pooler says why it polls
			return
		}
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+protocol.NotifyChannel); err != nil {
				closeConn(conn)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.noteSourceError("listener", err)
			if failures == 1 {
				c.log.Warn("collector cannot LISTEN; polling only until it can", "database", c.database, "err", err)
				c.Refresh() // read anyway (at start-up: the first read)
			}
			sleepCtx(ctx, backoff(failures))
			continue
		}
		if connected {
			c.reconnects.Add(1)
		}
		if failures > 0 {
			c.log.Info("collector listening again", "database", c.database)
		}
		connected, failures = true, 0
		since = time.Now()
		c.listening.Store(true)
		c.Refresh() // the full read that makes the notifications from now on sufficient
		err = c.wait(ctx, conn)
		c.listening.Store(false)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		c.noteSourceError("listener", err)
		failures = 1
		if errors.Is(err, errFlood) {
			if time.Since(since) >= notifybudget.CalmAfter {
				floods = 0
			}
			floods++
			d := notifybudget.DeafFor(floods)
			c.log.Warn("collector stopped listening: notification flood; polling meanwhile", "database", c.database, "for", d, "err", err)
			c.Refresh() // publish the polling source now
			sleepCtx(ctx, d)
			continue
		}
		c.log.Warn("collector lost its LISTEN connection; polling until it is back", "database", c.database, "err", err)
		c.Refresh() // publish the polling source now
		sleepCtx(ctx, backoff(failures))
	}
}

// wait turns notifications into reads (notified) until the connection fails, the
// budget runs out (errFlood) or ctx ends.
func (c *Collector) wait(ctx context.Context, conn *pgx.Conn) error {
	budget := notifybudget.New(listenBudget, listenBudgetBytes)
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if !budget.Admit(time.Now(), n.PID, len(n.Payload)) {
				count, bytes := budget.Window()
				return fmt.Errorf("%w: %d notifications, %d bytes within %v (top senders: %s)",
					errFlood, count, bytes, notifybudget.Window, budget.TopSenders())
			}
			c.notified()
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, readTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		return err
	}
}

// notified records a notification and asks the loop for a read. The payload is
// not looked at: the read decides what changed. A notification that arrives
// while an earlier one still waits for its read is coalesced into that read.
func (c *Collector) notified() {
	c.notifications.Add(1)
	if c.notifyPending.Swap(true) {
		c.coalesced.Add(1)
		return
	}
	select {
	case c.notifyCh <- struct{}{}:
	default:
	}
}

// notifyBudget bounds the reads that notifications cause and that find nothing
// new. Anyone who may connect may NOTIFY leader_change as fast as the server
// lets them, and a notification is a hint: what it costs is a read. The budget
// is a token bucket (as a theoretical arrival time, GCRA): full after a quiet
// spell, notifyBurst reads, then one per PollInterval/notifyShare. A read that
// finds something new (it publishes an event) gives its token back, so genuine
// changes are read as fast as they come and only forged (or redundant)
// notifications are throttled.
type notifyBudget struct {
	tat time.Time // when the bucket would be full again
}

// notifyCost is the refill time of one token for a poll interval.
func notifyCost(poll time.Duration) time.Duration {
	return max(minReadGap, poll/notifyShare)
}

// next returns the earliest time a notification may be read with tokens of cost.
func (b *notifyBudget) next(cost time.Duration) time.Time {
	return b.tat.Add(-(notifyBurst - 1) * cost)
}

// take spends a token of cost at now.
func (b *notifyBudget) take(now time.Time, cost time.Duration) {
	b.tat = maxTime(b.tat, now).Add(cost)
}

// refund gives back a token of cost.
func (b *notifyBudget) refund(cost time.Duration) {
	b.tat = b.tat.Add(-cost)
}
