package electionprom

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestLive runs a real Elector against PostgreSQL: lead, resign,
// lead again, shut down.
func TestLive(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	reg := prometheus.NewPedanticRegistry()
	e, err := election.New(testnode.FastConfig(dsn, "node-1", "billing"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Register(reg, e); err != nil {
		t.Fatal(err)
	}
	billing := e.Scope("billing")
	ctx := context.Background()

	// Register created the scope's series; a refusal before Run is counted.
	expect(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	expect(t, reg, 0, "pgleader_acquisitions_total", "scope", "billing")
	if _, err := billing.Require(ctx); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Require before Run: %v", err)
	}
	expect(t, reg, 1, "pgleader_gate_blocked_total", "scope", "billing")
	expect(t, reg, 0, "pgleader_trust_remaining_seconds", "scope", "billing")

	n := testnode.Run(t, e)

	isLeader := func() bool { v, _ := sample(t, reg, "pgleader_is_leader", "scope", "billing"); return v == 1 }
	pgtest.WaitFor(t, "the gate to open", 15*time.Second, isLeader)
	tok, err := billing.Require(ctx)
	if err != nil {
		t.Fatalf("is_leader is 1 but Require: %v", err)
	}
	expect(t, reg, 1, "pgleader_acquisitions_total", "scope", "billing")
	expect(t, reg, float64(tok.Epoch), "pgleader_epoch", "scope", "billing")
	expect(t, reg, float64(billing.GateBlocked()), "pgleader_gate_blocked_total", "scope", "billing")
	if v, _ := sample(t, reg, "pgleader_trust_remaining_seconds", "scope", "billing"); v <= 0 || v > 0.3 {
		t.Errorf("trust remaining %vs while leading, want in (0, 0.3]", v)
	}
	pgtest.WaitFor(t, "a heartbeat", 15*time.Second, func() bool {
		v, _ := sample(t, reg, "pgleader_heartbeat_duration_seconds")
		return v >= 1
	})
	if v, _ := sample(t, reg, "pgleader_last_heartbeat_timestamp_seconds"); time.Since(time.Unix(int64(v), 0)) > 10*time.Second {
		t.Errorf("last heartbeat timestamp %v, want recent", v)
	}

	// Resign returns after the release is recorded: the gate closed and the loss
	// counted by then.
	if err := billing.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	expect(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	expect(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "resigned")
	expect(t, reg, 0, "pgleader_trust_remaining_seconds", "scope", "billing")

	// Alone in the election, the node leads again after its cooldown, one epoch on.
	pgtest.WaitFor(t, "the second term", 15*time.Second, isLeader)
	expect(t, reg, 2, "pgleader_acquisitions_total", "scope", "billing")
	expect(t, reg, float64(tok.Epoch+1), "pgleader_epoch", "scope", "billing")

	n.Stop()
	expect(t, reg, 0, "pgleader_is_leader", "scope", "billing")
	expect(t, reg, 1, "pgleader_losses_total", "scope", "billing", "reason", "shutdown")
	expect(t, reg, 0, "pgleader_heartbeat_failures_total", "scope", "billing")
}
