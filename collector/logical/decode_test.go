package logical

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

var capture = flag.Bool("capture", false, "rewrite testdata/capture.hex from a live stream (TestDecodeLiveMessages)")

const captureFile = "testdata/capture.hex"

// TestDecodeLiveMessages streams a workload that makes pgoutput send every message
// kind of protocol version 1 (but the logical decoding message, which needs an
// option the stream does not set): relation and type messages, inserts, updates
// with and without an old key, with an unchanged TOASTed column, REPLICA IDENTITY
// FULL old tuples, deletes, a two-table truncate, an origin, and a relation
// re-sent after ALTER TABLE. It checks what Next returns, and that every raw
// message decodes again on its own. With -capture it stores the raw messages as
// the seeds of FuzzDecode and the inputs of the truncation tests.
func TestDecodeLiveMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	b := setup(t)
	ctx := context.Background()
	origin := "fuzz_origin_" + b.cfg.Database[len(b.cfg.Database)-8:]
	for _, q := range []string{
		`CREATE TYPE public.mood AS ENUM ('ok', 'sad')`,
		`CREATE TABLE public.fuzz_full (id int PRIMARY KEY, m public.mood, big text, note text)`,
		`ALTER TABLE public.fuzz_full REPLICA IDENTITY FULL`,
		`CREATE TABLE public.fuzz_key (id int PRIMARY KEY, big text, note text)`,
		`CREATE PUBLICATION fuzz_pub FOR TABLE pgleader.leader_state, pgleader.audit, public.fuzz_full, public.fuzz_key`,
		`SELECT pg_replication_origin_create('` + origin + `')`,
	} {
		b.exec(t, q)
	}
	t.Cleanup(func() {
		if _, err := b.admin.Exec(context.Background(), "SELECT pg_replication_origin_drop($1)", origin); err != nil {
			t.Errorf("drop replication origin: %v", err)
		}
	})

	var (
		mu  sync.Mutex
		raw [][]byte
	)
	s := b.open(t, Config{Publication: "fuzz_pub", tap: func(d []byte) {
		mu.Lock()
		raw = append(raw, d)
		mu.Unlock()
	}})

	// An incompressible value over 2 kB is stored out of line (TOAST): an update
	// that does not change it sends it as "unchanged".
	const big = `(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i)`
	for _, q := range []string{
		`INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail) VALUES ('s', 'n1', 1, 'elected', '{"a": 1}')`,
		`BEGIN; INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder) VALUES ('s', pgleader.lock_key('s'), 1, 'n1');
		        UPDATE pgleader.leader_state SET holder = NULL, epoch = 2 WHERE scope = 's'; COMMIT`,
		`INSERT INTO public.fuzz_key VALUES (1, ` + big + `, 'x')`,
		`UPDATE public.fuzz_key SET note = 'y' WHERE id = 1`,
		`UPDATE public.fuzz_key SET id = 2 WHERE id = 1`,
		`DELETE FROM public.fuzz_key WHERE id = 2`,
		`INSERT INTO public.fuzz_full VALUES (1, 'ok', 'small', NULL)`,
		`UPDATE public.fuzz_full SET m = 'sad'`,
		`DELETE FROM public.fuzz_full`,
		`TRUNCATE public.fuzz_key, public.fuzz_full`,
	} {
		b.exec(t, q)
	}
	// A transaction with a replication origin (as a subscriber's apply worker makes).
	oc, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT pg_replication_origin_session_setup('` + origin + `')`,
		`BEGIN`,
		`SELECT pg_replication_origin_xact_setup('0/1234', now())`,
		`INSERT INTO pgleader.audit (kind) VALUES ('from_origin')`,
		`COMMIT`,
		`SELECT pg_replication_origin_session_reset()`,
	} {
		if _, err := oc.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	oc.Close(ctx)
	b.exec(t, `ALTER TABLE public.fuzz_key ADD COLUMN extra int DEFAULT 5`)
	b.exec(t, `INSERT INTO public.fuzz_key (id) VALUES (3)`)

	var txs []Tx
	for range 12 {
		tx := next(t, s)
		s.Ack(tx.EndLSN)
		txs = append(txs, tx)
	}
	closeStream(t, s)

	type check struct {
		table, op string
		row, old  map[string]string // expected values ("<null>", "<absent>"); nil: not checked
		oldNil    bool
	}
	bigLen := func(c Change) int { return len(val(c.Row, "big")) }
	want := [][]check{
		{{table: "audit", op: "insert", row: map[string]string{"kind": "elected", "detail": `{"a": 1}`, "epoch": "1"}, oldNil: true}},
		{{table: "leader_state", op: "insert", row: map[string]string{"holder": "n1"}},
			{table: "leader_state", op: "update", row: map[string]string{"holder": "<null>", "epoch": "2"}, oldNil: true}},
		{{table: "public.fuzz_key", op: "insert", row: map[string]string{"id": "1", "note": "x"}}},
		{{table: "public.fuzz_key", op: "update", row: map[string]string{"id": "1", "note": "y", "big": "<absent>"}, oldNil: true}},
		{{table: "public.fuzz_key", op: "update", row: map[string]string{"id": "2", "big": "<absent>"}, old: map[string]string{"id": "1"}}},
		{{table: "public.fuzz_key", op: "delete", old: map[string]string{"id": "2"}}},
		{{table: "public.fuzz_full", op: "insert", row: map[string]string{"m": "ok", "note": "<null>", "big": "small"}}},
		{{table: "public.fuzz_full", op: "update", row: map[string]string{"m": "sad"},
			old: map[string]string{"id": "1", "m": "ok", "big": "small", "note": "<null>"}}},
		{{table: "public.fuzz_full", op: "delete", old: map[string]string{"id": "1", "m": "sad", "big": "small", "note": "<null>"}}},
		{{table: "public.fuzz_key", op: "truncate"}, {table: "public.fuzz_full", op: "truncate"}},
		{{table: "audit", op: "insert", row: map[string]string{"kind": "from_origin", "scope": "<null>"}}},
		{{table: "public.fuzz_key", op: "insert", row: map[string]string{"id": "3", "big": "<null>", "extra": "5"}}},
	}
	for i, tx := range txs {
		if len(tx.Changes) != len(want[i]) {
			t.Errorf("tx %d: %d changes %+v, want %d", i+1, len(tx.Changes), tx.Changes, len(want[i]))
			continue
		}
		for j, c := range tx.Changes {
			w := want[i][j]
			if c.Table != w.table || c.Op != w.op {
				t.Errorf("tx %d change %d: %s %s, want %s %s", i+1, j, c.Op, c.Table, w.op, w.table)
			}
			for col, v := range w.row {
				if got := val(c.Row, col); got != v {
					t.Errorf("tx %d change %d: Row[%s] = %q, want %q", i+1, j, col, got, v)
				}
			}
			if w.old != nil && len(c.Old) != len(w.old) {
				t.Errorf("tx %d change %d: Old %v, want exactly %v", i+1, j, c.Old, w.old)
			}
			for col, v := range w.old {
				if got := val(c.Old, col); got != v {
					t.Errorf("tx %d change %d: Old[%s] = %q, want %q", i+1, j, col, got, v)
				}
			}
			if w.oldNil && c.Old != nil {
				t.Errorf("tx %d change %d: Old %v, want none", i+1, j, c.Old)
			}
			if (w.op == "delete" || w.op == "truncate") && c.Row != nil {
				t.Errorf("tx %d change %d: %s with Row %v", i+1, j, w.op, c.Row)
			}
		}
	}
	if n := bigLen(txs[2].Changes[0]); n != 400*32 {
		t.Errorf("TOASTed value of %d bytes, want %d", n, 400*32)
	}

	// Every raw message decodes on its own, in stream order, and the workload
	// produced every kind.
	mu.Lock()
	defer mu.Unlock()
	d := newDecoder()
	kinds := map[byte]int{}
	for i, data := range raw {
		m, err := decode(d, data)
		if err != nil {
			t.Fatalf("raw message %d (%x): %v", i, data, err)
		}
		if data[0] == 'k' {
			kinds['k']++
		} else {
			kinds[m.typ]++
		}
	}
	for _, k := range []byte("BCRYIUDTO") {
		if kinds[k] == 0 {
			t.Errorf("the workload produced no %q message (got %v)", k, kinds)
		}
	}
	if kinds['R'] < 5 { // leader_state, audit, fuzz_key, fuzz_full, fuzz_key again
		t.Errorf("%d relation messages, want at least 5", kinds['R'])
	}

	if *capture {
		var buf bytes.Buffer
		buf.WriteString("# Raw CopyData payloads of a pgoutput v1 stream, one per line in stream order,\n")
		buf.WriteString("# captured by `go test -run TestDecodeLiveMessages -capture ./collector/logical/`.\n")
		for _, data := range raw {
			buf.WriteString(hex.EncodeToString(data) + "\n")
		}
		if err := os.MkdirAll(filepath.Dir(captureFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(captureFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d messages to %s", len(raw), captureFile)
	}
}

// loadCapture reads testdata/capture.hex.
func loadCapture(tb testing.TB) [][]byte {
	tb.Helper()
	f, err := os.Open(captureFile)
	if err != nil {
		tb.Fatalf("%v (regenerate it with -run TestDecodeLiveMessages -capture)", err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// xlog wraps a pgoutput message in an XLogData envelope.
func xlog(lsn uint64, pgoutput []byte) []byte {
	b := []byte{'w'}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, pgoutput...)
}

// crafted returns hand-made messages the live stream does not produce: a logical
// decoding message, and messages whose inner lengths lie (pglogrepl would read
// out of range or allocate gigabytes for them).
func crafted() map[string][]byte {
	var relID [4]byte // relation 16384 is not in the capture; errors either way
	binary.BigEndian.PutUint32(relID[:], 16384)
	m := map[string][]byte{}
	m["logical message"] = xlog(1, append([]byte{'M', 1, 0, 0, 0, 0, 0, 0, 0, 1, 'p', 0, 0, 0, 0, 3}, "abc"...))
	m["tuple length 4 GiB"] = xlog(1, append(append([]byte{'I'}, relID[:]...), 'N', 0, 1, 't', 0xff, 0xff, 0xff, 0xf0, 'x'))
	m["truncate of 4G relations"] = xlog(1, []byte{'T', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
	m["relation of 65535 columns"] = xlog(1, append(append([]byte{'R'}, relID[:]...), 'p', 0, 't', 0, 'd', 0xff, 0xff, 0))
	m["tuple of 65535 columns"] = xlog(1, append(append([]byte{'I'}, relID[:]...), 'N', 0xff, 0xff, 'n'))
	m["unknown tuple kind"] = xlog(1, append(append([]byte{'I'}, relID[:]...), 'N', 0, 1, 'z', 0, 0, 0, 0))
	m["update without new tuple"] = xlog(1, append(append([]byte{'U'}, relID[:]...), 'K', 0, 0, 'X', 0, 0))
	m["logical message content past the end"] = xlog(1, append([]byte{'M', 1, 0, 0, 0, 0, 0, 0, 0, 1, 'p', 0, 0xff, 0, 0, 3}, "abc"...))
	m["stream start (protocol 2)"] = xlog(1, []byte{'S', 0, 0, 0, 1, 1})
	m["origin without name terminator"] = xlog(1, []byte{'O', 0, 0, 0, 0, 0, 0, 0, 1, 'x'})
	m["binary tuple value"] = xlog(1, append(append([]byte{'I'}, relID[:]...), 'N', 0, 1, 'b', 0, 0, 0, 1, 'x'))
	return m
}

// TestDecodeTruncated cuts every captured message (and the crafted logical
// decoding message) at every length: each cut decodes to an error wrapping
// ErrDecode, through the bounds check rather than a recovered panic, and leaves
// the decoder as it was.
func TestDecodeTruncated(t *testing.T) {
	msgs := loadCapture(t)
	msgs = append(msgs, crafted()["logical message"])
	d := newDecoder()
	seen := map[string]bool{}
	for i, full := range msgs {
		kind := string(full[:1])
		if full[0] == 'w' && len(full) > 25 {
			kind = "w/" + string(full[25])
		}
		seen[kind] = true
		before := maps.Clone(d.relations)
		for n := range len(full) {
			_, err := decode(d, full[:n])
			if !errors.Is(err, ErrDecode) || errors.Is(err, errRecovered) {
				t.Fatalf("message %d (%s) cut to %d of %d bytes: %v; want ErrDecode from the bounds check", i, kind, n, len(full), err)
			}
			if !maps.EqualFunc(d.relations, before, func(a, b relation) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				t.Fatalf("message %d (%s) cut to %d bytes changed the relation cache", i, kind, n)
			}
		}
		if _, err := decode(d, full); err != nil {
			t.Fatalf("message %d (%s) whole: %v", i, kind, err)
		}
	}
	for _, k := range []string{"k", "w/B", "w/C", "w/R", "w/Y", "w/I", "w/U", "w/D", "w/T", "w/O", "w/M"} {
		if !seen[k] {
			t.Errorf("no %s message among the inputs", k)
		}
	}
}

// TestDecodeCrafted feeds messages whose inner lengths lie.
func TestDecodeCrafted(t *testing.T) {
	for name, data := range crafted() {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			d := newDecoder()
			d.relations[16384] = relation{table: "t", columns: []string{"c"}, key: []bool{true}}
			m, err := decode(d, data)
			if name == "logical message" {
				if err != nil || m.kind != msgIgnored {
					t.Fatalf("decode: %+v, %v; want an ignored message", m, err)
				}
				return
			}
			if !errors.Is(err, ErrDecode) || errors.Is(err, errRecovered) {
				t.Fatalf("decode: %v; want ErrDecode from the bounds check", err)
			}
			t.Logf("%v", err)
		})
	}
	// The last line of defence: a panic below decode becomes ErrDecode.
	d := &decoder{} // nil relation map: storing a relation panics
	rel := loadCapture(t)
	for _, data := range rel {
		if len(data) > 25 && data[0] == 'w' && data[25] == 'R' {
			_, err := decode(d, data)
			if !errors.Is(err, ErrDecode) || !errors.Is(err, errRecovered) {
				t.Fatalf("decode with a panicking decoder: %v; want a recovered ErrDecode", err)
			}
			return
		}
	}
	t.Fatal("no relation message in the capture")
}

// feed runs raw messages through a stream's handle as its goroutine would and
// returns what Next would see.
func feed(s *Stream, raw [][]byte) []item {
	d := newDecoder()
	var out []item
	for _, data := range raw {
		out, _ = s.handle(d, data, out)
	}
	return out
}

func testStream(cfg Config) *Stream {
	cfg = cfg.withDefaults()
	return &Stream{cfg: cfg, log: slog.New(slog.DiscardHandler)}
}

// TestHandleSkipsBrokenTransaction corrupts one message of the second
// transaction of the capture (its Begin, the Relation message of leader_state,
// its first change, or its Commit): Next gets one ErrDecode in place of that
// transaction, which is dropped whole, and every other transaction comes through
// unchanged.
func TestHandleSkipsBrokenTransaction(t *testing.T) {
	raw := loadCapture(t)
	good := feed(testStream(Config{}), raw)
	for _, it := range good {
		if it.err != nil {
			t.Fatalf("clean capture: %v", it.err)
		}
	}
	for _, victimType := range []byte("BRIC") {
		t.Run(string(victimType), func(t *testing.T) {
			// The second transaction is leader_state's insert + update.
			victim, txIndex := -1, -1
			for i, data := range raw {
				if len(data) <= 25 || data[0] != 'w' {
					continue
				}
				if data[25] == 'B' {
					txIndex++
				}
				if txIndex == 1 && data[25] == victimType && victim < 0 {
					victim = i
				}
			}
			if victim < 0 {
				t.Fatalf("no %q message in the second transaction of the capture", victimType)
			}
			bad := append([][]byte(nil), raw...)
			bad[victim] = bad[victim][:len(bad[victim])-3]

			s := testStream(Config{})
			got := feed(s, bad)
			if len(got) != len(good) {
				t.Fatalf("%d items, want %d (one error in place of the broken Tx)", len(got), len(good))
			}
			for i := range got {
				if i == 1 {
					if !errors.Is(got[i].err, ErrDecode) || !strings.Contains(got[i].err.Error(), "dropped") {
						t.Fatalf("item 1: %v, want ErrDecode saying the transaction is dropped", got[i].err)
					}
					t.Logf("%v", got[i].err)
					continue
				}
				if got[i].err != nil || got[i].tx.EndLSN != good[i].tx.EndLSN || len(got[i].tx.Changes) != len(good[i].tx.Changes) {
					t.Fatalf("item %d: %+v, %v; want %+v", i, got[i].tx, got[i].err, good[i].tx)
				}
			}
			// The dropped transaction does not hold back the confirmed position.
			s.Ack(got[len(got)-1].tx.EndLSN)
			if c := s.confirmable(); c < got[len(got)-1].tx.EndLSN {
				t.Fatalf("confirmable %s after acking everything", c)
			}
		})
	}
}

// TestHandleResumeAfter: transactions committed before ResumeAfter are dropped.
func TestHandleResumeAfter(t *testing.T) {
	raw := loadCapture(t)
	all := feed(testStream(Config{}), raw)
	if len(all) < 4 {
		t.Fatalf("%d transactions in the capture", len(all))
	}
	after := all[2].tx.EndLSN
	got := feed(testStream(Config{ResumeAfter: after}), raw)
	if len(got) != len(all)-3 || len(got) == 0 || got[0].tx.CommitLSN != all[3].tx.CommitLSN {
		if len(got) == 0 {
			t.Fatalf("with ResumeAfter %s: nothing, want %d transactions", after, len(all)-3)
		}
		t.Fatalf("with ResumeAfter %s: %d items starting at %s; want %d starting at %s",
			after, len(got), got[0].tx.CommitLSN, len(all)-3, all[3].tx.CommitLSN)
	}
}

// TestConfirmable pins the acknowledgement rule.
func TestConfirmable(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		acked, reported, delivered, idle pglogrepl.LSN
		inTx                             bool
		want                             pglogrepl.LSN
	}{
		{name: "AckedOnly", acked: 150, reported: 100, delivered: 200, idle: 300, want: 150},
		{name: "IdleWhenAllAcked", acked: 200, reported: 100, delivered: 200, idle: 300, want: 300},
		{name: "NotIdleInsideTx", acked: 200, reported: 100, delivered: 200, idle: 300, inTx: true, want: 200},
		{name: "NeverBackwards", acked: 150, reported: 250, delivered: 200, idle: 300, want: 250},
		{name: "IdleBehindAck", acked: 400, reported: 100, delivered: 200, idle: 300, want: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStream(Config{})
			s.acked.Store(uint64(tc.acked))
			s.reported.Store(uint64(tc.reported))
			s.deliveredEnd, s.idle, s.tx.active = tc.delivered, tc.idle, tc.inTx
			if got := s.confirmable(); got != tc.want {
				t.Fatalf("confirmable = %d, want %d", got, tc.want)
			}
		})
	}
}

// FuzzDecode: whatever the bytes, decode returns a message or an error wrapping
// ErrDecode, never panics, and never needs its recover (the bounds check must
// catch what pglogrepl cannot parse). The decoder is primed with the relations of
// the capture, so that change messages reach tuple extraction.
func FuzzDecode(f *testing.F) {
	raw := loadCapture(f)
	base := newDecoder()
	for _, data := range raw {
		_, _ = decode(base, data)
		f.Add(data)
		if len(data) > 2 {
			f.Add(data[:len(data)/2])
			f.Add(data[:len(data)-1])
			mut := append([]byte(nil), data...)
			mut[len(mut)/2] ^= 0xff
			f.Add(mut)
		}
	}
	for _, data := range crafted() {
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{'w'})
	f.Add([]byte{'k', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &decoder{relations: maps.Clone(base.relations)}
		m, err := decode(d, data)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error not wrapping ErrDecode: %v", err)
			}
			if errors.Is(err, errRecovered) {
				t.Fatalf("the bounds check let through a message pglogrepl panics on: %v", err)
			}
			return
		}
		known := map[string]bool{}
		for _, r := range d.relations {
			for _, c := range r.columns {
				known[c] = true
			}
		}
		for _, c := range m.changes {
			switch c.Op {
			case "insert", "update", "delete", "truncate":
			default:
				t.Fatalf("op %q", c.Op)
			}
			for col := range c.Row {
				if !known[col] {
					t.Fatalf("column %q of no relation", col)
				}
			}
			for col := range c.Old {
				if !known[col] {
					t.Fatalf("old column %q of no relation", col)
				}
			}
		}
	})
}
