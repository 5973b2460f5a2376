package collector

import (
	"fmt"
	"testing"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// TestTermsWindow: however few RecentTerms, a snapshot carries every term
// that ended within TermsWindow, so a timeline of that window loses no
// scope's earlier term when many scopes change leaders at once; a term that
// ended before the window is not carried beyond RecentTerms.
func TestTermsWindow(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	scopes := []string{"w1", "w2", "w3", "w4", "w5"}
	// node-a leads every scope, then its sessions end and node-b takes them:
	// five closed terms and five open ones.
	a := pgtest.Connect(t, dsn)
	for _, s := range scopes {
		forgeHolder(t, a, s, "node-a")
	}
	admin := pgtest.Connect(t, dsn)
	pid := queryInt(t, a, "SELECT pg_backend_pid()")
	closeConn(a)
	pgtest.WaitFor(t, "node-a's session to end", wait, func() bool {
		return queryInt(t, admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid) == 0
	})
	b := pgtest.Connect(t, dsn)
	for _, s := range scopes {
		forgeHolder(t, b, s, "node-b")
	}
	// w5's first term ended long before the window.
	exec(t, admin, `UPDATE pgleader.terms SET acquired_at = now() - interval '3 hours', released_at = now() - interval '2 hours'
	                 WHERE scope = 'w5' AND holder = 'node-a'`)

	cfg := testConfig(t, dsn)
	cfg.RecentTerms = 2
	c := newCollector(t, cfg)
	run(t, c)
	s := settle(t, c, 2)

	got := map[string]bool{}
	for _, tm := range s.Terms {
		got[fmt.Sprintf("%s/%s/%v", tm.Scope, tm.Holder, tm.Open())] = true
	}
	for _, sc := range scopes[:4] {
		if !got[sc+"/node-a/false"] {
			t.Errorf("the closed term of %s is not in the snapshot's terms: %v", sc, got)
		}
	}
	if got["w5/node-a/false"] {
		t.Errorf("w5's term that ended 2 hours ago is in the snapshot's terms: %v", got)
	}
	// The 2 recent ones and the 4 of the window, each once, newest first.
	if len(s.Terms) != 2+4 {
		t.Errorf("%d terms, want 6: %v", len(s.Terms), got)
	}
	for i := 1; i < len(s.Terms); i++ {
		if s.Terms[i].ID >= s.Terms[i-1].ID {
			t.Errorf("terms not newest first: %d after %d", s.Terms[i].ID, s.Terms[i-1].ID)
		}
	}
}
