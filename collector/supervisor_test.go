package collector

import (
	"testing"

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
