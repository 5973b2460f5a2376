package collector

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestNodeLoginRole: the collector reads the role each node registered under
// (watch_nodes_v1.login_role); against a view without the column (a database
// migrated by a build before it), it reads the nodes without it, and a
// collector whose connection found the column reconnects and does the same.
func TestNodeLoginRole(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	admin := pgtest.Connect(t, dsn)
	// Roles are the server's, not the test database's: one per test.
	role := "svc_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	exec(t, admin, "CREATE ROLE "+role+" LOGIN IN ROLE pgleader_node")
	t.Cleanup(func() { // after the nodes stopped (cleanups run last first)
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = admin.Exec(ctx, "DROP ROLE "+role)
	})
	var me string
	if err := admin.QueryRow(ctx, "SELECT session_user").Scan(&me); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	testnode.Start(t, testnode.FastConfig(u.String(), "node-svc", "s"))
	testnode.Start(t, testnode.FastConfig(dsn, "node-admin", "s"))

	c := newCollector(t, testConfig(t, dsn))
	run(t, c)
	roles := func(s *Snapshot) map[string]string {
		out := map[string]string{}
		for _, n := range s.Nodes {
			out[n.ID] = n.LoginRole
		}
		return out
	}
	waitSnap(t, c, "both nodes with the roles they registered under", func(s *Snapshot) bool {
		r := roles(s)
		return r["node-svc"] == role && r["node-admin"] == me
	})

	// The view as a build before login_role made it: no such column.
	exec(t, admin, "ALTER VIEW pgleader.watch_nodes_v1 RENAME COLUMN login_role TO login_role_renamed")
	for _, col := range []*Collector{c, newCollector(t, testConfig(t, dsn))} {
		if col != c {
			run(t, col)
		}
		waitSnap(t, col, "the nodes read without a login role", func(s *Snapshot) bool {
			r := roles(s)
			_, a := r["node-svc"]
			_, b := r["node-admin"]
			return a && b && r["node-svc"] == "" && r["node-admin"] == "" && s.Health.Source != SourceDisconnected
		})
	}
}
