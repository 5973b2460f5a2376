package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestEvict: a zombie holder is evicted by hand, or by a collector with
// Config.EvictStale once per term; a role that may not signal the holder's
// backend evicts nothing.
func TestEvict(t *testing.T) {
	pgtest.Slow(t)
	// stale forges a zombie: a session that holds the lock and an open term whose
	// heartbeat is 10 s old (trust window 300 ms).
	stale := func(t *testing.T, dsn, scope string) (*pgx.Conn, int) {
		zombie := pgtest.Connect(t, dsn)
		forgeHolder(t, zombie, scope, "zombie")
		exec(t, zombie, "UPDATE pgleader.leader_state SET last_heartbeat = now() - interval '10 s' WHERE scope = $1", scope)
		return zombie, int(queryInt(t, zombie, "SELECT pg_backend_pid()"))
	}

	t.Run("EvictStale", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		cfg.EvictStale, cfg.EvictAfter = newOperator(t, cfg, nil), 200*time.Millisecond
		c := newCollector(t, cfg)
		rec := record(t, c)
		run(t, c)
		_, pid := stale(t, dsn, "z")
		ev := rec.waitEvent(t, "evicted", func(e Event) bool { return e.Kind == EventEvicted })
		if ev.Scope != "z" || ev.Node != "zombie" || ev.Reason != "stale leader" || ev.AuditID == 0 || !strings.Contains(ev.Detail, fmt.Sprint(pid)) {
			t.Fatalf("evicted event %+v", ev)
		}
		admin := pgtest.Connect(t, dsn)
		// pg_terminate_backend signals; the backend exits a moment later.
		pgtest.WaitFor(t, fmt.Sprintf("the zombie's backend %d gone", pid), 5*time.Second, func() bool {
			return queryInt(t, admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid) == 0
		})
		if n := queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind = 'evicted' AND scope = 'z'
		                            AND detail->>'by' = session_user AND detail->>'via' = 'collector' AND session_role = session_user
		                            AND (detail->>'pid')::int = $1 AND detail->>'reason' = 'stale leader'`, pid); n != 1 {
			t.Fatalf("%d evicted audit rows", n)
		}
		rec.waitEvent(t, "stale_leader resolved", func(e Event) bool {
			return e.Kind == EventAlertResolved && e.Alert.Kind == AlertStaleLeader
		})
		settle(t, c, 3)
		if n := queryInt(t, admin, "SELECT count(*) FROM pgleader.audit WHERE kind = 'evicted'"); n != 1 {
			t.Fatalf("%d evictions, want exactly one per term", n)
		}
		if _, ok := rec.find(func(e Event) bool { return e.Kind == EventEvictFailed }); ok {
			t.Fatal("an eviction failed")
		}
	})

	t.Run("EvictManual", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		c := newCollector(t, cfg)
		op := newOperator(t, cfg, c)
		ctx := context.Background()
		holder := pgtest.Connect(t, dsn)
		forgeHolder(t, holder, "m", "someone")
		if err := op.Evict(ctx, "nope", "test"); !errors.Is(err, ErrUnknownScope) {
			t.Fatalf("unknown scope: %v", err)
		}
		// The caller saw a holder that has changed since: nothing happens.
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		exec(t, holder, "SELECT pgleader.release_batch('someone', '{m}', '{1}', '{resigned}')")
		forgeHolder(t, holder, "m", "someone")
		if err := op.Evict(ctx, "m", "test"); !errors.Is(err, ErrHolderChanged) {
			t.Fatalf("changed holder: %v", err)
		}
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if err := op.Evict(ctx, "m", "operator says so"); err != nil {
			t.Fatal(err)
		}
		if err := holder.Ping(ctx); err == nil {
			t.Fatal("the holder's connection survived its eviction")
		}
		admin := pgtest.Connect(t, dsn)
		if n := queryInt(t, admin, "SELECT count(*) FROM pgleader.audit WHERE kind = 'evicted' AND epoch = 2 AND detail->>'reason' = 'operator says so'"); n != 1 {
			t.Fatalf("%d audit rows for the eviction", n)
		}
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if err := op.Evict(ctx, "m", "again"); !errors.Is(err, ErrNoHolder) {
			t.Fatalf("evicting a dead holder: %v", err)
		}
	})

	t.Run("EvictForbidden", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		admin := pgtest.Connect(t, dsn)
		role := fmt.Sprintf("collector_weak_%d", time.Now().UnixNano()%1e9)
		exec(t, admin, fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE pgleader_operator`, role))
		t.Cleanup(func() {
			exec(t, admin, fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %[1]s", role))
		})
		holder := pgtest.Connect(t, dsn)
		forgeHolder(t, holder, "m", "someone")
		cfg := testConfig(t, dsn)
		cfg.ConnConfig.User = role
		op := newOperator(t, cfg, newCollector(t, cfg))
		err := op.Evict(context.Background(), "m", "test")
		if !errors.Is(err, ErrEvictForbidden) {
			t.Fatalf("Evict as %s: %v, want ErrEvictForbidden", role, err)
		}
		for _, want := range []string{"superuser", "pg_signal_backend", "holder's own role", role} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if n := queryInt(t, admin, "SELECT count(*) FROM pgleader.audit WHERE kind = 'evicted'"); n != 0 {
			t.Fatalf("a refused eviction wrote %d audit rows", n)
		}
		if err := holder.Ping(context.Background()); err != nil {
			t.Fatalf("the holder was terminated anyway: %v", err)
		}
	})
}
