package logical

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// lockKeyBilling is pgleader.lock_key('billing'): the first 8 bytes of its sha256.
var lockKeyBilling = func() int64 {
	h := sha256.Sum256([]byte("billing"))
	return int64(binary.BigEndian.Uint64(h[:8]))
}()

func TestMain(m *testing.M) { pgtest.Main(m) }

// bundle is what setup returns: a migrated database and ways to reach it.
type bundle struct {
	dsn   string
	cfg   *pgconn.Config // for Open and Available
	admin *pgx.Conn      // an ordinary superuser connection
}

func setup(t *testing.T) bundle {
	t.Helper()
	return setupDSN(t, pgtest.DSN(t))
}

func setupDSN(t *testing.T, dsn string) bundle {
	t.Helper()
	ctx := context.Background()
	xcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, xcfg, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{dsn: dsn, cfg: cfg, admin: admin}
}

// open opens a stream and closes it when the test ends.
func (b bundle) open(t *testing.T, cfg Config) *Stream {
	t.Helper()
	cfg.ConnConfig = b.cfg
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeStream(t, s) })
	return s
}

func closeStream(t *testing.T, s *Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// dropSlotAtEnd drops a permanent slot when the test ends (a database with slots
// cannot be dropped). Register it before opening the stream, so that it runs
// after the stream's Close.
func (b bundle) dropSlotAtEnd(t *testing.T, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for {
			_, err := b.admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name)
				FROM pg_replication_slots WHERE slot_name = $1`, name)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55006" && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond) // the walsender is still exiting
				continue
			}
			if err != nil {
				t.Errorf("drop slot %s: %v", name, err)
			}
			return
		}
	})
}

func (b bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.admin.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// next returns the next Tx, failing the test after 10 s.
func next(t *testing.T, s *Stream) Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return tx
}

func val(m map[string]*string, col string) string {
	v, ok := m[col]
	switch {
	case !ok:
		return "<absent>"
	case v == nil:
		return "<null>"
	}
	return *v
}

func (b bundle) confirmedFlush(t *testing.T, slot string) pglogrepl.LSN {
	t.Helper()
	var lsn pglogrepl.LSN
	if err := b.admin.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn); err != nil {
		t.Fatalf("read confirmed_flush_lsn of %s: %v", slot, err)
	}
	return lsn
}

func TestTemporarySlot(t *testing.T) {
	pgtest.Slow(t)
	b := setup(t)
	s := b.open(t, Config{})
	if !strings.HasPrefix(s.Slot(), "pgleader_tmp_") {
		t.Fatalf("temporary slot name %q", s.Slot())
	}
	var temporary bool
	if err := b.admin.QueryRow(context.Background(),
		"SELECT temporary FROM pg_replication_slots WHERE slot_name = $1", s.Slot()).Scan(&temporary); err != nil || !temporary {
		t.Fatalf("slot %s: temporary=%v, %v", s.Slot(), temporary, err)
	}

	ctx := context.Background()
	// 1: a claim-like transaction touching two tables.
	tx1, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid) VALUES ('billing', pgleader.lock_key('billing'), 1, 'node-a', 7)`,
		`INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail) VALUES ('billing', 'node-a', 1, 'elected', '{"prev_holder": null}')`,
	} {
		if _, err := tx1.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Neither a rolled-back transaction nor one on an unpublished table shows.
	rb, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Exec(ctx, `INSERT INTO pgleader.audit (kind) VALUES ('rolled_back')`); err != nil {
		t.Fatal(err)
	}
	if err := rb.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version) VALUES ('node-a', 'h', 1, 'v')`)
	// 2: a release.
	b.exec(t, `UPDATE pgleader.leader_state SET holder = NULL, holder_pid = NULL, released_at = now() WHERE scope = 'billing'`)
	// 3: a term row and an audit row.
	b.exec(t, `WITH t AS (INSERT INTO pgleader.terms (scope, epoch, holder, acquired_at, released_at, release_reason)
	                      VALUES ('billing', 1, 'node-a', now(), now(), 'resigned') RETURNING 1)
	           INSERT INTO pgleader.audit (scope, node_id, epoch, kind) SELECT 'billing', 'node-a', 1, 'released' FROM t`)

	got := []Tx{next(t, s), next(t, s), next(t, s)}
	type change struct{ table, op string }
	want := [][]change{
		{{"leader_state", "insert"}, {"audit", "insert"}},
		{{"leader_state", "update"}},
		{{"terms", "insert"}, {"audit", "insert"}},
	}
	for i, tx := range got {
		var have []change
		for _, c := range tx.Changes {
			have = append(have, change{c.Table, c.Op})
		}
		if fmt.Sprint(have) != fmt.Sprint(want[i]) {
			t.Errorf("tx %d changes %v, want %v", i+1, have, want[i])
		}
		if tx.EndLSN <= tx.CommitLSN {
			t.Errorf("tx %d: EndLSN %s not after CommitLSN %s", i+1, tx.EndLSN, tx.CommitLSN)
		}
		if i > 0 && tx.CommitLSN <= got[i-1].CommitLSN {
			t.Errorf("tx %d: CommitLSN %s not after the previous one's %s", i+1, tx.CommitLSN, got[i-1].CommitLSN)
		}
		if time.Since(tx.CommitTime) > time.Minute || tx.CommitTime.After(time.Now().Add(time.Minute)) {
			t.Errorf("tx %d: commit time %v", i+1, tx.CommitTime)
		}
		s.Ack(tx.EndLSN)
	}
	if t.Failed() {
		t.FailNow()
	}
	ins := got[0].Changes[0].Row
	for col, w := range map[string]string{"scope": "billing", "lock_key": strconv.FormatInt(lockKeyBilling, 10), "epoch": "1", "holder": "node-a",
		"holder_pid": "7", "released_at": "<null>", "unresolved_guards": "{}"} {
		if v := val(ins, col); v != w {
			t.Errorf("leader_state insert: %s = %s, want %s", col, v, w)
		}
	}
	audit := got[0].Changes[1].Row
	if val(audit, "kind") != "elected" || val(audit, "detail") != `{"prev_holder": null}` || val(audit, "id") == "<null>" {
		t.Errorf("audit insert row %v", audit)
	}
	upd := got[1].Changes[0]
	if val(upd.Row, "holder") != "<null>" || val(upd.Row, "epoch") != "1" || val(upd.Row, "released_at") == "<null>" {
		t.Errorf("leader_state update row: holder %s epoch %s released_at %s", val(upd.Row, "holder"),
			val(upd.Row, "epoch"), val(upd.Row, "released_at"))
	}
	if upd.Old != nil {
		t.Errorf("update without key change carries Old %v", upd.Old)
	}
	if r := got[2].Changes[0].Row; val(r, "release_reason") != "resigned" || val(r, "scope") != "billing" {
		t.Errorf("terms insert row %v", r)
	}
	if r := got[2].Changes[1].Row; val(r, "kind") != "released" {
		t.Errorf("audit insert row %v", r)
	}
	if s.LastChange().IsZero() || s.AckedLSN() != got[2].EndLSN || s.ReceivedLSN() < got[2].EndLSN {
		t.Errorf("LastChange %v, AckedLSN %s (want %s), ReceivedLSN %s", s.LastChange(), s.AckedLSN(), got[2].EndLSN, s.ReceivedLSN())
	}

	// Closing the connection drops a temporary slot.
	slot := s.Slot()
	closeStream(t, s)
	if _, err := s.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	pgtest.WaitEvery(t, "temporary slot dropped", 10*time.Second, 20*time.Millisecond, func() bool {
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// insertAudit commits n audit rows, one transaction each, and returns their ids.
func (b bundle) insertAudit(t *testing.T, n int, kind string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		var id int64
		if err := b.admin.QueryRow(context.Background(),
			`INSERT INTO pgleader.audit (scope, kind, detail) VALUES ('s', $1, jsonb_build_object('i', $2::int)) RETURNING id`,
			kind, i).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, fmt.Sprint(id))
	}
	return ids
}

// auditIDs reads transactions until one holds an audit row of kind "marker",
// acking each, and returns the ids of the other audit rows in order.
func auditIDs(t *testing.T, s *Stream) []string {
	t.Helper()
	var ids []string
	for {
		tx := next(t, s)
		for _, c := range tx.Changes {
			if c.Table != "audit" || c.Op != "insert" {
				t.Fatalf("unexpected change %s %s", c.Op, c.Table)
			}
			if val(c.Row, "kind") == "marker" {
				s.Ack(tx.EndLSN)
				return ids
			}
			ids = append(ids, val(c.Row, "id"))
		}
		s.Ack(tx.EndLSN)
	}
}

func TestPermanentSlotResume(t *testing.T) {
	pgtest.Slow(t)
	for _, tc := range []struct {
		name string
		// end ends the first stream after 50 acked transactions.
		end func(t *testing.T, b bundle, s *Stream)
		// statusInterval of the first stream: with 30s, no status update is sent
		// before the connection is killed, so the server sends all 100 again and
		// ResumeAfter must drop the first 50.
		statusInterval time.Duration
	}{
		{name: "Close", end: func(t *testing.T, _ bundle, s *Stream) { closeStream(t, s) }},
		{name: "TerminateBackend", statusInterval: 30 * time.Second, end: func(t *testing.T, b bundle, s *Stream) {
			var n int
			if err := b.admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(active_pid))
				FROM pg_replication_slots WHERE slot_name = $1 AND active`, s.Slot()).Scan(&n); err != nil || n != 1 {
				t.Fatalf("terminate walsender: %d, %v", n, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for {
				_, err := s.Next(ctx)
				if err == nil {
					continue // buffered transactions beyond the 50
				}
				if errors.Is(err, ErrDecode) || ctx.Err() != nil {
					t.Fatalf("Next after the walsender was killed: %v, want a connection error", err)
				}
				break
			}
			closeStream(t, s)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			slot := "resume_" + strings.ToLower(tc.name)
			b.dropSlotAtEnd(t, slot)
			s := b.open(t, Config{Slot: slot, StatusInterval: tc.statusInterval})
			if s.Slot() != slot {
				t.Fatalf("slot %q", s.Slot())
			}
			ids := b.insertAudit(t, 100, "elected")

			var last pglogrepl.LSN
			for i := range 50 {
				tx := next(t, s)
				if len(tx.Changes) != 1 || val(tx.Changes[0].Row, "id") != ids[i] {
					t.Fatalf("tx %d: %+v, want audit id %s", i, tx.Changes, ids[i])
				}
				s.Ack(tx.EndLSN)
				last = tx.EndLSN
			}
			tc.end(t, b, s)
			// A terminated walsender's client sees the error before the backend
			// has exited and let go of the slot (seen under load: "slot in use
			// by pid N"); the collector's source retries then, this test waits.
			pgtest.WaitFor(t, "the slot released by the first stream", 10*time.Second, func() bool {
				var active bool
				err := b.admin.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
				return err == nil && !active
			})
			confirmed := b.confirmedFlush(t, slot)
			t.Logf("after the first stream: confirmed_flush_lsn %s, last acked %s", confirmed, last)
			if confirmed > last {
				t.Fatalf("confirmed_flush_lsn %s beyond the last ack %s", confirmed, last)
			}
			if tc.statusInterval > 0 && confirmed >= last {
				t.Fatalf("confirmed_flush_lsn %s: the server got the acks; the test needs it not to", confirmed)
			}

			b.insertAudit(t, 1, "marker")
			s2 := b.open(t, Config{Slot: slot, ResumeAfter: last})
			got := auditIDs(t, s2)
			if fmt.Sprint(got) != fmt.Sprint(ids[50:]) {
				t.Fatalf("after resuming got audit ids %v, want %v", got, ids[50:])
			}
		})
	}
}

func TestStatusUpdates(t *testing.T) {
	pgtest.Slow(t)
	b := setup(t)
	const slot = "status_updates"
	b.dropSlotAtEnd(t, slot)
	s := b.open(t, Config{Slot: slot, StatusInterval: 50 * time.Millisecond})
	start := b.confirmedFlush(t, slot)

	b.insertAudit(t, 1, "elected")
	tx := next(t, s)
	// Not acked yet: status updates go out, none confirms the Tx.
	time.Sleep(300 * time.Millisecond) // six status intervals
	if c := b.confirmedFlush(t, slot); c >= tx.EndLSN || c < start {
		t.Fatalf("before Ack: confirmed_flush_lsn %s, Tx ends at %s (slot started at %s)", c, tx.EndLSN, start)
	}

	s.Ack(tx.EndLSN)
	pgtest.WaitEvery(t, "confirmed_flush_lsn reaching the acked Tx, which ends at "+tx.EndLSN.String(), 10*time.Second, 20*time.Millisecond, func() bool {
		return b.confirmedFlush(t, slot) >= tx.EndLSN
	})

	// Idle: WAL of unpublished tables holds nothing for the stream, and the slot
	// follows it instead of retaining it.
	for i := range 20 {
		b.exec(t, `INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version) VALUES ($1, 'h', 1, 'v')`, fmt.Sprint("n", i))
	}
	var head pglogrepl.LSN
	if err := b.admin.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()").Scan(&head); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitEvery(t, "an idle slot following the WAL to "+head.String(), 10*time.Second, 20*time.Millisecond, func() bool {
		return b.confirmedFlush(t, slot) >= head
	})
}

func TestAvailable(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	t.Run("Superuser", func(t *testing.T) {
		b := setup(t)
		ok, reason, err := Available(ctx, b.cfg)
		if err != nil || !ok || reason != "" {
			t.Fatalf("Available = %v, %q, %v; want true", ok, reason, err)
		}
	})
	t.Run("RoleWithoutReplication", func(t *testing.T) {
		b := setup(t)
		role := "plain_" + strings.ToLower(strings.ReplaceAll(b.cfg.Database[len(b.cfg.Database)-8:], "-", ""))
		b.exec(t, "CREATE ROLE "+role+" LOGIN NOREPLICATION NOSUPERUSER")
		t.Cleanup(func() {
			// Available and Open closed every session of the role.
			if _, err := b.admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
				t.Errorf("drop role: %v", err)
			}
		})
		cfg := b.cfg.Copy()
		cfg.User = role
		ok, reason, err := Available(ctx, cfg)
		if err != nil || ok || reason != "role "+role+" lacks REPLICATION" {
			t.Fatalf("Available = %v, %q, %v; want false, \"role %s lacks REPLICATION\"", ok, reason, err, role)
		}
		_, err = Open(ctx, Config{ConnConfig: cfg})
		if err == nil {
			t.Fatal("Open as a role without REPLICATION succeeded")
		}
		t.Logf("Open as %s: %v", role, err)
	})
	t.Run("WalLevelReplica", func(t *testing.T) {
		srv := pgtest.NewServer(t, pgserver.Options{Settings: map[string]string{"wal_level": "replica"}})
		b := setupDSN(t, srv.DSN("postgres"))
		// Migration 003 works without logical WAL: a publication is only a catalog row.
		var tables []string
		rows, err := b.admin.Query(ctx, "SELECT tablename FROM pg_publication_tables WHERE pubname = 'pgleader_events' AND schemaname = 'pgleader'")
		if err != nil {
			t.Fatal(err)
		}
		if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		sort.Strings(tables)
		if fmt.Sprint(tables) != "[audit leader_state terms]" {
			t.Fatalf("publication pgleader_events holds %v", tables)
		}
		ok, reason, err := Available(ctx, b.cfg)
		if err != nil || ok || reason != "wal_level is replica, not logical" {
			t.Fatalf("Available = %v, %q, %v; want false, \"wal_level is replica, not logical\"", ok, reason, err)
		}
		_, err = Open(ctx, Config{ConnConfig: b.cfg})
		if err == nil || !strings.Contains(err.Error(), "wal_level") {
			t.Fatalf("Open with wal_level=replica: %v, want an error about wal_level", err)
		}
	})
}

func TestMigrationIdempotent(t *testing.T) {
	b := setup(t)
	// A hand-made publication missing a table is completed; a second run changes nothing.
	b.exec(t, "DROP PUBLICATION pgleader_events")
	b.exec(t, "CREATE PUBLICATION pgleader_events FOR TABLE pgleader.audit")
	// Forget 003 and every later file: they are re-applied over what they made.
	b.exec(t, "DELETE FROM pgleader.goose_db_version WHERE version_id >= 3")
	for range 2 {
		xcfg, _ := pgx.ParseConfig(b.dsn)
		if _, err := migrate.Up(context.Background(), xcfg, nil); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := b.admin.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgleader_events'").Scan(&n); err != nil || n != 3 {
			t.Fatalf("publication holds %d tables, %v; want 3", n, err)
		}
	}
	v, err := migrations.Version(context.Background(), b.admin)
	if err != nil || v != migrations.Latest {
		t.Fatalf("schema version %d, %v; want %d", v, err, migrations.Latest)
	}
}

func TestOpenErrors(t *testing.T) {
	pgtest.Slow(t)
	b := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoConnConfig", Config{}, "ConnConfig is required"},
		{"BadSlot", Config{ConnConfig: b.cfg, Slot: "Bad-Name"}, `slot name "Bad-Name"`},
		{"BadPublication", Config{ConnConfig: b.cfg, Publication: "1x"}, `publication name "1x"`},
		{"MissingPublication", Config{ConnConfig: b.cfg, Publication: "nope"}, "run `pgleader migrate`"},
		{"StatusIntervalTooLong", Config{ConnConfig: b.cfg, StatusInterval: 31 * time.Second}, "at most half of the server's wal_sender_timeout (1m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("SlotInUse", func(t *testing.T) {
		b.dropSlotAtEnd(t, "in_use")
		b.open(t, Config{Slot: "in_use"})
		_, err := Open(ctx, Config{ConnConfig: b.cfg, Slot: "in_use"})
		if !errors.Is(err, ErrSlotInUse) || !strings.Contains(err.Error(), "in use by pid") {
			t.Fatalf("second Open of a slot: %v, want ErrSlotInUse", err)
		}
	})
	t.Run("ConfigUnchanged", func(t *testing.T) {
		if _, ok := b.cfg.RuntimeParams["replication"]; ok {
			t.Fatal("Open modified Config.ConnConfig")
		}
	})
}

func TestSlots(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.dropSlotAtEnd(t, "slots_active")
	b.dropSlotAtEnd(t, "slots_idle")
	b.dropSlotAtEnd(t, "slots_other_plugin")
	b.exec(t, "SELECT pg_create_logical_replication_slot('slots_idle', 'pgoutput')")
	b.exec(t, "SELECT pg_create_logical_replication_slot('slots_other_plugin', 'test_decoding')")
	s := b.open(t, Config{Slot: "slots_active"})
	tmp := b.open(t, Config{})

	slots, err := ListSlots(ctx, b.admin)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Slot{}
	var names []string
	for _, sl := range slots {
		byName[sl.Name] = sl
		names = append(names, sl.Name)
	}
	if want := []string{tmp.Slot(), "slots_active", "slots_idle"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("ListSlots names %v, want %v", names, want)
	}
	if a := byName["slots_active"]; !a.Active || a.ActivePID == 0 || a.Temporary || a.Plugin != "pgoutput" ||
		a.ConfirmedFlush == "" || a.Database != b.cfg.Database {
		t.Errorf("active slot %+v", a)
	}
	if i := byName["slots_idle"]; i.Active || i.ActivePID != 0 || i.Temporary {
		t.Errorf("idle slot %+v", i)
	}
	if tm := byName[tmp.Slot()]; !tm.Temporary || !tm.Active {
		t.Errorf("temporary slot %+v", tm)
	}

	// WAL written while nothing is acked shows as lag and retention.
	b.insertAudit(t, 50, "elected")
	lag, err := SlotLag(ctx, b.admin, "slots_idle")
	if err != nil || lag <= 0 {
		t.Errorf("SlotLag(slots_idle) = %d, %v; want > 0", lag, err)
	}
	if i, err := LookupSlot(ctx, b.admin, "slots_idle"); err != nil || i.RetainedBytes < lag {
		t.Errorf("LookupSlot(slots_idle) = %+v, %v; want RetainedBytes >= %d", i, err, lag)
	}
	if _, err := SlotLag(ctx, b.admin, "nope"); !errors.Is(err, ErrNoSlot) {
		t.Errorf("SlotLag(nope): %v, want ErrNoSlot", err)
	}

	err = DropSlot(ctx, b.admin, "slots_active")
	want := fmt.Sprintf("slot slots_active is in use by pid %d: stop that collector first", byName["slots_active"].ActivePID)
	if !errors.Is(err, ErrSlotInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("DropSlot(active): %v, want ErrSlotInUse: %q", err, want)
	}
	if err := DropSlot(ctx, b.admin, "slots_other_plugin"); err == nil || !strings.Contains(err.Error(), "not pgoutput") {
		t.Errorf("DropSlot(test_decoding slot): %v", err)
	}
	if err := DropSlot(ctx, b.admin, "nope"); !errors.Is(err, ErrNoSlot) {
		t.Errorf("DropSlot(nope): %v, want ErrNoSlot", err)
	}
	if err := DropSlot(ctx, b.admin, "slots_idle"); err != nil {
		t.Fatalf("DropSlot(idle): %v", err)
	}
	if _, err := LookupSlot(ctx, b.admin, "slots_idle"); !errors.Is(err, ErrNoSlot) {
		t.Errorf("slot still there after DropSlot: %v", err)
	}

	// Once its stream is closed, the slot can be dropped.
	closeStream(t, s)
	pgtest.WaitEvery(t, "DropSlot after Close", 10*time.Second, 20*time.Millisecond, func() bool {
		return DropSlot(ctx, b.admin, "slots_active") == nil
	})
}
