package logical

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
)

// Querier is what the slot functions need of a connection: *pgx.Conn,
// *pgxpool.Pool and pgx.Tx all qualify. An ordinary (non-replication) connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Available reports whether the database cfg points at can serve a logical
// replication stream to cfg's role: wal_level must be logical, the role must have
// REPLICATION (or be a superuser), the server must allow WAL senders and slots,
// and it must accept a replication connection. When it cannot, ok is false and
// reason says why in a sentence (several reasons are joined with "; "), e.g.
// "wal_level is replica, not logical; role app lacks REPLICATION". err is set only
// when the checks themselves failed (the database is unreachable).
func Available(ctx context.Context, cfg *pgconn.Config) (ok bool, reason string, err error) {
	cfg = cfg.Copy()
	pgsession.Apply(cfg)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, "", fmt.Errorf("logical: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := simpleQuery(ctx, conn, `SELECT pg_catalog.current_setting('wal_level'), r.rolreplication OR r.rolsuper,
		       current_user, pg_catalog.current_setting('max_wal_senders'), pg_catalog.current_setting('max_replication_slots')
		  FROM pg_roles r WHERE r.rolname = current_user`)
	if err != nil {
		return false, "", fmt.Errorf("logical: read wal_level and role attributes: %w", err)
	}
	if len(rows) != 1 {
		return false, "", errors.New("logical: current_user not found in pg_roles")
	}
	r := rows[0]
	var reasons []string
	if r[0] != "logical" {
		reasons = append(reasons, fmt.Sprintf("wal_level is %s, not logical", r[0]))
	}
	if r[1] != "t" {
		reasons = append(reasons, fmt.Sprintf("role %s lacks REPLICATION", r[2]))
	}
	if r[3] == "0" {
		reasons = append(reasons, "max_wal_senders is 0")
	}
	if r[4] == "0" {
		reasons = append(reasons, "max_replication_slots is 0")
	}
	if len(reasons) > 0 {
		return false, strings.Join(reasons, "; "), nil
	}

	// pg_hba.conf, connection limits and the like only show when trying.
	rc := cfg.Copy()
	if rc.RuntimeParams == nil {
		rc.RuntimeParams = map[string]string{}
	}
	rc.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return false, "the server refused a replication connection: " + pgErr.Message, nil
		}
		return false, "", fmt.Errorf("logical: replication connection: %w", err)
	}
	defer repl.Close(context.WithoutCancel(ctx))
	if _, err := simpleQuery(ctx, repl, "IDENTIFY_SYSTEM"); err != nil {
		return false, "the server refused IDENTIFY_SYSTEM on a replication connection: " + err.Error(), nil
	}
	return true, "", nil
}

// Slot describes a logical replication slot.
type Slot struct {
	Name           string `json:"name"`
	Plugin         string `json:"plugin"`          // output plugin; pgleader's slots use pgoutput
	Temporary      bool   `json:"temporary"`       // dropped when its connection ends
	Active         bool   `json:"active"`          // a connection is streaming from it
	ActivePID      int    `json:"active_pid"`      // backend pid of that connection (0 when inactive)
	ConfirmedFlush string `json:"confirmed_flush"` // confirmed_flush_lsn: changes committed before it are not sent again
	// RetainedBytes is the WAL the server keeps for this slot:
	// pg_current_wal_lsn() - restart_lsn.
	RetainedBytes int64  `json:"retained_bytes"`
	Database      string `json:"database"`
}

const slotColumns = `s.slot_name, coalesce(s.plugin, ''), s.temporary, s.active, coalesce(s.active_pid, 0),
	coalesce(s.confirmed_flush_lsn::text, ''),
	coalesce(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn), 0)::bigint, coalesce(s.database, '')`

func scanSlot(row pgx.Row) (Slot, error) {
	var s Slot
	err := row.Scan(&s.Name, &s.Plugin, &s.Temporary, &s.Active, &s.ActivePID, &s.ConfirmedFlush,
		&s.RetainedBytes, &s.Database)
	return s, err
}

// ListSlots returns the logical slots of the current database that use pgoutput
// (the collector's, and any other pgoutput subscriber's), by name.
func ListSlots(ctx context.Context, db Querier) ([]Slot, error) {
	rows, err := db.Query(ctx, `SELECT `+slotColumns+`
		  FROM pg_replication_slots s
		 WHERE s.slot_type = 'logical' AND s.plugin = 'pgoutput' AND s.database = pg_catalog.current_database()
		 ORDER BY s.slot_name`)
	if err != nil {
		return nil, fmt.Errorf("logical: list replication slots: %w", err)
	}
	slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Slot, error) { return scanSlot(r) })
	if err != nil {
		return nil, fmt.Errorf("logical: list replication slots: %w", err)
	}
	return slots, nil
}

// LookupSlot returns the replication slot called name, of any kind and
// database; ErrNoSlot when there is none.
func LookupSlot(ctx context.Context, db Querier, name string) (Slot, error) {
	s, err := scanSlot(db.QueryRow(ctx, `SELECT `+slotColumns+` FROM pg_replication_slots s WHERE s.slot_name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Slot{}, fmt.Errorf("logical: %w: no replication slot is called %q", ErrNoSlot, name)
	}
	if err != nil {
		return Slot{}, fmt.Errorf("logical: read replication slot %q: %w", name, err)
	}
	return s, nil
}

// DropSlot drops the pgoutput slot called name in the current database, which
// frees the WAL it retains. It refuses a slot in use (ErrSlotInUse: stop its
// reader first), a slot of another plugin or database, and reports ErrNoSlot for
// a name that does not exist.
func DropSlot(ctx context.Context, db Querier, name string) error {
	s, err := LookupSlot(ctx, db, name)
	if err != nil {
		return err
	}
	var cur string
	if err := db.QueryRow(ctx, "SELECT pg_catalog.current_database()").Scan(&cur); err != nil {
		return fmt.Errorf("logical: drop slot %s: %w", name, err)
	}
	switch {
	case s.Plugin != "pgoutput":
		return fmt.Errorf("logical: slot %s uses plugin %q, not pgoutput: pgleader drops only pgoutput slots", name, s.Plugin)
	case s.Database != cur:
		return fmt.Errorf("logical: slot %s belongs to database %s: connect to that database to drop it", name, s.Database)
	case s.Active:
		return inUse(name, fmt.Sprint(s.ActivePID))
	}
	var one int
	err = db.QueryRow(ctx, "SELECT 1 FROM pg_catalog.pg_drop_replication_slot($1)", name).Scan(&one)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "55006": // became active meanwhile
		return fmt.Errorf("logical: %w: slot %s: %s: stop that collector first", ErrSlotInUse, name, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "42704": // dropped meanwhile
		return fmt.Errorf("logical: %w: no replication slot is called %q", ErrNoSlot, name)
	case err != nil:
		return fmt.Errorf("logical: drop slot %s: %w", name, err)
	}
	return nil
}

func inUse(name, pid string) error {
	return fmt.Errorf("logical: %w: slot %s is in use by pid %s: stop that collector first", ErrSlotInUse, name, pid)
}

// SlotLag returns how far a slot's confirmed position trails the server's WAL,
// in bytes: pg_current_wal_lsn() - confirmed_flush_lsn. It is the metric to alert
// on for permanent slots (a temporary slot ends with its stream).
func SlotLag(ctx context.Context, db Querier, slot string) (int64, error) {
	var lag *int64
	err := db.QueryRow(ctx, `SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("logical: %w: no replication slot is called %q", ErrNoSlot, slot)
	}
	if err != nil {
		return 0, fmt.Errorf("logical: read lag of slot %s: %w", slot, err)
	}
	if lag == nil {
		return 0, fmt.Errorf("logical: slot %s has no confirmed_flush_lsn (not a logical slot)", slot)
	}
	return *lag, nil
}
