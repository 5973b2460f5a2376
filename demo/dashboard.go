package demo

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/internal/pgsession"
	"github.com/pgleader/pgleader/operator"
	"github.com/pgleader/pgleader/tui"
)

// dashboardOptions are the dashboard's options in the demo: its fault keys,
// its failover notes, the operator actions (R, x, O) without a flag —
// `pgleader top` asks for --allow-actions, the demo acts on its own nodes —
// and its DSN in the header, which c copies; the colours of o.Theme, and
// replay ([) of its database.
func dashboardOptions(dsn string, l *lab, op *operator.Operator, o Options) tui.Options {
	return tui.Options{
		Database: redactDSN(dsn),
		DSN:      pasteableDSN(dsn),
		Actions:  dashboardActions{op: op, scopes: l.scopes},
		Faults:   dashboardFaults{l},
		Notes:    l.notes,
		NoColor:  o.NoColor,
		Theme:    o.Theme,
		Title:    "pgleader demo",
		Replay:   replayer{dsn},
	}
}

// pasteableDSN is dsn without its password, if it has one, to paste into
// psql or pgleader --dsn: they ask for the password, or find it in
// PGPASSWORD or ~/.pgpass (url.Redacted's "xxxxx" would be sent as one).
// "" when dsn is no URL.
func pasteableDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return ""
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.User(u.User.Username())
		}
	}
	return u.String()
}

// handoverTimeout is how long a handover asked from the demo's dashboard
// waits for its target to lead before the request is withdrawn, as `pgleader
// top`'s: within the dashboard's bound on one action.
const handoverTimeout = 10 * time.Second

// dashboardActions are the dashboard's operator actions on the demo's
// database, refused on a scope that is not the demo's own: with --dsn the
// database may hold scopes of real services, which the demo must not evict.
type dashboardActions struct {
	op     *operator.Operator
	scopes []string
}

var _ tui.Actions = dashboardActions{}

// own refuses a scope the demo's nodes do not campaign for.
func (a dashboardActions) own(scope string) error {
	if !slices.Contains(a.scopes, scope) {
		return fmt.Errorf("%s is not one of the demo's scopes: the demo acts on its own only (use pgleader top --allow-actions)", scope)
	}
	return nil
}

func (a dashboardActions) Evict(ctx context.Context, scope, reason string) error {
	if err := a.own(scope); err != nil {
		return err
	}
	return a.op.Evict(ctx, scope, reason)
}

func (a dashboardActions) Resign(ctx context.Context, scope, reason string) error {
	if err := a.own(scope); err != nil {
		return err
	}
	return a.op.Resign(ctx, scope, reason)
}

func (a dashboardActions) Handover(ctx context.Context, scope, to, via string) error {
	if err := a.own(scope); err != nil {
		return err
	}
	_, err := a.op.Handover(ctx, scope, to, via, handoverTimeout)
	return err
}

// replayer reads the demo database's history for the dashboard's replay ([
// steps back in time, as in pgleader top).
type replayer struct{ dsn string }

var _ tui.Replayer = replayer{}

func (r replayer) History(ctx context.Context, at time.Time) (*replay.History, error) {
	cfg, err := pgx.ParseConfig(r.dsn)
	if err != nil {
		return nil, err
	}
	conn, err := pgsession.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := collector.ReadHistory(ctx, conn, at, collector.ReplayWindow)
	if err != nil {
		return nil, err
	}
	return replay.New(rows), nil
}
