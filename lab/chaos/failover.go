package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/fault"
	"github.com/pgleader/pgleader/lab/pgserver"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// pair is the primary and streaming standby of a failover scenario. Nodes reach them
// through one multi-host DSN with target_session_attrs=read-write, as in production
// (Patroni, CloudNativePG and pg_auto_failover setups, a managed service's
// endpoint): whichever server accepts writes is the one they use.
type pair struct {
	a, b             *pgserver.Server // fixed order of the DSN's hosts
	primary, standby *pgserver.Server
	sync             bool
}

const pairDB = "chaos"

func newPair(ctx context.Context, sync bool) (p *pair, err error) {
	p = &pair{sync: sync}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.a, err = pgserver.Start(ctx, pgserver.Options{}); err != nil {
		return nil, err
	}
	if err := p.a.CreateDatabase(ctx, pairDB); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(p.a.DSN(pairDB))
	if err != nil {
		return nil, err
	}
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		return nil, err
	}
	if p.b, err = p.a.StartStandby(ctx, pgserver.Options{}); err != nil {
		return nil, err
	}
	p.primary, p.standby = p.a, p.b
	if sync {
		// As an HA manager sets it (ALTER SYSTEM, reload), once the standby streams;
		// it is changed again at each promotion and rebuild.
		if err := p.a.SetPrimarySetting(ctx, "synchronous_standby_names", "*"); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pair) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		p.a.Port(), p.b.Port(), pairDB)
}

func (p *pair) close() {
	for _, s := range []*pgserver.Server{p.a, p.b} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// failover crashes the primary (stop -m immediate) and promotes the standby. It
// returns when the crash began, when the old primary was gone (its last commit
// acknowledged before then), and when the new primary accepted writes. With
// synchronous replication the new primary is left without a synchronous standby
// until rebuild: as Patroni's synchronous_mode (not strict) does, it stops waiting
// for one, or every commit would hang.
func (p *pair) failover(ctx context.Context) (crashed, gone, promoted int64, err error) {
	if crashed, err = fault.Crash.Apply(ctx, fault.Target{Server: p.primary}); err != nil {
		return 0, 0, 0, err
	}
	gone = monotime.Now()
	if _, err := fault.Promote.Apply(ctx, fault.Target{Server: p.standby}); err != nil {
		return 0, 0, 0, err
	}
	promoted = monotime.Now()
	if p.sync {
		if err := p.standby.SetPrimarySetting(ctx, "synchronous_standby_names", ""); err != nil {
			return 0, 0, 0, err
		}
	}
	p.primary, p.standby = p.standby, p.primary
	return crashed, gone, promoted, nil
}

// rebuild makes the old primary a streaming standby of the new one (a fresh base
// backup), and with synchronous replication makes it the synchronous standby again.
func (p *pair) rebuild(ctx context.Context) error {
	if err := p.standby.Rebuild(ctx, p.primary); err != nil {
		return err
	}
	if p.sync {
		return p.primary.SetPrimarySetting(ctx, "synchronous_standby_names", "*")
	}
	return nil
}

// failovers fails the pair over, over and over. Before each asynchronous failover the
// standby stops receiving and the leader of every scope is killed, so that the
// takeovers (epoch bumps acknowledged to the nodes) and the acknowledged writes of
// the new terms are lost with the old primary: the checker then judges H1 and H2
// over the nodes' events, which outlive the database's history, and counts the lost
// writes (History.DataLoss) instead of calling them H5 violations. After each
// failover every scope must get a new term on the new primary; the time from the
// promotion to that gate is recorded.
func failovers(sync bool) func(context.Context, *env) error {
	mode := "async"
	if sync {
		mode = "sync"
	}
	return func(ctx context.Context, e *env) error {
		p := e.pair
		if p == nil {
			return errors.New("failover scenario without a primary and standby")
		}
		for e.running() && ctx.Err() == nil {
			epochs, err := e.leaderEpochs(ctx)
			if err != nil {
				return err
			}
			var loss checker.Window
			if !sync {
				// Every commit acknowledged before StartMono reaches the standby
				// before it stops receiving (asynchronous replication lags by a few
				// milliseconds, more under load): only later ones can be lost.
				loss.StartMono = monotime.Now()
				if err := p.standby.WaitReplayed(ctx, p.primary); err != nil {
					return err
				}
				if err := p.standby.StopReceiving(ctx); err != nil {
					return err
				}
				e.fault("standby-stops-receiving", "", loss.StartMono, monotime.Now())
				for _, s := range e.scopes {
					n, epoch, err := e.leader(ctx, s)
					if err != nil {
						return err
					}
					t0, err := fault.Kill9.Apply(ctx, fault.Target{Node: n})
					if err != nil {
						return err
					}
					e.fault(fault.Kill9.Name, n.ID, t0, t0)
					if _, err := e.newEpoch(ctx, s, epoch); err != nil {
						return err
					}
					if _, err := e.c.Start(n.ID); err != nil {
						return err
					}
				}
				// The new terms work (acknowledged writes) before the crash.
				if epochs, err = e.leaderEpochs(ctx); err != nil {
					return err
				}
			}
			crashed, gone, promoted, err := p.failover(ctx)
			if err != nil {
				return err
			}
			e.fault("pg-failover-"+mode, "", crashed, promoted)
			if !sync {
				loss.EndMono = gone // commits acknowledged until the old primary died
				e.loss = append(e.loss, loss)
			}
			if err := e.reconnectAdmin(ctx); err != nil { // it died with the old primary
				return err
			}
			if !sync {
				// The point of the scenario: the new primary never saw the last grants.
				top := int64(0)
				for _, ep := range epochs {
					top = max(top, ep)
				}
				if err := e.provesLoss(ctx, top); err != nil {
					return err
				}
			}
			for _, s := range e.scopes {
				r, err := e.newEpoch(ctx, s, epochs[s])
				if err != nil {
					return fmt.Errorf("after failover (%s): %w", mode, err)
				}
				e.resumes = append(e.resumes, time.Duration(r.MonoNS-promoted))
			}
			if err := p.rebuild(ctx); err != nil {
				return err
			}
			e.pause(ctx, 300*time.Millisecond, 800*time.Millisecond)
		}
		return nil
	}
}

// provesLoss fails unless the new primary's first claim found a highest epoch on
// record below top, the highest epoch acknowledged before the crash: the bumps
// really were lost (pgleader.timelines.max_epoch_seen).
func (e *env) provesLoss(ctx context.Context, top int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var seen *int64
		err := e.admin.QueryRow(ctx, `SELECT max_epoch_seen FROM pgleader.timelines
		        WHERE timeline = pgleader.wal_timeline()`).Scan(&seen)
		switch {
		case err == nil && seen != nil && *seen >= top:
			return fmt.Errorf("the promoted standby had epoch %d, the nodes were granted up to %d: no bump was lost, the scenario proves nothing", *seen, top)
		case err == nil:
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		select { // no claim on the new timeline yet
		case <-ctx.Done():
			return fmt.Errorf("no claim on the new primary: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
