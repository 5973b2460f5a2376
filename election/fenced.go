package election

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
)

// sqlEndFenced ends the fenced transactions of an ended term that hold a scope's
// row (pgleader.end_fenced, schema version 16: node, lease token or NULL, scope).
// One call of a schema-qualified function: safe through a transaction pooler as
// well.
const sqlEndFenced = `SELECT pid, coalesce(login_role, ''), coalesce(application, ''), state
  FROM pgleader.end_fenced($1, $2, $3)`

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

// endFenced runs pgleader.end_fenced for scope and logs what it found. The
// database ends a fenced transaction only once an audit row naming it has
// committed (state "found", then "ended" at the next call), so that a
// termination is never audited in a transaction that could still roll back:
// a call that found some calls again at once.
func (s *session) endFenced(scope string) {
	e := s.e
	var token any // lock mode: NULL, the caller is proved by its backend
	if s.leaseToken != 0 {
		token = s.leaseToken
	}
	var ended, refused, prepared []string
	for range 2 {
		found, err := s.endFencedOnce(scope, token, &ended, &refused, &prepared)
		if err != nil {
			if !errors.Is(err, errSessionLost) {
				e.log.Info("cannot end the previous term's fenced transactions", "scope", scope, "node", e.cfg.NodeID, "err", err)
			}
			return
		}
		if found == 0 {
			break
		}
	}
	switch {
	case len(prepared) > 0:
		e.log.Warn("prepared transactions of an ended term hold up the claim: only their owner or a superuser can finish them (COMMIT PREPARED / ROLLBACK PREPARED)",
			"scope", scope, "node", e.cfg.NodeID, "prepared", strings.Join(prepared, "; "))
	case len(refused) > 0:
		e.log.Warn("fenced transactions of an ended term hold up the claim, and the database may not end them: terminate them, or GRANT pg_signal_backend TO the owner role (docs/security.md)",
			"scope", scope, "node", e.cfg.NodeID, "blockers", strings.Join(refused, "; "), "ended", strings.Join(ended, "; "))
	case len(ended) > 0:
		e.log.Warn("ended the fenced transactions of an ended term that held up the claim for the trust window",
			"scope", scope, "node", e.cfg.NodeID, "trust_window", e.cfg.TrustWindow, "ended", strings.Join(ended, "; "))
	}
}

// endFencedOnce is one call of end_fenced; it returns how many blockers were
// found for the first time (to be ended at the next call).
func (s *session) endFencedOnce(scope string, token any, ended, refused, prepared *[]string) (found int, err error) {
	e := s.e
	ctx, cancel := s.stmtCtx(e.cfg.HeartbeatTimeout)
	defer cancel()
	lerr := s.leadDo(func() {
		var rows pgx.Rows
		rows, err = s.lead.Query(ctx, sqlEndFenced, e.cfg.NodeID, token, scope)
		if err != nil {
			return
		}
		var (
			pid              *int32
			role, app, state string
		)
		_, err = pgx.ForEachRow(rows, []any{&pid, &role, &app, &state}, func() error {
			d := fmt.Sprintf("pid %v (role %s, application %q)", deref(pid), role, app)
			switch state {
			case "found":
				found++
			case "ended":
				*ended = append(*ended, d)
			case "prepared":
				*prepared = append(*prepared, fmt.Sprintf("a prepared transaction of role %s", role))
			default:
				*refused = append(*refused, d)
			}
			return nil
		})
	})
	if lerr != nil {
		return 0, lerr
	}
	return found, err
}
