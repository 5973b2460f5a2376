package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// FleetOptions sizes a forged fleet: Databases databases on the server of DSN,
// each migrated and holding Scopes led scopes over Nodes nodes.
type FleetOptions struct {
	DSN       string // a database of the server, as a role that may CREATE DATABASE
	Databases int
	Scopes    int
	Nodes     int
	Logf      func(string, ...any)
}

// ForgedFleet is a fleet ForgeFleet made: a database per member, each with
// Scopes scopes led by Nodes nodes (every node a candidate for every scope, the
// scopes dealt round-robin), one open term per scope and two ended ones, the
// scopes' advisory locks held by a session per database (as the leaders'
// sessions would), and every heartbeat and last_seen kept fresh once a second
// until Close. The rows are forged with SQL, not by node processes: the
// collector, exporter and dashboard read them as they read a real cluster of
// that size, while this 2-core machine is spared Databases × Nodes processes.
type ForgedFleet struct {
	Names   []string          // database names, bench_fleet_00 …
	Configs []*pgx.ConnConfig // their connection configurations

	admin   *pgx.Conn
	holders []*pgx.Conn
	stop    context.CancelFunc
	beating sync.WaitGroup
}

// ForgeFleet creates and forges the fleet. Close drops it.
func ForgeFleet(ctx context.Context, o FleetOptions) (f *ForgedFleet, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	base, err := pgx.ParseConfig(o.DSN)
	if err != nil {
		return nil, err
	}
	f = &ForgedFleet{}
	if f.admin, err = pgsession.Connect(ctx, base); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			f = nil
		}
	}()
	for i := range o.Databases {
		name := fmt.Sprintf("bench_fleet_%02d", i)
		if _, err = f.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return f, fmt.Errorf("drop %s: %w", name, err)
		}
		if _, err = f.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return f, fmt.Errorf("create database %s (the role of --dsn needs CREATEDB): %w", name, err)
		}
		f.Names = append(f.Names, name)
		cfg := base.Copy()
		cfg.Database = name
		f.Configs = append(f.Configs, cfg)
		if _, err = migrate.Up(ctx, cfg, nil); err != nil {
			return f, fmt.Errorf("migrate %s: %w", name, err)
		}
		holder, err := pgsession.Connect(ctx, cfg)
		if err != nil {
			return f, fmt.Errorf("connect %s: %w", name, err)
		}
		f.holders = append(f.holders, holder)
		if err := forgeDatabase(ctx, holder, o.Scopes, o.Nodes); err != nil {
			return f, fmt.Errorf("forge %s: %w", name, err)
		}
		o.Logf("forged %s: %d scopes, %d nodes", name, o.Scopes, o.Nodes)
	}
	bctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	for _, h := range f.holders {
		f.beating.Go(func() { heartbeat(bctx, h) })
	}
	return f, nil
}

// forgeDatabase writes the forged cluster of one database on conn, which then
// holds the scopes' locks and the nodes' guard locks.
func forgeDatabase(ctx context.Context, conn *pgx.Conn, scopes, nodes int) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`
INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes, leads,
                            heartbeat_interval_ms, trust_window_ms, session_lease_ms, backend_pid)
SELECT 'node-' || n, 'host-' || n, 1000 + n, 'bench',
       (SELECT array_agg('scope-' || lpad(s::text, 4, '0') ORDER BY s) FROM generate_series(0, %[1]d - 1) s),
       coalesce((SELECT array_agg('scope-' || lpad(s::text, 4, '0') ORDER BY s) FROM generate_series(0, %[1]d - 1) s WHERE s %% %[2]d = n), '{}'),
       500, 1500, 2000, pg_backend_pid()
  FROM generate_series(0, %[2]d - 1) n;
INSERT INTO pgleader.leader_state (scope, lock_key, epoch, holder, holder_pid, acquired_at, last_heartbeat,
                                   heartbeat_interval_ms, heartbeat_timeout_ms, trust_window_ms, session_lease_ms)
SELECT 'scope-' || lpad(s::text, 4, '0'), pgleader.lock_key('scope-' || lpad(s::text, 4, '0')), 3, 'node-' || s %% %[2]d,
       pg_backend_pid(), now() - interval '1 min', now(), 500, 500, 1500, 2000
  FROM generate_series(0, %[1]d - 1) s;
INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, released_at, release_reason, handover_gap)
SELECT 'scope-' || lpad(s::text, 4, '0'), e, 'node-' || (s + e) %% %[2]d, 'host', 1,
       now() - make_interval(mins => 4 - e),
       CASE WHEN e < 3 THEN now() - make_interval(mins => 3 - e) END,
       CASE WHEN e < 3 THEN 'resigned' END, interval '2 ms'
  FROM generate_series(0, %[1]d - 1) s, generate_series(1, 3) e;
SELECT count(pg_advisory_lock(pgleader.lock_key('scope-' || lpad(s::text, 4, '0')))) FROM generate_series(0, %[1]d - 1) s;`, scopes, nodes))
	return err
}

// heartbeat keeps the forged leaders' heartbeats and the nodes' last_seen fresh,
// as the nodes would, until ctx ends.
func heartbeat(ctx context.Context, conn *pgx.Conn) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = conn.Exec(ctx, `UPDATE pgleader.leader_state SET last_heartbeat = now();
UPDATE pgleader.nodes SET last_seen = now()`)
		}
	}
}

// Close stops the heartbeats, closes the sessions and drops the databases.
func (f *ForgedFleet) Close() {
	if f.stop != nil {
		f.stop()
		f.beating.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range f.holders {
		_ = h.Close(ctx)
	}
	if f.admin == nil {
		return
	}
	var errs []error
	for _, name := range f.Names {
		if _, err := f.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			errs = append(errs, err)
		}
	}
	_ = errors.Join(errs...) // best effort: the figures are taken
	_ = f.admin.Close(ctx)
}
