package collector

import (
	"context"
	"strings"
	"testing"

	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestNodeSupervisor: what a pgleader run node records of its command
// (pgleader.node_supervisor) reaches the snapshot; a plain node has none.
func TestNodeSupervisor(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	admin := pgtest.Connect(t, dsn)
	testnode.Start(t, testnode.FastConfig(dsn, "node-run", "s"))
	testnode.Start(t, testnode.FastConfig(dsn, "node-plain", "s"))
	c := newCollector(t, testConfig(t, dsn))
	run(t, c)
	waitSnap(t, c, "both nodes", func(s *Snapshot) bool { return len(s.Nodes) == 2 })
	exec(t, admin, `SELECT pgleader.node_supervisor('node-run', '{"command":"worker","state":"running","pid":77,"epoch":3,"restarts":2}')`)
	waitSnap(t, c, "node-run's command", func(s *Snapshot) bool {
		for _, n := range s.Nodes {
			switch n.ID {
			case "node-run":
				if sv := n.Supervisor; sv == nil || sv.Command != "worker" || sv.PID != 77 || sv.Restarts != 2 || sv.State != "running" {
					return false
				}
			case "node-plain":
				if n.Supervisor != nil {
					t.Fatalf("a plain node has a supervisor: %+v", n.Supervisor)
				}
			}
		}
		return true
	})
}

// TestNodeDoorbell: a node whose doorbell cannot ring (a superuser login: the
// owner role may not signal it) says why in the snapshot; a node that logs in
// as a member of the node role has a doorbell that rings, and says nothing.
func TestNodeDoorbell(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	roleDSN, why := cluster.NodeLogin(context.Background(), dsn)
	if why != "" {
		t.Fatal(why)
	}
	testnode.Start(t, testnode.FastConfig(dsn, "node-super", "s"))
	testnode.Start(t, testnode.FastConfig(roleDSN, "node-role", "s"))
	c := newCollector(t, testConfig(t, dsn))
	run(t, c)
	waitSnap(t, c, "node-super's doorbell unringable, node-role's not", func(s *Snapshot) bool {
		got := map[string]string{}
		for _, n := range s.Nodes {
			got[n.ID] = n.DoorbellUnringable
		}
		if _, ok := got["node-role"]; !ok || got["node-role"] != "" {
			return false
		}
		return strings.Contains(got["node-super"], "superuser")
	})
}
