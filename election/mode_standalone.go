package election

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/protocol"
)

// standaloneMode is Config.Mode = ModeStandalone: no database, no election. Every scope is
// led from Start on, at epoch 0, by a term whose gate never closes while the
// Elector runs (term.always); Fence does nothing and Resign refuses.
type standaloneMode struct{ e *Elector }

func (standaloneMode) connConfig() (*pgx.ConnConfig, error) { return nil, nil }
func (standaloneMode) check(context.Context) error          { return nil }
func (standaloneMode) start(context.Context) error          { return nil }

func (standaloneMode) fence(Token, func(string, ...any) error) error { return nil }
func (standaloneMode) audited() bool                                 { return false }
func (standaloneMode) sessionless() bool                             { return true }

func (standaloneMode) resignable() error {
	return fmt.Errorf("%w: standalone mode cannot resign", ErrNotLeader)
}

// run leads every scope until ctx ends, warning once a minute, then drains and
// ends the terms.
func (m standaloneMode) run(ctx context.Context) error {
	e := m.e
	warn := func() {
		e.log.Warn("STANDALONE MODE: this node leads every scope without any database; there is no election and no fencing; never run more than one instance",
			"node", e.cfg.NodeID, "scopes", e.cfg.Scopes)
	}
	warn()
	var terms []*term
	for _, s := range e.order {
		t := standaloneTerm(s)
		terms = append(terms, t)
		t.emit(Event{Kind: EventElected, Holder: e.cfg.NodeID, Token: t.token()})
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			warn()
		case <-ctx.Done():
			for _, t := range terms {
				t.drain(e.cfg.DrainTimeout)
				t.end(protocol.ReasonShutdown, true)
				t.emit(Event{Kind: EventRevoked, Holder: e.cfg.NodeID, Reason: t.reason, Token: t.token()})
			}
			return nil
		}
	}
}

// standaloneTerm is a term that is always open (Config.Mode = ModeStandalone).
func standaloneTerm(sc *Scope) *term {
	t := newTerm(sc, 0, nil, 0)
	t.always = true
	t.mu.Lock()
	t.allowOpen = true
	t.openPeriodLocked(math.MaxInt64, monotime.Now())
	t.mu.Unlock()
	return t
}
