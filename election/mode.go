package election

import (
	"context"
	"fmt"

	"github.com/pgleader/pgleader/internal/dbcheck"
	"github.com/pgleader/pgleader/migrations"

	"github.com/jackc/pgx/v5"
)

// mode is how an Elector leads: lock mode (the default, mode_lock.go), lease mode
// (mode_lease.go), standalone (mode_standalone.go) or the manual Elector of
// package electiontest (mode_manual.go). An Elector has one mode from New on.
// Everything else — scopes, campaigns, terms and their gates, the batch queue,
// transitions, observers — is shared, and asks its mode rather than which mode
// it runs in.
type mode interface {
	// connConfig returns the base connection configuration of the Elector's
	// sessions; nil for a mode without a database.
	connConfig() (*pgx.ConnConfig, error)
	// check is Elector.Check: what campaigning needs of the database.
	check(ctx context.Context) error
	// start runs Start's checks; once it returns nil the Elector has started and
	// run runs in the background.
	start(ctx context.Context) error
	// run leads until ctx ends, then drains and releases every term and returns
	// once everything it started has stopped.
	run(ctx context.Context) error
	// fence is Fence's check of tok (tok.p is not nil); exec runs a statement in
	// the caller's transaction.
	fence(tok Token, exec func(query string, args ...any) error) error
	// audited reports whether a fenced write refused for this mode's tokens is
	// recorded in pgleader.audit (ReportFenced).
	audited() bool
	// sessionless reports that the mode has no leadership session: Health reports
	// the session up, and the node healthy, while the Elector runs.
	sessionless() bool
	// resignable returns why Scope.Resign cannot give a term up (nil: it can).
	resignable() error
}

// sessionMode is the part of a database mode (lock, lease) that runs on a
// leadership session: how the session opens and registers, heartbeats, claims,
// waits for its predecessors, releases and records a clean stop. The session's
// shared machinery (the batch queue and its one serving goroutine, terms,
// confirmTerms, lose) calls it; every statement it runs on the leadership
// connection runs in a leadDo request (leadLoop) exactly as the shared code's do.
type sessionMode interface {
	// open connects, registers the node and returns the session, its loops
	// started; the session's m is this mode.
	open(ctx context.Context) (*session, error)
	// heartbeat confirms the session's terms and reads the followed scopes (one
	// round trip, one leadDo request), then extends or ends the terms.
	heartbeat(s *session)
	// beforeClaim runs before a claim batch of scopes is sent (not in a leadDo
	// request): whatever must be under way for a won claim's gate to open soon.
	beforeClaim(s *session)
	// claim runs one claim batch in a leadDo request and returns a row per scope.
	claim(ctx context.Context, s *session, names []string, keys []int64, scopes []*Scope, ann *string) ([]claimResult, error)
	// armGuard makes sure a freeze of this process frees the term's scope
	// together with its gate, before the gate of a won term may open.
	armGuard(ctx context.Context, s *session, since int64) error
	// awaitPredecessors keeps the new term t pending until no earlier holder of
	// its scope can trust its gate.
	awaitPredecessors(ctx context.Context, sc *Scope, t *term, s *session, r claimResult)
	// releaseQuery runs the release statement for the named terms on q.
	releaseQuery(ctx context.Context, s *session, q querier, names []string, epochs []int64, reasons []string) (pgx.Rows, error)
	// stopped records a clean shutdown of the node (in a leadDo request).
	stopped(ctx context.Context, s *session) error
}

// querier is the leadership connection, or a transaction on it (the warm-up's).
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// database is what the two database modes share: the base connection
// configuration parsed from Config, Check, the start-up sequence, the campaigns
// around the leadership session loop, and fencing in the database.
type database struct{ e *Elector }

func (d database) connConfig() (*pgx.ConnConfig, error) {
	cfg := d.e.cfg
	if cfg.ConnConfig != nil {
		return cfg.ConnConfig.Copy(), nil
	}
	base, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, &ConfigError{Field: "DSN", Rule: fmt.Sprintf("cannot parse connection string: %v", err)}
	}
	return base, nil
}

func (d database) check(ctx context.Context) error { return d.e.checkDatabase(ctx) }

// startChecks checks the database (dbcheck.Await), the scopes' bindings, then
// path (the mode's check of the path to the server, if any), then that no live
// node of the other mode campaigns for these scopes — all of them again while
// the database is in transition: a server that crashes or fails over between
// two of them must not end the node.
func (d database) startChecks(ctx context.Context, path func(context.Context) error) error {
	e := d.e
	return dbcheck.Await(ctx, e.base, len(e.cfg.Scopes), migrations.Latest, e.log,
		func(ctx context.Context) error { return dbcheck.Bindings(ctx, e.base, e.cfg.Scopes) },
		path, e.checkModeConflict)
}

func (d database) fence(tok Token, exec func(query string, args ...any) error) error {
	query, args := fenceStatement(tok)
	if err := exec(query, args...); err != nil {
		return fenceError(tok, err)
	}
	return nil
}

func (database) audited() bool     { return true }
func (database) sessionless() bool { return false }
func (database) resignable() error { return nil }
