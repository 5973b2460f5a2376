package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/fault"
)

// squat is the fault of scenario "squat": a session that is not a node (a plain
// psql-like connection) queues for the scope's advisory lock behind the leader;
// the leader is killed, so the squatter gets the lock before any follower (the
// followers only try, they do not queue); it holds it for a while, then lets go.
// A collector must name the squatter (alert interference, with its pid) both while
// it waits and while it holds the lock; leadership must resume after it let go.
func squat(ctx context.Context, e *env, n *cluster.Node, scope string, epoch int64) error {
	conn, err := reconnect(ctx, e.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	pid := int(conn.PgConn().PID())
	var key int64
	if err := e.admin.QueryRow(ctx, "SELECT lock_key FROM pgleader.leader_state WHERE scope = $1", scope).Scan(&key); err != nil {
		return err
	}
	granted := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
		granted <- err
	}()
	if err := e.waitLock(ctx, pid, key, false); err != nil {
		return err
	}
	if err := e.namesSquatter(ctx, scope, pid, false); err != nil {
		return err
	}
	t0, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
	if err != nil {
		return err
	}
	e.fault("squat-kill9", n.ID, t0, t0)
	select {
	case err := <-granted:
		if err != nil {
			return fmt.Errorf("squatter's lock: %w", err)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("squatter (pid %d) never got the lock of %s after the leader's kill", pid, scope)
	}
	held := monotime.Now()
	if err := e.namesSquatter(ctx, scope, pid, true); err != nil {
		return err
	}
	e.pause(ctx, 300*time.Millisecond, time.Second)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		return err
	}
	freed := monotime.Now()
	e.fault("squat", "", held, freed)
	r, err := e.newEpoch(ctx, scope, epoch)
	if err != nil {
		return fmt.Errorf("leadership of %s after the squatter let go: %w", scope, err)
	}
	e.resumes = append(e.resumes, time.Duration(r.MonoNS-freed))
	_, err = e.c.Start(n.ID)
	return err
}

// waitLock waits until backend pid holds (granted) or waits for the advisory lock key.
func (e *env) waitLock(ctx context.Context, pid int, key int64, granted bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_locks l
			WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.pid = $1 AND l.granted = $3
			  AND ((l.classid::bigint << 32) | l.objid::bigint) = $2`, pid, key, granted).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pid %d: lock %d (granted %v) not seen in pg_locks", pid, key, granted)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// namesSquatter makes one collector read and checks that it raises the
// interference alert for scope naming pid, holding or waiting as said.
func (e *env) namesSquatter(ctx context.Context, scope string, pid int, holds bool) error {
	cc, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		return err
	}
	col, err := collector.New(collector.Config{ConnConfig: cc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	snap, err := col.Poll(ctx)
	if err != nil {
		return fmt.Errorf("collector read: %w", err)
	}
	sc, _ := snap.Scope(scope)
	named := slices.ContainsFunc(sc.Interference, func(f collector.ForeignSession) bool { return f.PID == pid && f.Granted == holds })
	alerted := slices.ContainsFunc(sc.Alerts, func(a collector.Alert) bool { return a.Kind == collector.AlertInterference })
	if !named || !alerted {
		return fmt.Errorf("collector did not name the squatter of %s (pid %d, holds %v) in one read: interference %+v, alerts %+v",
			scope, pid, holds, sc.Interference, sc.Alerts)
	}
	e.squatsNamed++
	return nil
}
