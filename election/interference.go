package election

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// blockerCheckEvery bounds how often a session asks the database who blocks its
// scopes (only while a claim finds a scope's lock taken and no live holder).
const blockerCheckEvery = 5 * time.Second

// blockerRepeat is how often the same blockers are reported again while they stay.
const blockerRepeat = time.Minute

// sqlBlockers names the sessions on the given scopes' locks that are not
// candidates (pgleader.interference, schema version 7).
const sqlBlockers = `SELECT scope, pid, mode, granted, coalesce(role, ''), coalesce(application_name, ''),
       coalesce(client_addr, '') FROM pgleader.interference($1)`

// blockers is what a session last reported about the sessions blocking its scopes.
type blockers struct {
	checkedAt  time.Time
	reportedAt time.Time
	reported   string // the last report, to repeat it only when it changes
}

// nameBlockers is called after a claim batch with the scopes whose lock was taken
// while no live holder was on record: a squatter (another application, a script,
// an attacker holding the key) or a claim in flight elsewhere. It asks the
// database who holds or waits on those locks without being a candidate and logs a
// warning naming them, so that a blocked scope is never silent. Rate-limited;
// runs on the serving goroutine (one short statement on the leadership session).
func (s *session) nameBlockers(scopes []string) {
	now := time.Now()
	b := &s.blockers
	if len(scopes) == 0 || now.Sub(b.checkedAt) < blockerCheckEvery {
		return
	}
	b.checkedAt = now
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	var found []string
	var err error
	lerr := s.leadDo(func() {
		var rows pgx.Rows
		rows, err = s.lead.Query(ctx, sqlBlockers, scopes)
		if err == nil {
			var (
				scope, mode, role, app, client string
				pid                            int32
				granted                        bool
			)
			_, err = pgx.ForEachRow(rows, []any{&scope, &pid, &mode, &granted, &role, &app, &client}, func() error {
				what := "holds"
				if !granted {
					what = "waits for"
				}
				if client == "" {
					client = "local or hidden"
				}
				found = append(found, fmt.Sprintf("%s: pid %d (role %s, application %q, client %s) %s its lock (%s)",
					scope, pid, role, app, client, what, mode))
				return nil
			})
		}
	})
	if lerr != nil { // the session was lost, nothing was sent
		return
	}
	if err != nil {
		s.e.log.Debug("cannot name the sessions blocking a claim", "node", s.e.cfg.NodeID, "err", err)
		return
	}
	slices.Sort(found)
	report := strings.Join(found, "; ")
	if report == "" || (report == b.reported && now.Sub(b.reportedAt) < blockerRepeat) {
		if report == "" && b.reported != "" {
			s.e.log.Info("scope locks free of foreign sessions again", "node", s.e.cfg.NodeID)
			b.reported = ""
		}
		return
	}
	b.reported, b.reportedAt = report, now
	s.e.log.Warn("a session that is not a pgleader candidate blocks leadership: terminate it, or revoke the advisory-lock functions from PUBLIC (docs/security.md)",
		"node", s.e.cfg.NodeID, "blockers", report)
}
