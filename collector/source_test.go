package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector/logical"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// logicalConfig is testConfig on the logical source (slot: "" for a temporary one).
func logicalConfig(t testing.TB, dsn, slot string) Config {
	t.Helper()
	cfg := testConfig(t, dsn)
	cfg.Source, cfg.Slot = SourceModeLogical, slot
	return cfg
}

// dropSlotAtEnd drops a permanent slot when the test ends: a database with a
// slot cannot be dropped. Register it before starting the collectors that use
// the slot, so that it runs after they stopped.
func dropSlotAtEnd(t *testing.T, dsn, slot string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop slot %s: %v", slot, err)
			return
		}
		defer closeConn(conn)
		for {
			err := logical.DropSlot(ctx, conn, slot)
			if errors.Is(err, logical.ErrSlotInUse) && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond) // the walsender is still exiting
				continue
			}
			if err != nil && !errors.Is(err, logical.ErrNoSlot) {
				t.Errorf("drop slot %s: %v", slot, err)
			}
			return
		}
	})
}

// transitions makes n leadership changes of scope by SQL on a connection of its
// own (claim then release, alternating two node ids), paced a few milliseconds
// apart so that a test can stop a collector while they happen, and counts them
// in done. It returns when all are made or ctx ends.
func transitions(ctx context.Context, dsn, scope string, n int, done *atomic.Int64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	// Both nodes registered on this one session: it claims and releases for each.
	for _, node := range []string{"node-a", "node-b"} {
		if _, err := conn.Exec(ctx, `SELECT pgleader.register_node($1, 'h', 1, 'test', ARRAY[$2::text], 500, 1500, 2000, 0, 0)`, node, scope); err != nil {
			return fmt.Errorf("register %s: %w", node, err)
		}
	}
	for i := range n {
		node := fmt.Sprintf("node-%c", 'a'+i%2)
		var acquired bool
		var epoch int64
		if err := conn.QueryRow(ctx, `SELECT acquired, epoch FROM pgleader.claim_scopes($2, 'h', 0, 500, 500, 1500, 2000, ARRAY[$1::text], ARRAY[pgleader.lock_key($1)])`,
			scope, node).Scan(&acquired, &epoch); err != nil || !acquired {
			return fmt.Errorf("claim %d: acquired=%v: %v", i+1, acquired, err)
		}
		var released bool
		if err := conn.QueryRow(ctx, "SELECT ok FROM pgleader.release_batch($3, ARRAY[$1::text], ARRAY[$2::bigint], '{resigned}')", scope, epoch, node).Scan(&released); err != nil || !released {
			return fmt.Errorf("release %d: released=%v: %v", i+1, released, err)
		}
		done.Add(1)
		time.Sleep(3 * time.Millisecond) // pacing, not a wait for anything
	}
	return nil
}

// kinds returns the events of kind, in order.
func kinds(evs []Event, kind EventKind) []Event {
	return slices.DeleteFunc(slices.Clone(evs), func(e Event) bool { return e.Kind != kind })
}

// logCapture records log lines (message and attributes as text).
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCapture) WithGroup(string) slog.Handler            { return l }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	return nil
}

func (l *logCapture) find(sub string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			return line, true
		}
	}
	return "", false
}

func TestLogicalSource(t *testing.T) {
	pgtest.Slow(t)
	t.Run("Streaming", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := logicalConfig(t, dsn, "")
		cfg.PollInterval = MaxPollInterval // only the stream asks for reads
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		s := waitSnap(t, c, "the logical source", func(s *Snapshot) bool { return s.Health.Source == SourceLogical })
		if h := s.Health; !strings.HasPrefix(h.Slot, "pgleader_tmp_") || h.SlotLagBytes != -1 || h.Notifications != 0 {
			t.Fatalf("health %+v", h)
		}
		testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		ev := rec.waitEvent(t, "elected n1", func(e Event) bool { return e.Kind == EventElected && e.Scope == "s" })
		if ev.Node != "n1" || ev.Epoch != 1 || ev.AuditID == 0 || ev.LSN == 0 || ev.At.IsZero() {
			t.Fatalf("elected event %+v", ev)
		}
		waitSnap(t, c, "n1 leading in a snapshot", func(s *Snapshot) bool {
			sc, ok := s.Scope("s")
			return ok && sc.HasLeader() && sc.Leader == "n1"
		})

		// Heartbeats (every 50 ms) reach the stream but ask for no read.
		s0, err := c.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pgtest.WaitFor(t, "ten heartbeats through the stream", wait, func() bool { return c.streamTxs.Load() >= s0.Health.Transactions+10 })
		s1, err := c.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := s1.Health.Polls - s0.Health.Polls; d > 2 || s1.Health.Transactions < s0.Health.Transactions+10 {
			t.Fatalf("%d reads for %d streamed transactions (heartbeats must not be read)", d, s1.Health.Transactions-s0.Health.Transactions)
		}
		if h := s1.Health; h.Source != SourceLogical || h.LastChange.IsZero() || h.DecodeErrors != 0 {
			t.Fatalf("health %+v", h)
		}
	})

	t.Run("PermanentSlotRestart", func(t *testing.T) {
		// The collector is stopped while 100 leadership changes happen and
		// restarted on its slot: every change is delivered once, in order, across
		// the two runs.
		const n = 100
		dsn := pgtest.MigratedDSN(t)
		const slot = "pgleader_test_restart"
		dropSlotAtEnd(t, dsn, slot)
		cfg := logicalConfig(t, dsn, slot)

		first := newCollector(t, cfg)
		rec1 := record(t, first)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- first.Run(ctx) }()
		waitSnap(t, first, "the logical source", func(s *Snapshot) bool { return s.Health.Source == SourceLogical })

		var made atomic.Int64
		tctx, tcancel := context.WithCancel(context.Background())
		defer tcancel()
		terr := make(chan error, 1)
		go func() { terr <- transitions(tctx, dsn, "r", n, &made) }()
		pgtest.WaitFor(t, "20 elected events in the first run", wait, func() bool { return len(kinds(rec1.all(), EventElected)) >= 20 })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("first Run: %v", err)
		}
		<-rec1.done // Run closed the subscription: every event of the first run is recorded
		stoppedAt := made.Load()
		pgtest.WaitFor(t, "changes while no collector runs", wait, func() bool { return made.Load() >= min(stoppedAt+20, n) })
		whileDown := made.Load()

		second := newCollector(t, cfg)
		rec2 := record(t, second)
		run(t, second)
		if err := <-terr; err != nil {
			t.Fatal(err)
		}
		first1 := kinds(rec1.all(), EventElected)
		pgtest.WaitFor(t, "all elected events", wait, func() bool { return len(first1)+len(kinds(rec2.all(), EventElected)) >= n })
		all := append(first1, kinds(rec2.all(), EventElected)...)
		var lastLSN uint64
		for i, e := range all {
			if e.Epoch != int64(i+1) || e.LSN <= lastLSN || e.AuditID == 0 {
				t.Fatalf("elected event %d of %d (%d in the first run): epoch %d, lsn %d after %d, audit id %d; want epoch %d, increasing lsn",
					i+1, len(all), len(first1), e.Epoch, e.LSN, lastLSN, e.AuditID, i+1)
			}
			lastLSN = e.LSN
		}
		if len(all) != n || len(first1) >= n {
			t.Fatalf("%d elected events (%d in the first run), want %d across both", len(all), len(first1), n)
		}
		// Released events too, and no audit row twice.
		settle(t, second, 1)
		seen := map[int64]bool{}
		for _, e := range append(rec1.all(), rec2.all()...) {
			if e.AuditID != 0 && seen[e.AuditID] {
				t.Fatalf("audit row %d delivered twice: %+v", e.AuditID, e)
			}
			seen[e.AuditID] = true
		}
		pgtest.WaitFor(t, "all released events", wait, func() bool {
			return len(kinds(rec1.all(), EventReleased))+len(kinds(rec2.all(), EventReleased)) == n
		})
		t.Logf("elected events: %d in the first run, %d in the second; %d changes were committed while no collector ran",
			len(first1), n-len(first1), whileDown-stoppedAt)
		s := waitSnap(t, second, "the slot's lag", func(s *Snapshot) bool { return s.Health.SlotLagBytes >= 0 })
		if h := s.Health; h.Slot != slot || h.Source != SourceLogical {
			t.Fatalf("health %+v", h)
		}
	})

	t.Run("SameEventsOnBothSources", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		ncfg := testConfig(t, dsn)
		ncfg.Source = SourceModeNotify
		notify := newCollector(t, ncfg)
		byListen := record(t, notify)
		run(t, notify)
		stream := newCollector(t, logicalConfig(t, dsn, ""))
		byStream := record(t, stream)
		run(t, stream)
		waitSnap(t, stream, "the logical source", func(s *Snapshot) bool { return s.Health.Source == SourceLogical })
		waitSnap(t, notify, "the first read", func(*Snapshot) bool { return true })

		nodes := []*testnode.Node{testnode.Start(t, testnode.FastConfig(dsn, "n1", "s", "q")), testnode.Start(t, testnode.FastConfig(dsn, "n2", "s", "q"))}
		for i := range 6 {
			scope := []string{"s", "q"}[i%2]
			var l *testnode.Node
			pgtest.WaitFor(t, "a leader of "+scope, wait, func() bool {
				for _, n := range nodes {
					if n.Leads(scope) {
						l = n
						return true
					}
				}
				return false
			})
			_ = l.Scope(scope).Resign(context.Background()) // an error (session lost) ends the term too
			pgtest.WaitFor(t, "the next term of "+scope, wait, func() bool { return !l.Leads(scope) })
		}
		admin := pgtest.Connect(t, dsn)
		exec(t, admin, "SELECT pgleader.fence_rejected('s', 1, 'zombie', 'test')")
		nodes[0].Stop()
		pgtest.WaitFor(t, "n2 leading both scopes", wait, func() bool { return nodes[1].Leads("s") && nodes[1].Leads("q") })
		audit := func(r *recorder) []Event {
			return slices.DeleteFunc(r.all(), func(e Event) bool { return e.AuditID == 0 })
		}
		var want int64
		pgtest.WaitFor(t, "both collectors' audit events", wait, func() bool {
			want = queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind = ANY ($1)`, auditKinds)
			return int64(len(audit(byListen))) == want && int64(len(audit(byStream))) == want
		})
		// The same events, field for field. In the same order for the leadership
		// events of a scope, which the scope's row lock serializes; other rows
		// (fence_rejected) may commit in another order than their ids, and the
		// stream delivers them in commit order, the poll in id order.
		describe := func(e Event) string {
			return fmt.Sprintf("%d %s %s epoch %d node %s prev %q reason %q detail %q at %d",
				e.AuditID, e.Kind, e.Scope, e.Epoch, e.Node, e.PrevHolder, e.Reason, e.Detail, e.At.UnixMicro())
		}
		views := func(evs []Event) (all []string, leadership map[string][]string) {
			leadership = map[string][]string{}
			for _, e := range evs {
				all = append(all, describe(e))
				if e.Kind == EventElected || e.Kind == EventReleased || e.Kind == EventTermClosed {
					leadership[e.Scope] = append(leadership[e.Scope], describe(e))
				}
			}
			slices.Sort(all)
			return all, leadership
		}
		for _, e := range audit(byStream) {
			if e.LSN == 0 {
				t.Errorf("event from the stream without LSN: %+v", e)
			}
		}
		gotAll, got := views(audit(byStream))
		wantAll, wantEvs := views(audit(byListen))
		if !slices.Equal(gotAll, wantAll) {
			t.Errorf("events differ:\nLISTEN:  %s\nlogical: %s", strings.Join(wantAll, "\n         "), strings.Join(gotAll, "\n         "))
		}
		for scope, evs := range wantEvs {
			if !slices.Equal(got[scope], evs) {
				t.Errorf("scope %s:\nLISTEN:  %s\nlogical: %s", scope, strings.Join(evs, "\n         "), strings.Join(got[scope], "\n         "))
			}
		}
		if len(got) != 2 || len(wantEvs) != 2 || want < 8 {
			t.Fatalf("%d scopes from the stream, %d from LISTEN, %d audit rows", len(got), len(wantEvs), want)
		}
	})

	t.Run("DecodeErrorCatchUp", func(t *testing.T) {
		// A transaction the stream does not deliver (here: committed while the
		// audit table was out of the publication) and a row it cannot convert:
		// the decode error is counted, and a read of the audit table delivers the
		// missed row, once.
		dsn := pgtest.MigratedDSN(t)
		c := newCollector(t, logicalConfig(t, dsn, ""))
		rec := record(t, c)
		run(t, c)
		waitSnap(t, c, "the logical source", func(s *Snapshot) bool { return s.Health.Source == SourceLogical })
		admin := pgtest.Connect(t, dsn)
		fence := func(epoch int) int64 {
			return queryInt(t, admin, `INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
			                           VALUES ('s', 'zombie', $1, 'fence_rejected', '{}') RETURNING id`, epoch)
		}
		id1 := fence(1)
		if ev := rec.waitEvent(t, "the first fence event", func(e Event) bool { return e.AuditID == id1 }); ev.LSN == 0 {
			t.Fatalf("event %+v did not come from the stream", ev)
		}
		exec(t, admin, "ALTER PUBLICATION "+logical.DefaultPublication+" DROP TABLE pgleader.audit")
		id2 := fence(2)
		exec(t, admin, "ALTER PUBLICATION "+logical.DefaultPublication+" ADD TABLE pgleader.audit")
		bad, at := "x", "not a time"
		c.applyTx(logical.Tx{CommitLSN: 1, Changes: []logical.Change{{Table: "audit", Op: "insert",
			Row: map[string]*string{"id": &bad, "at": &at}}}}, map[string]string{}, "test")
		if ev := rec.waitEvent(t, "the row the stream missed", func(e Event) bool { return e.AuditID == id2 }); ev.LSN != 0 || ev.Epoch != 2 {
			t.Fatalf("event %+v, want the catch-up read's (no LSN)", ev)
		}
		id3 := fence(3)
		if ev := rec.waitEvent(t, "the third fence event", func(e Event) bool { return e.AuditID == id3 }); ev.LSN == 0 {
			t.Fatalf("event %+v did not come from the stream", ev)
		}
		s := settle(t, c, 1)
		if s.Health.DecodeErrors != 1 || s.FenceRejected["s"] != 3 || s.Health.Source != SourceLogical {
			t.Fatalf("health %+v, fence counter %v; want 1 decode error, 3 rejections", s.Health, s.FenceRejected)
		}
		for _, id := range []int64{id1, id2, id3} {
			if n := len(slices.DeleteFunc(rec.all(), func(e Event) bool { return e.AuditID != id })); n != 1 {
				t.Fatalf("audit row %d delivered %d times", id, n)
			}
		}
	})
}

func TestLogicalSourceUnavailable(t *testing.T) {
	pgtest.Slow(t)
	// check runs an auto collector (it must fall back to LISTEN/NOTIFY and log
	// why) and a logical one (Run must fail, naming the reason and the fixes).
	check := func(t *testing.T, cfg Config, reason string, fixes ...string) {
		t.Helper()
		logs := &logCapture{}
		auto := cfg
		auto.Source, auto.Logger = SourceModeAuto, slog.New(logs)
		c := newCollector(t, auto)
		run(t, c)
		waitSnap(t, c, "LISTEN/NOTIFY", func(s *Snapshot) bool { return s.Health.Source == SourceLive })
		if line, ok := logs.find("LISTEN/NOTIFY"); !ok || !strings.Contains(line, reason) || !strings.HasPrefix(line, "INFO") {
			t.Fatalf("fallback log line %q, want an INFO line with %q", line, reason)
		}

		explicit := cfg
		explicit.Source = SourceModeLogical
		c = newCollector(t, explicit)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		err := c.Run(ctx)
		if !errors.Is(err, ErrLogicalUnavailable) || ctx.Err() != nil || !strings.Contains(err.Error(), reason) ||
			!strings.Contains(err.Error(), "--source notify") {
			t.Fatalf("Run: %v, want ErrLogicalUnavailable naming %q and --source notify", err, reason)
		}
		for _, fix := range fixes {
			if !strings.Contains(err.Error(), fix) {
				t.Errorf("Run: %v, want the fix %q", err, fix)
			}
		}
		t.Logf("Run: %v", err)
	}

	t.Run("WalLevelReplica", func(t *testing.T) {
		srv := pgtest.NewServer(t, pgserver.Options{Settings: map[string]string{"wal_level": "replica"}})
		dsn := srv.DSN("postgres")
		pgtest.Migrate(t, dsn)
		check(t, testConfig(t, dsn), "wal_level is replica, not logical", "ALTER SYSTEM SET wal_level = logical")
	})

	t.Run("RoleWithoutReplication", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		admin := pgtest.Connect(t, dsn)
		role := "plain_" + strings.ToLower(dsn[strings.LastIndex(dsn, "_")+1:strings.Index(dsn, "?")])
		exec(t, admin, "CREATE ROLE "+role+" LOGIN NOREPLICATION NOSUPERUSER")
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			for _, sql := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
				if _, err := admin.Exec(ctx, sql); err != nil {
					t.Errorf("%s: %v", sql, err)
				}
			}
		})
		exec(t, admin, "GRANT pgleader_reader TO "+role)
		cfg := testConfig(t, dsn)
		cfg.ConnConfig.User = role
		check(t, cfg, "role "+role+" lacks REPLICATION", "ALTER ROLE "+role+" REPLICATION")
	})

	t.Run("PublicationMissing", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		admin := pgtest.Connect(t, dsn)
		exec(t, admin, "DROP PUBLICATION "+logical.DefaultPublication)
		check(t, testConfig(t, dsn), "publication", "pgleader migrate")
	})
}

func TestSourceConfig(t *testing.T) {
	base := testConfig(t, "postgres://u@127.0.0.1:5432/db")
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"UnknownSource", func(c *Config) { c.Source = "carrier-pigeon" }, "Source"},
		{"SlotWithNotify", func(c *Config) { c.Source, c.Slot = SourceModeNotify, "s1" }, "Slot"},
		{"BadSlotName", func(c *Config) { c.Source, c.Slot = SourceModeLogical, "Bad-Name" }, "Slot"},
		{"NegativeStatusInterval", func(c *Config) { c.Source, c.StatusInterval = SourceModeAuto, -time.Second }, "StatusInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New: %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	if d := DefaultConfig(); d.Source != SourceModeAuto || d.Slot != "" {
		t.Fatalf("DefaultConfig: source %q slot %q", d.Source, d.Slot)
	}
	cfg := base
	cfg.Source, cfg.Slot = SourceModeAuto, "pgleader_collector_1"
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
}

// The stream's text values convert to what the audit poll scans.
func TestAuditFromRow(t *testing.T) {
	s := func(v string) *string { return &v }
	a, err := auditFromRow(map[string]*string{"id": s("42"), "at": s("2026-03-01 14:00:00.123456+01"), "scope": s("billing"),
		"node_id": s("n1"), "epoch": s("7"), "kind": s("elected"), "detail": s(`{"prev_holder": null, "prev_epoch": 6}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 3, 1, 13, 0, 0, 123456000, time.UTC)
	if a.ID != 42 || !a.At.Equal(want) || a.Scope != "billing" || a.Node != "n1" || a.Epoch != 7 || a.Kind != "elected" ||
		a.Detail.PrevHolder != nil || a.Detail.PrevEpoch == nil || *a.Detail.PrevEpoch != 6 {
		t.Fatalf("%+v", a)
	}
	a, err = auditFromRow(map[string]*string{"id": s("43"), "at": s("2026-03-01 14:00:00+00"), "scope": nil, "epoch": nil,
		"kind": s("x"), "detail": s("not json")})
	if err != nil || a.Scope != "" || a.Epoch != 0 || a.Detail != (auditDetail{}) {
		t.Fatalf("%+v %v", a, err)
	}
	for _, row := range []map[string]*string{{"id": s("x"), "at": s("2026-03-01 14:00:00+00")}, {"id": s("1"), "at": s("yesterday")}, {"id": s("1"), "at": nil}} {
		if _, err := auditFromRow(row); err == nil {
			t.Errorf("auditFromRow(%v) succeeded", row)
		}
	}
}

func TestLeaderChanged(t *testing.T) {
	s := func(v string) *string { return &v }
	row := func(epoch, holder, released string) map[string]*string {
		r := map[string]*string{"scope": s("s"), "epoch": s(epoch), "holder": s(holder), "holder_pid": s("10"),
			"last_heartbeat": s(time.Now().String())}
		if released != "" {
			r["released_at"] = s(released)
		}
		return r
	}
	known := map[string]string{}
	for i, tc := range []struct {
		ch   logical.Change
		want bool
	}{
		{logical.Change{Table: "leader_state", Op: "update", Row: row("1", "n1", "")}, true}, // first seen
		{logical.Change{Table: "leader_state", Op: "update", Row: row("1", "n1", "")}, false},
		{logical.Change{Table: "leader_state", Op: "update", Row: row("1", "n1", "")}, false}, // heartbeats
		{logical.Change{Table: "leader_state", Op: "update", Row: row("1", "", "2026-03-01 14:00:00+00")}, true},
		{logical.Change{Table: "leader_state", Op: "update", Row: row("2", "n2", "")}, true},
		{logical.Change{Table: "leader_state", Op: "delete", Old: map[string]*string{"scope": s("s")}}, true},
		{logical.Change{Table: "leader_state", Op: "update", Row: row("2", "n2", "")}, true}, // forgotten by the delete
	} {
		if got := leaderChanged(known, tc.ch); got != tc.want {
			t.Errorf("change %d (%s %v): %v, want %v", i, tc.ch.Op, tc.ch.Row, got, tc.want)
		}
	}
}
