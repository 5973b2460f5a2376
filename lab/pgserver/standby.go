package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby takes a base backup of s (pg_basebackup -R: the standby streams from
// s with the primary_conninfo the backup writes) into a fresh temporary directory and
// boots it as a streaming standby on its own port, with opts.Settings on top of s's.
// It returns once the standby accepts (read-only) connections and its WAL receiver
// streams. Close it like any Server.
func (s *Server) StartStandby(ctx context.Context, opts Options) (*Server, error) {
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "pgleader-pg-standby-*")
	if err != nil {
		return nil, fmt.Errorf("pgserver: create temp dir: %w", err)
	}
	settings := map[string]string{}
	for k, v := range s.settings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	sb := &Server{bindir: s.bindir, dir: dir, dataDir: filepath.Join(dir, "data"), sockDir: filepath.Join(dir, "sock"),
		logPath: filepath.Join(dir, "postgres.log"), port: port, settings: settings, cred: s.cred, logf: opts.Log}
	register(sb)
	if err := sb.baseBackup(ctx, s); err != nil {
		_ = sb.Close()
		return nil, err
	}
	if err := sb.Boot(ctx); err != nil {
		_ = sb.Close()
		return nil, err
	}
	if err := sb.WaitStreaming(ctx); err != nil {
		_ = sb.Close()
		return nil, err
	}
	return sb, nil
}

// Rebuild turns s, stopped, into a fresh streaming standby of primary: its data
// directory is replaced by a base backup of primary (what an operator does with the
// old primary after a failover, or pg_rewind does faster), and it boots on its own
// port as before.
func (s *Server) Rebuild(ctx context.Context, primary *Server) error {
	if err := s.Stop("immediate"); err != nil {
		return err
	}
	if err := os.RemoveAll(s.dataDir); err != nil {
		return fmt.Errorf("pgserver: remove %s: %w", s.dataDir, err)
	}
	if err := s.baseBackup(ctx, primary); err != nil {
		return err
	}
	if err := s.Boot(ctx); err != nil {
		return err
	}
	return s.WaitStreaming(ctx)
}

// baseBackup lays out s's directories and fills its data directory with
// pg_basebackup -R from primary.
func (s *Server) baseBackup(ctx context.Context, primary *Server) error {
	if err := s.chown(s.dir); err != nil {
		return err
	}
	if err := os.Mkdir(s.sockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := s.chown(s.sockDir); err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bindir, "pg_basebackup"),
		"-D", s.dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres")
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgserver: pg_basebackup into %s: %w\n%s", s.dataDir, err, bytes.TrimSpace(out))
	}
	s.log("pgserver: base backup of 127.0.0.1:%d into %s took %s", primary.port, s.dataDir, time.Since(start).Round(time.Millisecond))
	return nil
}

// WaitStreaming waits until s is in recovery and its WAL receiver streams.
func (s *Server) WaitStreaming(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		var streaming bool
		err := s.queryRow(ctx, "SELECT pg_is_in_recovery() AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')", &streaming)
		if err == nil && streaming {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: standby on port %d not streaming: %w (last error: %v)", s.port, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote promotes the standby s (pg_promote without waiting) and returns as soon
// as it accepts writes: pg_promote's own wait polls only every 100 ms.
func (s *Server) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgserver: promote 127.0.0.1:%d: %w", s.port, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_promote(false)"); err != nil {
		return fmt.Errorf("pgserver: promote 127.0.0.1:%d: %w", s.port, err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		var recovering bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
			return fmt.Errorf("pgserver: promote 127.0.0.1:%d: %w", s.port, err)
		}
		if !recovering {
			s.log("pgserver: 127.0.0.1:%d promoted", s.port)
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// StopReceiving stops the standby's WAL receiver (primary_conninfo emptied and the
// configuration reloaded), so that it falls behind its primary: what the primary
// commits from now on is lost if the standby is promoted. ResumeReceiving undoes it.
func (s *Server) StopReceiving(ctx context.Context) error {
	if err := s.exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		return err
	}
	if err := s.exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		var n int
		if err := s.queryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver", &n); err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: WAL receiver of 127.0.0.1:%d did not stop: %w", s.port, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// SetPrimarySetting changes one setting of a running server (ALTER SYSTEM, reload):
// for example synchronous_standby_names, as an HA manager does when the
// synchronous standby goes away or comes back.
func (s *Server) SetPrimarySetting(ctx context.Context, name, value string) error {
	if err := s.exec(ctx, "ALTER SYSTEM SET "+pgx.Identifier{name}.Sanitize()+" = "+quoteLiteral(value)); err != nil {
		return err
	}
	return s.exec(ctx, "SELECT pg_reload_conf()")
}

// Timeline returns the server's current WAL timeline (a primary's insert timeline,
// a standby's replay timeline).
func (s *Server) Timeline(ctx context.Context) (int64, error) {
	var tl int64
	err := s.queryRow(ctx, `SELECT CASE WHEN pg_is_in_recovery()
	        THEN (SELECT received_tli FROM pg_stat_wal_receiver UNION ALL SELECT timeline_id FROM pg_control_checkpoint() LIMIT 1)
	        ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END`, &tl)
	return tl, err
}

func quoteLiteral(v string) string {
	return "'" + string(bytes.ReplaceAll([]byte(v), []byte("'"), []byte("''"))) + "'"
}

func (s *Server) exec(ctx context.Context, sql string) error {
	return ExecAdmin(ctx, s.DSN("postgres"), sql)
}

func (s *Server) queryRow(ctx context.Context, sql string, dst ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgserver: connect: %w", err)
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dst...)
}

// WaitReplayed waits until the standby s has replayed everything primary has
// written so far.
func (s *Server) WaitReplayed(ctx context.Context, primary *Server) error {
	var lsn string
	if err := primary.queryRow(ctx, "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		var done bool
		err := s.queryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn", &done)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: standby on port %d has not replayed %s: %w (last error: %v)", s.port, lsn, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
