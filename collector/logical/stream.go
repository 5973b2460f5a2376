package logical

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgleader/pgleader/internal/pgsession"
)

// Tx is one committed transaction that changed at least one published table.
type Tx struct {
	// CommitLSN is where the transaction's commit record starts.
	CommitLSN pglogrepl.LSN
	// EndLSN is where its commit record ends: Ack it once the Tx is processed.
	EndLSN pglogrepl.LSN
	// CommitTime is the server's commit timestamp.
	CommitTime time.Time
	// Changes in the order the transaction made them.
	Changes []Change
}

// outBuffer is how many decoded transactions wait for Next before the stream stops
// reading from the server (it keeps sending status updates meanwhile).
const outBuffer = 64

// item is what the stream goroutine hands to Next: a Tx or a decode error.
type item struct {
	tx  Tx
	err error
}

// Stream is an open logical replication stream. Next and Ack may be called from
// different goroutines; Next itself from one goroutine at a time.
type Stream struct {
	cfg       Config
	conn      *pgconn.PgConn
	slot      string
	temporary bool
	log       *slog.Logger

	out    chan item     // decoded transactions and decode errors; closed when run ends
	cancel func()        // stops run
	done   chan struct{} // closed when run has returned
	err    error         // why run ended; written before out is closed

	closeOnce sync.Once
	closed    atomic.Bool
	closeErr  error

	acked      atomic.Uint64 // highest LSN passed to Ack (or the start position)
	received   atomic.Uint64 // highest WAL position received (see ReceivedLSN)
	reported   atomic.Uint64 // flush position of the last status update sent
	lastChange atomic.Int64  // unix nanoseconds when the last Tx was decoded

	// Owned by run.
	tx           txState
	idle         pglogrepl.LSN // WAL known to hold nothing undelivered (see confirmable)
	deliveredEnd pglogrepl.LSN // EndLSN of the last Tx handed towards Next
	skipped      int           // duplicates dropped because of ResumeAfter
}

// txState is the transaction being received.
type txState struct {
	active     bool // between Begin and Commit
	broken     bool // a message of it failed to decode: drop it at Commit
	xid        uint32
	commitTime time.Time
	changes    []Change
}

// Open connects in replication mode, creates or finds the slot, and starts
// streaming the publication. It does not reconnect: when Next returns an error
// that does not wrap ErrDecode, Close the stream and Open a new one (with
// backoff, and Config.ResumeAfter set to the last acked LSN).
func Open(ctx context.Context, cfg Config) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cc := cfg.ConnConfig.Copy()
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["replication"] = "database"
	pgsession.Apply(cc)
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("logical: connect for replication: %w", err)
	}
	s := &Stream{cfg: cfg, conn: conn, slot: cfg.Slot, temporary: cfg.Slot == "", log: cfg.Logger}
	start, err := s.prepare(ctx)
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	s.acked.Store(uint64(start))
	s.reported.Store(uint64(start))
	s.received.Store(uint64(start))

	runCtx, cancel := context.WithCancel(context.Background())
	s.out = make(chan item, outBuffer)
	s.cancel = cancel
	s.done = make(chan struct{})
	go s.run(runCtx)
	return s, nil
}

// prepare checks the server side, creates or finds the slot and starts
// replication. It returns the position the stream starts from.
func (s *Stream) prepare(ctx context.Context) (pglogrepl.LSN, error) {
	rows, err := simpleQuery(ctx, s.conn, `SELECT current_database(),
		   (SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'),
		   EXISTS (SELECT 1 FROM pg_publication WHERE pubname = '`+s.cfg.Publication+`')`)
	if err != nil {
		return 0, fmt.Errorf("logical: read server settings: %w", err)
	}
	db, timeoutMS, hasPub := rows[0][0], rows[0][1], rows[0][2] == "t"
	if !hasPub {
		return 0, fmt.Errorf("logical: %w: %s does not exist in database %s: run `pgleader migrate` (schema version 3 creates pgleader_events)",
			ErrNoPublication, s.cfg.Publication, db)
	}
	if ms, err := strconv.Atoi(timeoutMS); err == nil && ms > 0 {
		if limit := time.Duration(ms) * time.Millisecond / 2; s.cfg.StatusInterval > limit {
			return 0, fmt.Errorf("logical: status interval (%v) must be at most half of the server's wal_sender_timeout (%v), or the server may end the stream between two updates",
				s.cfg.StatusInterval, time.Duration(ms)*time.Millisecond)
		}
	}

	var start pglogrepl.LSN
	if s.temporary {
		var b [6]byte
		_, _ = rand.Read(b[:])
		s.slot = "pgleader_tmp_" + hex.EncodeToString(b[:])
		res, err := pglogrepl.CreateReplicationSlot(ctx, s.conn, s.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			return 0, fmt.Errorf("logical: create temporary replication slot: %w", err)
		}
		if start, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
			return 0, fmt.Errorf("logical: temporary slot %s: consistent point: %w", s.slot, err)
		}
		s.log.Info("logical replication slot created", "slot", s.slot, "temporary", true, "lsn", start.String())
	} else {
		if start, err = s.permanentSlot(ctx, db); err != nil {
			return 0, err
		}
	}
	start = max(start, s.cfg.ResumeAfter)

	err = pglogrepl.StartReplication(ctx, s.conn, s.slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + s.cfg.Publication + "'",
		},
	})
	if err != nil {
		return 0, s.slotError("start replication", err)
	}
	s.log.Info("logical replication started", "slot", s.slot, "temporary", s.temporary,
		"publication", s.cfg.Publication, "from", start.String())
	return start, nil
}

// permanentSlot finds or creates the named slot and returns its confirmed
// position.
func (s *Stream) permanentSlot(ctx context.Context, db string) (pglogrepl.LSN, error) {
	for attempt := 0; ; attempt++ {
		rows, err := simpleQuery(ctx, s.conn, `SELECT plugin, slot_type, coalesce(database, ''), active,
			       coalesce(active_pid, 0), coalesce(confirmed_flush_lsn::text, '')
			  FROM pg_replication_slots WHERE slot_name = '`+s.slot+`'`)
		if err != nil {
			return 0, fmt.Errorf("logical: read slot %s: %w", s.slot, err)
		}
		if len(rows) == 1 {
			r := rows[0]
			switch {
			case r[1] != "logical" || r[0] != "pgoutput":
				return 0, fmt.Errorf("logical: slot %s is a %s slot using %q, not a pgoutput logical slot: choose another Config.Slot", s.slot, r[1], r[0])
			case r[2] != db:
				return 0, fmt.Errorf("logical: slot %s belongs to database %s, not %s: choose another Config.Slot", s.slot, r[2], db)
			case r[3] == "t":
				return 0, fmt.Errorf("logical: %w: slot %s is in use by pid %s: another collector reads it", ErrSlotInUse, s.slot, r[4])
			}
			lsn, err := pglogrepl.ParseLSN(r[5])
			if err != nil {
				return 0, fmt.Errorf("logical: slot %s: confirmed_flush_lsn %q: %w", s.slot, r[5], err)
			}
			s.log.Info("logical replication slot resumed", "slot", s.slot, "confirmed_flush_lsn", lsn.String())
			return lsn, nil
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, s.conn, s.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" && attempt == 0 {
			continue // created concurrently by another collector: read it again
		}
		if err != nil {
			return 0, fmt.Errorf("logical: create replication slot %s: %w", s.slot, err)
		}
		lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return 0, fmt.Errorf("logical: slot %s: consistent point: %w", s.slot, err)
		}
		s.log.Info("logical replication slot created", "slot", s.slot, "temporary", false, "lsn", lsn.String())
		if s.cfg.ResumeAfter != 0 {
			// The slot the caller read before is gone: dropped, or left behind on a
			// primary that failed over (slots are not carried to a promoted standby
			// before PostgreSQL 17). Its position belongs to another WAL history;
			// this server's may be lower, and keeping it would drop (and confirm
			// unread) everything committed here up to it.
			s.log.Warn("logical replication slot created anew: the position read on the previous slot does not apply (the slot was dropped, or the database failed over)",
				"slot", s.slot, "previous_position", s.cfg.ResumeAfter.String(), "lsn", lsn.String())
			s.cfg.ResumeAfter = 0
		}
		return lsn, nil
	}
}

// slotError words the server's "slot is active" error (SQLSTATE 55006) with
// ErrSlotInUse.
func (s *Stream) slotError(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" {
		return fmt.Errorf("logical: %w: %s: %s", ErrSlotInUse, what, pgErr.Message)
	}
	return fmt.Errorf("logical: %s on slot %s: %w", what, s.slot, err)
}

// Slot returns the name of the stream's replication slot (the random name of a
// temporary one).
func (s *Stream) Slot() string { return s.slot }

// Next returns the next committed transaction that changed a published table,
// waiting for one as long as ctx allows (then it returns ctx.Err() and the stream
// stays usable). An error wrapping ErrDecode concerns one malformed message: the
// rest of its transaction was dropped and the stream goes on, so log it and call
// Next again. Any other error is final: Close the stream and open a new one.
func (s *Stream) Next(ctx context.Context) (Tx, error) {
	if s.closed.Load() {
		return Tx{}, fmt.Errorf("logical: %w", ErrClosed)
	}
	select {
	case it, ok := <-s.out:
		if !ok {
			return Tx{}, s.err
		}
		return it.tx, it.err
	case <-ctx.Done():
		return Tx{}, ctx.Err()
	}
}

// Ack records that every transaction up to lsn (normally a Tx's EndLSN) has been
// processed. The next status update reports it as the flush and apply position,
// so a permanent slot does not send those transactions again. Lower values than
// an earlier Ack are ignored. Safe for concurrent use.
func (s *Stream) Ack(lsn pglogrepl.LSN) {
	for {
		cur := s.acked.Load()
		if uint64(lsn) <= cur || s.acked.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// ReceivedLSN is the highest WAL position the stream has received: the start of
// the latest message, the end of the latest transaction, or the position of the
// latest keepalive (the server has nothing for the stream before it).
func (s *Stream) ReceivedLSN() pglogrepl.LSN { return pglogrepl.LSN(s.received.Load()) }

// AckedLSN is the highest position passed to Ack (at first, where the stream
// started).
func (s *Stream) AckedLSN() pglogrepl.LSN { return pglogrepl.LSN(s.acked.Load()) }

// ReportedLSN is the flush position of the last status update sent to the
// server: what the slot's confirmed_flush_lsn becomes.
func (s *Stream) ReportedLSN() pglogrepl.LSN { return pglogrepl.LSN(s.reported.Load()) }

// LastChange is when the stream last decoded a Tx (zero: not yet).
func (s *Stream) LastChange() time.Time {
	ns := s.lastChange.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Close stops the stream: it sends a last status update with the acked position,
// ends the replication (the server answers once it has read the update) and
// closes the connection (which drops a temporary slot). ctx bounds the wait;
// past it the connection is cut, and the server may not have read the update. Close returns when the stream's goroutine has
// ended; calling it again does nothing.
func (s *Stream) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			_ = s.conn.Conn().Close() // unblocks a write stuck on a dead peer
			<-s.done
		}
		s.closeErr = s.conn.Close(ctx)
		s.log.Info("logical replication stopped", "slot", s.slot, "acked", s.AckedLSN().String(),
			"reported", s.ReportedLSN().String())
	})
	return s.closeErr
}

// run owns the connection: it receives and decodes messages, hands transactions
// to Next and sends status updates on time. It ends on Close or on a connection
// error.
func (s *Stream) run(ctx context.Context) {
	defer close(s.done)
	err := s.loop(ctx)
	if ctx.Err() != nil {
		// Close: report the final position, then end the COPY and wait for the
		// server's answer, so that it has processed the report before the
		// connection closes. Closing a socket that still has unread data (the
		// server streams until it reads the CopyDone) resets the connection, and
		// the server drops what it had not read yet: the report, and with it the
		// last acknowledgements, which a permanent slot would then send again to
		// the next stream. Close's ctx bounds the wait (it cuts the connection).
		if s.sendStatus() == nil {
			_, _ = pglogrepl.SendStandbyCopyDone(context.Background(), s.conn)
		}
		err = fmt.Errorf("logical: %w", ErrClosed)
	} else {
		// The caller logs the error Next returns; this is the trace for debugging.
		s.log.Debug("logical replication stream ended", "slot", s.slot, "err", err)
	}
	s.err = err
	close(s.out)
}

func (s *Stream) loop(ctx context.Context) error {
	d := newDecoder()
	var pending []item // decoded, waiting for room in s.out
	nextStatus := time.Now().Add(s.cfg.StatusInterval)
	for {
		for len(pending) > 0 && trySend(s.out, pending[0]) {
			pending = pending[1:]
		}
		if !time.Now().Before(nextStatus) {
			if err := s.sendStatus(); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
		}
		if len(pending) > 0 {
			// Next is not keeping up: wait for room, but keep the server's
			// wal_sender_timeout at bay.
			t := time.NewTimer(time.Until(nextStatus))
			select {
			case s.out <- pending[0]:
				pending = pending[1:]
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
			continue
		}

		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		raw, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue // a status update is due
			}
			return fmt.Errorf("logical: receive on slot %s: %w", s.slot, err)
		}
		switch m := raw.(type) {
		case *pgproto3.CopyData:
			var reply bool
			pending, reply = s.handle(d, m.Data, pending)
			if reply {
				nextStatus = time.Time{} // answer at the top of the loop
			}
		case *pgproto3.ErrorResponse:
			return s.slotError("replication stream", pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyDone:
			return fmt.Errorf("logical: the server ended the replication stream of slot %s", s.slot)
		}
	}
}

func trySend(ch chan item, it item) bool {
	select {
	case ch <- it:
		return true
	default:
		return false
	}
}

// handle decodes one CopyData payload, advances the transaction being received
// and appends what Next should see to pending. reply reports a keepalive that
// asks for a status update now.
func (s *Stream) handle(d *decoder, data []byte, pending []item) (_ []item, reply bool) {
	if s.cfg.tap != nil {
		s.cfg.tap(append([]byte(nil), data...))
	}
	m, err := decode(d, data)
	s.seen(m.walStart)
	if err != nil {
		// One error per transaction: what follows a broken message of it (say,
		// changes of a relation whose description failed) is a consequence.
		quiet := s.tx.active && s.tx.broken && m.typ != byte(pglogrepl.MessageTypeBegin)
		switch {
		case m.typ == byte(pglogrepl.MessageTypeBegin):
			s.tx = txState{active: true, broken: true}
			err = fmt.Errorf("%w (the transaction it begins is dropped)", err)
		case m.typ == byte(pglogrepl.MessageTypeCommit):
			if s.tx.active {
				err = fmt.Errorf("%w (transaction %d is dropped)", err, s.tx.xid)
			}
			s.tx = txState{} // its end is unknown: nothing to confirm
		case s.tx.active:
			s.tx.broken = true
			err = fmt.Errorf("%w (the rest of transaction %d is dropped)", err, s.tx.xid)
		}
		if quiet {
			return pending, false
		}
		return append(pending, item{err: err}), false
	}
	switch m.kind {
	case msgKeepalive:
		s.seen(m.walEnd)
		if !s.tx.active {
			s.idle = max(s.idle, m.walEnd)
		}
		return pending, m.reply
	case msgBegin:
		s.tx = txState{active: true, xid: m.xid, commitTime: m.commitTime}
	case msgChange:
		if !s.tx.active {
			return append(pending, item{err: fmt.Errorf("%w: change outside a transaction at %s", ErrDecode, m.walStart)}), false
		}
		if !s.tx.broken {
			s.tx.changes = append(s.tx.changes, m.changes...)
		}
	case msgCommit:
		tx := s.tx
		s.tx = txState{}
		s.seen(m.endLSN)
		switch {
		case !tx.active || tx.broken || len(tx.changes) == 0:
			s.idle = max(s.idle, m.endLSN)
		case m.commitLSN < s.cfg.ResumeAfter:
			s.idle = max(s.idle, m.endLSN)
			s.skipped++
			if s.skipped == 1 {
				s.log.Info("dropping transactions already processed before the reconnect",
					"slot", s.slot, "resume_after", s.cfg.ResumeAfter.String())
			}
		default:
			s.deliveredEnd = m.endLSN
			s.lastChange.Store(time.Now().UnixNano())
			return append(pending, item{tx: Tx{CommitLSN: m.commitLSN, EndLSN: m.endLSN,
				CommitTime: m.commitTime, Changes: tx.changes}}), false
		}
	}
	return pending, false
}

func (s *Stream) seen(lsn pglogrepl.LSN) {
	if uint64(lsn) > s.received.Load() {
		s.received.Store(uint64(lsn))
	}
}

// confirmable is the flush position to report: what was acked, or further when
// the stream is idle (every Tx handed out acked, none half received) up to WAL
// known to hold nothing for the caller. Never below what was reported before.
func (s *Stream) confirmable() pglogrepl.LSN {
	acked := pglogrepl.LSN(s.acked.Load())
	flush := acked
	if !s.tx.active && acked >= s.deliveredEnd {
		flush = max(flush, s.idle)
	}
	return max(flush, pglogrepl.LSN(s.reported.Load()))
}

// sendStatus sends a standby status update: write = received, flush = apply =
// confirmable. (pglogrepl.SendStandbyStatusUpdate would turn a zero flush
// position into the write position, so the message is built here.)
func (s *Stream) sendStatus() error {
	flush := s.confirmable()
	write := max(s.ReceivedLSN(), flush)
	const y2k = 946684800 * 1_000_000 // Unix µs at 2000-01-01, PostgreSQL's epoch
	data := make([]byte, 0, 34)
	data = append(data, pglogrepl.StandbyStatusUpdateByteID)
	data = binary.BigEndian.AppendUint64(data, uint64(write))
	data = binary.BigEndian.AppendUint64(data, uint64(flush))
	data = binary.BigEndian.AppendUint64(data, uint64(flush))
	data = binary.BigEndian.AppendUint64(data, uint64(time.Now().UnixMicro()-y2k))
	data = append(data, 0) // no reply requested
	buf, err := (&pgproto3.CopyData{Data: data}).Encode(nil)
	if err != nil {
		return err
	}
	if err := s.conn.Frontend().SendUnbufferedEncodedCopyData(buf); err != nil {
		return fmt.Errorf("logical: send status update on slot %s: %w", s.slot, err)
	}
	s.reported.Store(uint64(flush))
	return nil
}

// simpleQuery runs sql with the simple protocol (the only one a replication
// connection accepts) and returns the rows of its last result as text.
func simpleQuery(ctx context.Context, conn *pgconn.PgConn, sql string) ([][]string, error) {
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, errors.New("no result")
	}
	var rows [][]string
	for _, r := range results[len(results)-1].Rows {
		row := make([]string, len(r))
		for i, v := range r {
			row[i] = string(v)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
