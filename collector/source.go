package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgleader/pgleader/collector/logical"
	"github.com/pgleader/pgleader/internal/pgdial"
	"github.com/pgleader/pgleader/internal/pooler"
)

// ErrLogicalUnavailable is wrapped by the error Run returns when Config.Source is
// SourceModeLogical and the database cannot serve the logical source. The error
// says why (wal_level, the role's REPLICATION attribute, the publication, …) and
// how to fix it.
var ErrLogicalUnavailable = errors.New("collector: the logical replication source is unavailable")

const (
	appStream = "pgleader-collector stream"
	// streamCloseTimeout bounds the close of a stream (the server answers its
	// last status update within milliseconds), and then the wait for the server
	// to release the slot.
	streamCloseTimeout = 2 * time.Second
	// lagEvery: a permanent slot's lag is measured at most this often.
	lagEvery = time.Second
)

// feedKind is the source Run settled on (Collector.feed).
type feedKind int32

const (
	feedUndecided feedKind = iota // Run has not checked the database yet
	feedNotify                    // LISTEN leader_change
	feedTemporary                 // logical stream on a temporary slot
	feedPermanent                 // logical stream on Config.Slot
)

// follow runs the source Config.Source selects until ctx ends. A database that
// cannot serve an explicitly asked logical source ends Run through stop, with
// c.fatal saying why.
func (c *Collector) follow(ctx context.Context, stop context.CancelFunc) {
	if c.cfg.Source == SourceModeNotify {
		c.feed.Store(int32(feedNotify))
		c.listen(ctx)
		return
	}
	pcfg := c.streamConnConfig()
	reason := c.checkLogical(ctx, pcfg)
	if ctx.Err() != nil {
		return
	}
	if reason == "" {
		if reason = c.stream(ctx, pcfg); reason == "" {
			return
		}
	}
	if c.cfg.Source == SourceModeLogical {
		c.fatal = c.unavailable(reason)
		stop()
		return
	}
	attrs := []any{"reason", reason, "database", c.database}
	if c.cfg.Slot != "" {
		attrs = append(attrs, "unused_slot", c.cfg.Slot)
	}
	c.log.Info("collector source: LISTEN/NOTIFY, the logical replication source is unavailable", attrs...)
	c.fallBack()
	c.listen(ctx)
}

// streamConnConfig is the configuration of the stream's connections (and of the
// availability check): ISO dates, so that timestamps decode; a bounded connect.
func (c *Collector) streamConnConfig() *pgconn.Config {
	cc := c.dial.Config(appStream, map[string]string{"DateStyle": "ISO, MDY"})
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = pgdial.ConnectTimeout
	}
	return &cc.Config
}

// checkLogical asks logical.Available, retrying with backoff while the database
// cannot be reached. It returns why the logical source is unavailable, "" when
// it is (or when ctx ended).
func (c *Collector) checkLogical(ctx context.Context, pcfg *pgconn.Config) string {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*pgdial.ConnectTimeout)
		ok, reason, err := logical.Available(actx, pcfg)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ""
		case err == nil && ok:
			return ""
		case err == nil:
			return reason
		case pooler.StartupRefused(err):
			c.dial.MarkPooled()
			return "a connection pooler is in the way (it refused a replication connection): logical replication needs PostgreSQL itself"
		}
		c.noteSourceError("logical source check", err)
		if attempt == 1 {
			c.log.Warn("collector cannot check whether the database offers logical replication; retrying with backoff",
				"database", c.database, "err", err)
			c.Refresh() // the reader reports the outage meanwhile
		}
		sleepCtx(ctx, backoff(attempt))
	}
}

// unavailable words the error of an explicitly asked logical source that the
// database cannot serve: the reason and the fixes that match it.
func (c *Collector) unavailable(reason string) error {
	fixes := []string{fmt.Sprintf("use LISTEN/NOTIFY instead (--source notify; Config.Source %q)", SourceModeNotify)}
	if strings.Contains(reason, "wal_level") {
		fixes = append(fixes, "set wal_level to logical (ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)")
	}
	if strings.Contains(reason, "REPLICATION") {
		fixes = append(fixes, fmt.Sprintf("give the collector's role the REPLICATION attribute (ALTER ROLE %s REPLICATION)",
			sqlIdent(c.cfg.ConnConfig.User)))
	}
	if strings.Contains(reason, "max_wal_senders") || strings.Contains(reason, "max_replication_slots") {
		fixes = append(fixes, "raise max_wal_senders and max_replication_slots (then restart PostgreSQL)")
	}
	if strings.Contains(reason, "refused") {
		fixes = append(fixes, "let the role open replication connections to this database (pg_hba.conf, connection limits)")
	}
	if strings.Contains(reason, "publication") {
		fixes = append(fixes, "run `pgleader migrate` (schema version 3 creates the publication)")
	}
	return fmt.Errorf("%w on %s: %s; fix: %s", ErrLogicalUnavailable, c.database, reason, strings.Join(fixes, "; or "))
}

// sqlIdent writes a role name for a statement to paste: bare when PostgreSQL
// would read it unchanged, quoted otherwise.
func sqlIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			plain = false
		}
	}
	if plain {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// fallBack switches to LISTEN/NOTIFY after the logical source turned out to be
// unavailable. A permanent slot's first read took the audit window for the
// alerts only: the next read replays it as events, as a notify collector's first
// read does.
func (c *Collector) fallBack() {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if feedKind(c.feed.Load()) == feedPermanent {
		c.st.auditStarted = false
	}
	c.slotName, c.slotLag = "", -1
	c.feed.Store(int32(feedNotify))
}

// stream runs the logical source until ctx ends, re-opening the stream with
// backoff (polling meanwhile). It returns a reason only when its first stream
// cannot be opened for good: the publication is missing.
func (c *Collector) stream(ctx context.Context, pcfg *pgconn.Config) (unavailable string) {
	kind := feedTemporary
	if c.cfg.Slot != "" {
		kind = feedPermanent
	}
	c.setSlot(c.cfg.Slot)
	c.feed.Store(int32(kind))
	c.log.Info("collector source: logical replication", "database", c.database,
		"slot", cmp.Or(c.cfg.Slot, "(temporary)"), "permanent", kind == feedPermanent)
	lcfg := logical.Config{ConnConfig: pcfg, Slot: c.cfg.Slot, StatusInterval: c.cfg.StatusInterval, Logger: c.log}
	var resume *pglogrepl.LSN
	if kind == feedPermanent {
		resume = &lcfg.ResumeAfter // the stream drops what this run processed already
	}
	failures, opened := 0, false
	for ctx.Err() == nil {
		s, err := logical.Open(ctx, lcfg)
		if err != nil {
			if ctx.Err() != nil {
				return ""
			}
			if !opened && errors.Is(err, logical.ErrNoPublication) {
				return "the publication " + logical.DefaultPublication + " is missing (pgleader schema older than version 3)"
			}
			failures++
			c.noteSourceError("logical stream", err)
			if failures == 1 {
				c.log.Warn("collector cannot open its logical replication stream; polling until it can",
					"database", c.database, "err", err)
				c.Refresh()
			} else {
				c.log.Debug("collector could not open its logical replication stream again", "err", err, "attempt", failures)
			}
			sleepCtx(ctx, backoff(failures))
			continue
		}
		if opened {
			c.reconnects.Add(1)
		}
		if failures > 0 {
			c.log.Info("collector streams again", "database", c.database, "slot", s.Slot())
		}
		opened, failures = true, 0
		c.setSlot(s.Slot())
		c.streamUp.Store(true)
		// A temporary slot decodes only what commits after its creation: this read
		// takes the audit rows committed while no stream was open before the
		// stream's first transaction is handled, so events stay in order. It also
		// publishes the source. If it fails, reads keep taking the audit rows too
		// (the gate keeps them single).
		_, err = c.Poll(ctx)
		c.auditByStream.Store(kind == feedTemporary && err == nil)
		err = c.consume(ctx, s, resume)
		c.auditByStream.Store(false)
		c.streamUp.Store(false)
		closeStream(s)
		if kind == feedTemporary {
			c.setSlot("")
		}
		if ctx.Err() != nil {
			c.awaitSlotReleased(s.Slot())
			return ""
		}
		c.noteSourceError("logical stream", err)
		c.log.Warn("collector lost its logical replication stream; polling until it is back", "database", c.database, "err", err)
		c.Refresh() // publish the polling source, and read what the stream may not deliver
		failures = 1
		sleepCtx(ctx, backoff(failures))
	}
	return ""
}

// awaitSlotReleased waits, for at most streamCloseTimeout, until the server has
// released the slot of a closed stream: the walsender exits (and drops a
// temporary slot) an instant after the connection closes. So when Run returns,
// the slot can be opened again or dropped, and so can the database.
func (c *Collector) awaitSlotReleased(slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), streamCloseTimeout)
	defer cancel()
	conn, err := c.connect(ctx, appStream, nil)
	if err != nil {
		return // the server is unreachable: nothing to wait for from here
	}
	defer closeConn(conn)
	for {
		var busy bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots
		                            WHERE slot_name = $1 AND (active OR temporary))`, slot).Scan(&busy)
		if err != nil || !busy {
			return
		}
		if sleepCtx(ctx, 5*time.Millisecond); ctx.Err() != nil {
			c.log.Debug("collector's replication slot still in use after its stream closed", "slot", slot)
			return
		}
	}
}

func closeStream(s *logical.Stream) {
	ctx, cancel := context.WithTimeout(context.Background(), streamCloseTimeout)
	defer cancel()
	_ = s.Close(ctx) // the stream logs its end; a failed last status update only means a replay
}

func (c *Collector) setSlot(name string) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.slotName = name
}

// consume handles the stream's transactions until it fails or ctx ends. Each
// transaction's events are published before its end is acknowledged, so that
// a permanent slot sends again whatever was not published.
func (c *Collector) consume(ctx context.Context, s *logical.Stream, resume *pglogrepl.LSN) error {
	known := map[string]string{} // leader_state per scope, as last seen (leaderChanged)
	for {
		tx, err := s.Next(ctx)
		switch {
		case errors.Is(err, logical.ErrDecode):
			c.decodeError(s.Slot(), err)
			continue
		case err != nil:
			return err
		}
		c.lastChange.Store(time.Now().UnixNano())
		c.streamTxs.Add(1)
		if c.applyTx(tx, known, s.Slot()) {
			c.Refresh()
		}
		s.Ack(tx.EndLSN)
		if resume != nil {
			*resume = tx.EndLSN
		}
	}
}

// decodeError counts and logs a message (or an audit row) the stream could not
// decode, and asks for a read of the audit table: the rows of the transaction it
// dropped are above the highest id admitted or among the missing ones.
func (c *Collector) decodeError(slot string, err error) {
	c.decodeErrors.Add(1)
	c.log.Warn("collector could not decode a logical replication message; reading the audit table to make up for it",
		"slot", slot, "err", err)
	c.catchUpReq.Add(1)
	c.Refresh()
}

// applyTx publishes the events of one transaction and reports whether it changed
// what a read shows: an audit row, a term, or a leader_state change other than a
// heartbeat.
func (c *Collector) applyTx(tx logical.Tx, known map[string]string, slot string) (changed bool) {
	var (
		rows      []auditRow
		terms     []Term
		versions  []scopeMark
		truncated bool
	)
	for _, ch := range tx.Changes {
		switch ch.Table {
		case "audit":
			changed = true
			if ch.Op == "truncate" {
				// Retention, or RESTART IDENTITY: the ids of the rows after it may
				// start again. Rows inserted before it in this transaction are gone.
				truncated, rows = true, nil
				continue
			}
			if ch.Op != "insert" {
				continue // append-only: the table refuses updates and deletes
			}
			a, err := auditFromRow(ch.Row)
			if err != nil {
				c.decodeError(slot, fmt.Errorf("audit row committed at %s: %w", tx.CommitLSN, err))
				continue
			}
			rows = append(rows, a)
		case "terms":
			changed = true
			if t, ok := termFromRow(ch.Row); ok {
				terms = append(terms, t)
			}
		case "leader_state":
			if leaderChanged(known, ch) {
				changed = true
				versions = append(versions, leaderVersion(ch))
			}
		}
	}
	if len(rows) == 0 && len(terms) == 0 && len(versions) == 0 && !truncated {
		return changed
	}
	now := time.Now()
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	for _, m := range versions {
		c.st.noteStreamVersion(m.scope, m.v, now)
	}
	for _, t := range terms {
		c.st.noteTerm(t.Scope, t.Epoch, t.Holder)
	}
	var evs []Event
	if truncated {
		ev := c.st.streamTruncate(tx.CommitTime)
		ev.LSN = uint64(tx.CommitLSN)
		evs = append(evs, ev)
	}
	evs = append(evs, c.st.streamAudit(rows, tx.CommitTime, uint64(tx.CommitLSN))...)
	c.logEvents(evs)
	c.hub.publish(nil, evs)
	return changed
}

// leaderChanged reports whether a change of leader_state is one a read must show
// (a claim, a release, an edited epoch, a scope added or removed) rather than a
// heartbeat, which rewrites last_heartbeat of every led scope every interval.
// pgoutput sends no old tuple for an update that keeps the key (replica identity
// default), so the values are compared with the last ones seen of the scope; the
// first change of each scope after the stream opened counts.
func leaderChanged(known map[string]string, ch logical.Change) bool {
	if ch.Row == nil || ch.Old != nil { // delete, truncate, or the scope renamed
		clear(known)
		return true
	}
	scope := text(ch.Row, "scope")
	key := strings.Join([]string{text(ch.Row, "epoch"), text(ch.Row, "holder"), text(ch.Row, "holder_pid"),
		text(ch.Row, "released_at"), text(ch.Row, "lock_key")}, "\x00")
	if prev, ok := known[scope]; ok && prev == key {
		return false
	}
	known[scope] = key
	return true
}

// scopeMark is a leader_state change for noteStreamVersion.
type scopeMark struct {
	scope string        // "" with v nil: the table was truncated
	v     *scopeVersion // nil: the row is gone
}

// leaderVersion reads the version of a leader_state change.
func leaderVersion(ch logical.Change) scopeMark {
	if ch.Row == nil { // delete or truncate
		return scopeMark{scope: text(ch.Old, "scope")}
	}
	epoch, err := strconv.ParseInt(text(ch.Row, "epoch"), 10, 64)
	if err != nil {
		return scopeMark{scope: text(ch.Row, "scope")}
	}
	return scopeMark{scope: text(ch.Row, "scope"),
		v: &scopeVersion{epoch: epoch, released: text(ch.Row, "holder") == "" || text(ch.Row, "released_at") != ""}}
}

// text is a column of a decoded row ("" for NULL or absent).
func text(row map[string]*string, col string) string {
	if v := row[col]; v != nil {
		return *v
	}
	return ""
}

// auditFromRow converts a pgleader.audit row from the stream (text values) into
// what the audit poll scans. A detail that does not decode keeps zero values, as
// in the poll.
func auditFromRow(row map[string]*string) (auditRow, error) {
	var a auditRow
	id, err := strconv.ParseInt(text(row, "id"), 10, 64)
	if err != nil {
		return a, fmt.Errorf("id: %w", err)
	}
	var at pgtype.Timestamptz
	if err := at.Scan(text(row, "at")); err != nil || !at.Valid {
		return a, fmt.Errorf("audit row %d: at %q: %v", id, text(row, "at"), err)
	}
	a.ID, a.At = id, at.Time.Local()
	a.Scope, a.Node, a.Kind, a.Login = text(row, "scope"), text(row, "node_id"), text(row, "kind"), text(row, "session_role")
	if e := text(row, "epoch"); e != "" {
		if a.Epoch, err = strconv.ParseInt(e, 10, 64); err != nil {
			return a, fmt.Errorf("audit row %d: epoch: %w", id, err)
		}
	}
	_ = json.Unmarshal([]byte(text(row, "detail")), &a.Detail)
	return a, nil
}

// termFromRow reads the scope, epoch and holder of a pgleader.terms row.
func termFromRow(row map[string]*string) (Term, bool) {
	epoch, err := strconv.ParseInt(text(row, "epoch"), 10, 64)
	if err != nil || text(row, "scope") == "" {
		return Term{}, false
	}
	return Term{Scope: text(row, "scope"), Epoch: epoch, Holder: text(row, "holder")}, true
}

// auditPlan says how the next read takes the audit table (state.cursor): all of
// it on LISTEN/NOTIFY and while a temporary slot's stream is down, none while it
// streams, and on a permanent slot what planSlot says. catchUp: a read asked
// for after a decode error.
func (c *Collector) auditPlan(catchUp bool) auditPlan {
	switch feedKind(c.feed.Load()) {
	case feedUndecided:
		c.runMu.Lock()
		running := c.running
		c.runMu.Unlock()
		if running {
			return planSkip // Run decides first (Poll without Run reads as notify)
		}
	case feedTemporary:
		if c.auditByStream.Load() && !catchUp {
			return planSkip
		}
	case feedPermanent:
		return planSlot
	}
	return planPoll
}

// measureSlotLag refreshes Health.SlotLagBytes of a permanent slot, at most every
// lagEvery, on the reader connection.
func (c *Collector) measureSlotLag(ctx context.Context, conn *pgx.Conn, now time.Time) {
	if feedKind(c.feed.Load()) != feedPermanent {
		return
	}
	c.stateMu.Lock()
	due := now.Sub(c.lagAt) >= lagEvery
	c.stateMu.Unlock()
	if !due {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, readTimeout)
	lag, err := logical.SlotLag(qctx, conn, c.cfg.Slot)
	cancel()
	if err != nil {
		lag = -1 // not created yet, dropped, or the connection failed (the read will tell)
		c.log.Debug("collector cannot measure its slot's lag", "slot", c.cfg.Slot, "err", err)
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.slotLag, c.lagAt = lag, now
}
