package election

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

// sqlEndFenced ends the fenced transactions of an ended term that hold a scope's
// row (pgleader.end_fenced, schema version 12). One call of a schema-qualified
// function: safe through a transaction pooler as well.
const sqlEndFenced = `SELECT pid, coalesce(login_role, ''), coalesce(application, ''), ended
  FROM pgleader.end_fenced($1, $2)`

// fencedWaits is when each scope's claim was first found busy: won, but the
// scope's row held by the previous term's fenced transactions. Serving goroutine
// only.
type fencedWaits map[string]int64

// endStaleFenced is called after a claim batch with its results. A scope whose
// claim has found its row held by fenced transactions for the trust window W
// (Config.TrustWindow) has them ended: the previous term's gate closed at least W
// after its last heartbeat, so a fenced transaction still open W after the
// successor first found the scope free belongs to a holder that is frozen, gone
// or hostile (a role with EXECUTE on fence that sleeps in its transaction). The
// database refuses unless no session leads the scope, audits each one (pid and
// login) before it terminates its backend, and the transaction's writes never
// commit. Runs on the serving goroutine (one statement on the leadership session
// per scope, at most once per W).
func (s *session) endStaleFenced(got []claimResult) {
	if s.fenced == nil {
		s.fenced = fencedWaits{}
	}
	now := monotime.Now()
	bound := int64(s.e.cfg.TrustWindow)
	var due []string
	for _, r := range got {
		if !r.busy {
			delete(s.fenced, r.scope)
			continue
		}
		since, ok := s.fenced[r.scope]
		switch {
		case !ok:
			s.fenced[r.scope] = now
		case now-since >= bound:
			due = append(due, r.scope)
			s.fenced[r.scope] = now // again after another W, if they are still there
		}
	}
	for _, scope := range due {
		s.endFenced(scope)
	}
}

// endFenced runs pgleader.end_fenced for scope and logs what it found.
func (s *session) endFenced(scope string) {
	e := s.e
	ctx, cancel := s.stmtCtx(e.cfg.HeartbeatTimeout)
	defer cancel()
	var ended, refused []string
	var err error
	lerr := s.leadDo(func() {
		var rows pgx.Rows
		rows, err = s.lead.Query(ctx, sqlEndFenced, e.cfg.NodeID, scope)
		if err == nil {
			var (
				pid       int32
				role, app string
				ok        bool
			)
			_, err = pgx.ForEachRow(rows, []any{&pid, &role, &app, &ok}, func() error {
				d := fmt.Sprintf("pid %d (role %s, application %q)", pid, role, app)
				if ok {
					ended = append(ended, d)
				} else {
					refused = append(refused, d)
				}
				return nil
			})
		}
	})
	if lerr != nil { // the session was lost, nothing was sent
		return
	}
	switch {
	case err != nil:
		e.log.Info("cannot end the previous term's fenced transactions", "scope", scope, "node", e.cfg.NodeID, "err", err)
	case len(refused) > 0:
		e.log.Warn("fenced transactions of an ended term hold up the claim, and the database may not end them: terminate them, or GRANT pg_signal_backend TO the owner role (docs/security.md)",
			"scope", scope, "node", e.cfg.NodeID, "blockers", strings.Join(refused, "; "), "ended", strings.Join(ended, "; "))
	case len(ended) > 0:
		e.log.Warn("ended the fenced transactions of an ended term that held up the claim for the trust window",
			"scope", scope, "node", e.cfg.NodeID, "trust_window", e.cfg.TrustWindow, "ended", strings.Join(ended, "; "))
	}
}
