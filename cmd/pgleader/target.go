package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/internal/names"
	"github.com/pgleader/pgleader/migrations"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/operator"
)

// checkScopes validates --scope values.
func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if err := names.Scope(s); err != nil {
			return cli.BadInput("--scope %q: %v", s, err)
		}
	}
	return nil
}

// checkNodeID validates a node id given with flag.
func checkNodeID(flag, id string) error {
	if err := names.NodeID(id); err != nil {
		return cli.BadInput("%s: %v", flag, err)
	}
	return nil
}

// checkedTarget resolves the database and checks it is reachable, PostgreSQL 14+ and
// migrated, so a command fails early with the fix in its message.
func (a *app) checkedTarget(ctx context.Context) (cli.Target, error) {
	t, err := a.resolve()
	if err != nil {
		return t, err
	}
	return t, dbcheck.Database(ctx, t.Config, migrations.Latest)
}

// withCheckedTarget runs fn on the invocation's database once checkedTarget has
// passed, with a context that SIGINT and SIGTERM cancel.
func (a *app) withCheckedTarget(cmd *cobra.Command, fn func(ctx context.Context, t cli.Target) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := a.checkedTarget(ctx)
	if err != nil {
		return err
	}
	return fn(ctx, t)
}

// newCollector builds the collector of the commands that watch the database;
// with evictStale it evicts stale holders through an operator of its own.
func newCollector(t cli.Target, interval time.Duration, evictStale bool, log *slog.Logger, src sourceFlags, tune ...func(*collector.Config)) (*collector.Collector, error) {
	cfg := collector.DefaultConfig()
	cfg.ConnConfig, cfg.PollInterval, cfg.Logger = t.Config, interval, log
	if evictStale {
		op, err := newOperator(t, nil, log)
		if err != nil {
			return nil, err
		}
		cfg.EvictStale = op
	}
	cfg.Source, cfg.Slot = collector.SourceMode(src.source), src.slot
	for _, f := range tune {
		f(&cfg)
	}
	c, err := collector.New(cfg)
	if errors.Is(err, collector.ErrInvalidConfig) {
		return nil, cli.BadInput("%v", err)
	}
	return c, err
}

// newOperator builds the operator actions on the database; latest is the
// snapshot they act on (nil: whichever holder the database shows).
func newOperator(t cli.Target, latest func() *collector.Snapshot, log *slog.Logger) (*operator.Operator, error) {
	return operator.New(operator.Config{ConnConfig: t.Config, Latest: latest, Logger: log})
}

// sourceHelp is the paragraph of --source and --slot in the commands' help.
const sourceHelp = `--source chooses how changes reach the collector between polls: auto (the
default) streams them through logical replication when the database allows it
(wal_level = logical and a role with REPLICATION), else uses LISTEN/NOTIFY;
logical insists, and fails with the fix when it cannot; notify never streams.
--slot NAME streams through a permanent replication slot, so a restarted
collector delivers the events committed while it was down. The server keeps
WAL for that slot until it is read or dropped: drop the slot of a collector you
retire (pgleader slots drop NAME) and alert on pgleader_collector_slot_lag_bytes.`

// sourceFlags are --source and --slot.
type sourceFlags struct {
	source string
	slot   string
}

func (s *sourceFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.source, "source", string(collector.SourceModeAuto),
		"`MODE` of learning of changes between polls: auto (logical replication when the database allows it, else LISTEN/NOTIFY), logical or notify")
	f.StringVar(&s.slot, "slot", "",
		"permanent logical replication slot `NAME` (default: a temporary one); WARNING: the server retains WAL for it until it is read or dropped, so an abandoned slot fills the disk (pgleader slots drop NAME)")
}

// collectorError gives the error a collector's Run returned its exit code: a
// logical source the database cannot serve is bad input (the message has the fix).
func collectorError(err error) error {
	if errors.Is(err, collector.ErrLogicalUnavailable) {
		return cli.BadInput("%v", err)
	}
	return err
}

// harnessDSN is the database a harness command was pointed at: --dsn, else
// DATABASE_URL; empty means "start a throwaway PostgreSQL". The PG* variables are
// deliberately not used here: running faults against a database needs an explicit
// choice.
func (a *app) harnessDSN() string {
	if a.dsn != "" {
		return a.dsn
	}
	return os.Getenv("DATABASE_URL")
}
