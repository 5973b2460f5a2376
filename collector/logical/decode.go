package logical

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Change is one row change of a published table, as pgoutput sent it.
type Change struct {
	// Table is the table name without schema for tables of the pgleader schema
	// ("leader_state", "terms", "audit"), schema.table for any other table a
	// publication may hold.
	Table string
	// Op is "insert", "update", "delete" or "truncate".
	Op string
	// Row holds the new tuple of an insert or update: column name → value in the
	// server's text format, nil for SQL NULL. A TOASTed column an update did not
	// change is absent (its value was not sent). Nil for delete and truncate.
	Row map[string]*string
	// Old holds what the server sent of the old row: the replica identity key
	// columns of a delete, or of an update that changed the key (tables with
	// REPLICA IDENTITY FULL send every column). Nil when nothing was sent.
	Old map[string]*string
}

// The kinds of decoded messages.
type msgKind uint8

const (
	msgIgnored   msgKind = iota // valid, nothing to do (type, origin, logical message)
	msgKeepalive                // primary keepalive
	msgBegin                    // pgoutput Begin
	msgCommit                   // pgoutput Commit
	msgRelation                 // pgoutput Relation (cached by the decoder)
	msgChange                   // Insert, Update, Delete or Truncate
)

// msg is one decoded CopyData message of the replication stream.
type msg struct {
	kind msgKind
	// typ is the pgoutput message type byte of an XLogData message (0 for a
	// keepalive or when the message is too short to have one); set on errors too.
	typ byte

	walStart pglogrepl.LSN // XLogData: start of this message's WAL
	walEnd   pglogrepl.LSN // XLogData and keepalive: the server's current WAL end
	reply    bool          // keepalive: the server asks for a status update now

	xid        uint32        // Begin
	commitLSN  pglogrepl.LSN // Commit
	endLSN     pglogrepl.LSN // Commit
	commitTime time.Time     // Begin and Commit

	changes []Change // msgChange: one, or one per table of a Truncate
}

// relation is the decoder's cache entry for a relation id.
type relation struct {
	table   string
	columns []string
	key     []bool // column is part of the replica identity key
}

// decoder holds what decoding needs across messages: the relation cache. The
// server sends a Relation message before the first change of each table on every
// connection and again after the table's definition changed, so a new stream
// starts with an empty decoder and a re-sent relation replaces the cached one.
type decoder struct {
	relations map[uint32]relation
}

func newDecoder() *decoder { return &decoder{relations: make(map[uint32]relation)} }

// errRecovered marks a decode error that came from a recovered panic: the bounds
// check let through a message pglogrepl could not parse. The fuzz test treats it
// as a bug.
var errRecovered = errors.New("panic in the decoder")

// decode decodes one CopyData payload of the replication stream: the XLogData or
// keepalive envelope, the pgoutput message inside and its tuples. It never panics:
// lengths are checked before pglogrepl sees the bytes, and a panic that gets
// through anyway is recovered into an error. Every error wraps ErrDecode.
func decode(d *decoder, data []byte) (m msg, err error) {
	var typ byte
	defer func() {
		if r := recover(); r != nil {
			m = msg{typ: typ}
			err = fmt.Errorf("%w: %w while decoding a %d-byte message (type %q): %v",
				ErrDecode, errRecovered, len(data), typ, r)
		}
	}()
	if len(data) == 0 {
		return msg{}, decodeErr("empty CopyData message")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return msg{}, decodeErr("keepalive: %v", err)
		}
		return msg{kind: msgKeepalive, walEnd: k.ServerWALEnd, reply: k.ReplyRequested}, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return msg{}, decodeErr("XLogData: %v", err)
		}
		if len(x.WALData) == 0 {
			return msg{}, decodeErr("XLogData at %s carries no pgoutput message", x.WALStart)
		}
		typ = x.WALData[0]
		m, err := d.decodePgoutput(x.WALData)
		m.typ, m.walStart, m.walEnd = typ, x.WALStart, x.ServerWALEnd
		if err != nil {
			return m, fmt.Errorf("%w: %s message at %s: %w", ErrDecode, pglogrepl.MessageType(typ), x.WALStart, err)
		}
		return m, nil
	}
	return msg{}, decodeErr("unknown CopyData message type %q", data[0])
}

func decodeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDecode, fmt.Sprintf(format, args...))
}

// decodePgoutput decodes one pgoutput (protocol version 1) message.
func (d *decoder) decodePgoutput(b []byte) (msg, error) {
	if err := checkPgoutput(b); err != nil {
		return msg{}, err
	}
	pm, err := pglogrepl.Parse(b)
	if err != nil {
		return msg{}, err
	}
	switch v := pm.(type) {
	case *pglogrepl.BeginMessage:
		return msg{kind: msgBegin, xid: v.Xid, commitTime: v.CommitTime}, nil
	case *pglogrepl.CommitMessage:
		return msg{kind: msgCommit, commitLSN: v.CommitLSN, endLSN: v.TransactionEndLSN, commitTime: v.CommitTime}, nil
	case *pglogrepl.RelationMessage:
		rel := relation{table: tableName(v.Namespace, v.RelationName)}
		for _, c := range v.Columns {
			rel.columns = append(rel.columns, c.Name)
			rel.key = append(rel.key, c.Flags&1 != 0)
		}
		d.relations[v.RelationID] = rel
		return msg{kind: msgRelation}, nil
	case *pglogrepl.InsertMessage:
		rel, err := d.relation(v.RelationID)
		if err != nil {
			return msg{}, err
		}
		row, err := rel.tuple(v.Tuple, false)
		if err != nil {
			return msg{}, fmt.Errorf("new tuple: %w", err)
		}
		return changeMsg(Change{Table: rel.table, Op: "insert", Row: row}), nil
	case *pglogrepl.UpdateMessage:
		rel, err := d.relation(v.RelationID)
		if err != nil {
			return msg{}, err
		}
		c := Change{Table: rel.table, Op: "update"}
		if v.OldTuple != nil {
			if c.Old, err = rel.tuple(v.OldTuple, v.OldTupleType == pglogrepl.UpdateMessageTupleTypeKey); err != nil {
				return msg{}, fmt.Errorf("old tuple: %w", err)
			}
		}
		if c.Row, err = rel.tuple(v.NewTuple, false); err != nil {
			return msg{}, fmt.Errorf("new tuple: %w", err)
		}
		return changeMsg(c), nil
	case *pglogrepl.DeleteMessage:
		rel, err := d.relation(v.RelationID)
		if err != nil {
			return msg{}, err
		}
		old, err := rel.tuple(v.OldTuple, v.OldTupleType == pglogrepl.DeleteMessageTupleTypeKey)
		if err != nil {
			return msg{}, fmt.Errorf("old tuple: %w", err)
		}
		return changeMsg(Change{Table: rel.table, Op: "delete", Old: old}), nil
	case *pglogrepl.TruncateMessage:
		m := msg{kind: msgChange}
		for _, id := range v.RelationIDs {
			rel, err := d.relation(id)
			if err != nil {
				return msg{}, err
			}
			m.changes = append(m.changes, Change{Table: rel.table, Op: "truncate"})
		}
		return m, nil
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage, *pglogrepl.LogicalDecodingMessage:
		return msg{kind: msgIgnored}, nil
	}
	return msg{}, fmt.Errorf("unexpected message %T", pm)
}

func changeMsg(c Change) msg { return msg{kind: msgChange, changes: []Change{c}} }

func tableName(namespace, name string) string {
	if namespace == "pgleader" {
		return name
	}
	return namespace + "." + name
}

func (d *decoder) relation(id uint32) (relation, error) {
	rel, ok := d.relations[id]
	if !ok {
		return relation{}, fmt.Errorf("change of relation id %d, which no Relation message described", id)
	}
	return rel, nil
}

// tuple converts tuple data to column → text value. With keyOnly (an old key
// tuple), only replica identity columns are kept: the server sends the others as
// NULL, which would read as values.
func (rel relation) tuple(t *pglogrepl.TupleData, keyOnly bool) (map[string]*string, error) {
	if t == nil {
		return nil, errors.New("tuple missing")
	}
	if len(t.Columns) != len(rel.columns) {
		return nil, fmt.Errorf("%d columns, relation %s has %d", len(t.Columns), rel.table, len(rel.columns))
	}
	row := make(map[string]*string, len(t.Columns))
	for i, c := range t.Columns {
		if keyOnly && !rel.key[i] {
			continue
		}
		switch c.DataType {
		case pglogrepl.TupleDataTypeText:
			s := string(c.Data)
			row[rel.columns[i]] = &s
		case pglogrepl.TupleDataTypeNull:
			row[rel.columns[i]] = nil
		case pglogrepl.TupleDataTypeToast:
			// Unchanged TOASTed value: not sent, so absent.
		default:
			return nil, fmt.Errorf("column %s: tuple data type %q (binary values were not requested)", rel.columns[i], c.DataType)
		}
	}
	return row, nil
}

// checkPgoutput walks a pgoutput message with bounds checks, field by field as
// pglogrepl parses it, so that pglogrepl only ever sees messages it can parse
// without reading out of range or allocating more than the message holds.
func checkPgoutput(b []byte) error {
	r := &reader{b: b[1:]}
	switch pglogrepl.MessageType(b[0]) {
	case pglogrepl.MessageTypeBegin:
		r.skip(20) // final LSN, commit time, xid
	case pglogrepl.MessageTypeCommit:
		r.skip(25) // flags, commit LSN, end LSN, commit time
	case pglogrepl.MessageTypeOrigin:
		r.skip(8) // origin commit LSN
		r.cstring()
	case pglogrepl.MessageTypeRelation:
		r.skip(4) // relation id
		r.cstring()
		r.cstring()
		r.skip(1) // replica identity
		n := r.uint16()
		for i := 0; i < int(n) && r.err == nil; i++ {
			r.skip(1) // flags
			r.cstring()
			r.skip(8) // type oid, type modifier
		}
	case pglogrepl.MessageTypeType:
		r.skip(4)
		r.cstring()
		r.cstring()
	case pglogrepl.MessageTypeInsert:
		r.skip(4)
		r.expect("tuple kind", 'N')
		r.tuple()
	case pglogrepl.MessageTypeUpdate:
		r.skip(4)
		switch k := r.byte(); k {
		case 'K', 'O':
			r.tuple()
			r.expect("new tuple kind", 'N')
			r.tuple()
		case 'N':
			r.tuple()
		default:
			r.fail("tuple kind %q, want K, O or N", k)
		}
	case pglogrepl.MessageTypeDelete:
		r.skip(4)
		if k := r.byte(); k != 'K' && k != 'O' {
			r.fail("old tuple kind %q, want K or O", k)
		}
		r.tuple()
	case pglogrepl.MessageTypeTruncate:
		n := r.uint32()
		r.skip(1) // options
		if r.err == nil && uint64(n) > uint64(len(r.b)-r.off)/4 {
			r.fail("%d relations announced, %d bytes left", n, len(r.b)-r.off)
		}
		r.skip(4 * int(n))
	case pglogrepl.MessageTypeMessage:
		r.skip(9) // flags, LSN
		r.cstring()
		n := r.uint32()
		r.skipN(n)
	default:
		// Streaming and two-phase messages belong to protocol versions > 1.
		return fmt.Errorf("message type %q is not part of pgoutput protocol version 1", b[0])
	}
	return r.err
}

// reader is a bounds-checked cursor; after the first failure it does nothing
// and err says what failed.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("truncated: need %d bytes at offset %d, have %d", n, r.off, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) skip(n int) {
	if r.need(n) {
		r.off += n
	}
}

func (r *reader) skipN(n uint32) {
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("truncated: value of %d bytes at offset %d, have %d", n, r.off, len(r.b)-r.off)
		return
	}
	r.skip(int(n))
}

func (r *reader) byte() byte {
	if !r.need(1) {
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) expect(what string, want byte) {
	if got := r.byte(); r.err == nil && got != want {
		r.fail("%s %q, want %q", what, got, want)
	}
}

func (r *reader) uint16() uint16 {
	if !r.need(2) {
		return 0
	}
	r.off += 2
	return binary.BigEndian.Uint16(r.b[r.off-2:])
}

func (r *reader) uint32() uint32 {
	if !r.need(4) {
		return 0
	}
	r.off += 4
	return binary.BigEndian.Uint32(r.b[r.off-4:])
}

func (r *reader) cstring() {
	if r.err != nil {
		return
	}
	i := bytes.IndexByte(r.b[r.off:], 0)
	if i < 0 {
		r.fail("truncated: unterminated string at offset %d", r.off)
		return
	}
	r.off += i + 1
}

// tuple checks a TupleData: column count, then per column a kind byte and, for
// text and binary values, a length and that many bytes.
func (r *reader) tuple() {
	n := r.uint16()
	for i := 0; i < int(n) && r.err == nil; i++ {
		switch k := r.byte(); k {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			r.skipN(r.uint32())
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		default:
			if r.err == nil {
				r.fail("column %d: tuple data kind %q, want t, b, n or u", i, k)
			}
		}
	}
}
