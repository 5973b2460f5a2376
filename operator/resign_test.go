package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestResign(t *testing.T) {
	pgtest.Slow(t)
	// Two electors on s: Resign marks the leader's term, its engine hands over at
	// its next heartbeat, and the follower leads under the next epoch.
	t.Run("HandsOver", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		c := newCollector(t, cfg)
		op := newOperator(t, cfg, c)
		rec := record(t, c)
		run(t, c)
		n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
		pgtest.WaitFor(t, "n1 leading s", wait, func() bool { return n1.Leads("s") })
		n2 := testnode.Start(t, testnode.FastConfig(dsn, "n2", "s"))
		s := waitSnap(t, c, "n1 leading s with n2 waiting", func(s *Snapshot) bool {
			sc, ok := s.Scope("s")
			return ok && sc.Leader == "n1" && sc.HasLeader() && slices.Contains(sc.Followers, "n2")
		})
		epoch := scope(t, s, "s").Epoch

		if err := op.Resign(context.Background(), "s", "test handover"); err != nil {
			t.Fatal(err)
		}
		waitSnap(t, c, "n2 leading s", func(s *Snapshot) bool {
			sc, ok := s.Scope("s")
			return ok && sc.Leader == "n2" && sc.HasLeader()
		})
		// The collector can see the claim commit before n2 has its answer and opens
		// its gate (on the logical source, by a fraction of a millisecond).
		pgtest.WaitFor(t, "n2's gate open", wait, func() bool { return n2.Leads("s") })
		if n1.Leads("s") {
			t.Fatalf("after the handover n1 still leads s")
		}
		admin := pgtest.Connect(t, dsn)
		if got := queryInt(t, admin, "SELECT epoch FROM pgleader.leader_state WHERE scope = 's'"); got != epoch+1 {
			t.Fatalf("s at epoch %d, want %d", got, epoch+1)
		}
		var reason string
		if err := admin.QueryRow(context.Background(),
			"SELECT coalesce(release_reason, '') FROM pgleader.terms WHERE scope = 's' AND epoch = $1", epoch).Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if reason != "resigned" {
			t.Fatalf("term %d of s ended %q, want resigned", epoch, reason)
		}
		if n := queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested' AND scope = 's'
		                            AND node_id = 'n1' AND epoch = $1 AND detail->>'via' = 'collector: test handover'
		                            AND detail->>'by' = session_user AND session_role = session_user`, epoch); n != 1 {
			t.Fatalf("%d resign_requested audit rows, want 1", n)
		}

		ev := rec.waitEvent(t, "resign_requested", func(e Event) bool { return e.Kind == EventResignRequested })
		if ev.Scope != "s" || ev.Node != "n1" || ev.Epoch != epoch || ev.AuditID == 0 ||
			ev.Detail != "requested by postgres via collector: test handover" {
			t.Fatalf("resign_requested event %+v", ev)
		}
		rel := rec.waitEvent(t, "released", func(e Event) bool { return e.Kind == EventReleased && e.Epoch == epoch })
		if rel.Scope != "s" || rel.Node != "n1" || rel.Reason != "resigned" || rel.AuditID < ev.AuditID {
			t.Fatalf("released event %+v after %+v", rel, ev)
		}
		el := rec.waitEvent(t, "elected n2", func(e Event) bool { return e.Kind == EventElected && e.Epoch == epoch+1 })
		if el.Scope != "s" || el.Node != "n2" {
			t.Fatalf("elected event %+v", el)
		}
		// The mark named n1's term: n2's is not affected by it.
		time.Sleep(5 * testnode.FastConfig(dsn, "n2").HeartbeatInterval)
		if !n2.Leads("s") {
			t.Fatal("n2 lost s: the request outlived the term it named")
		}
	})

	t.Run("Refused", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		cfg := testConfig(t, dsn)
		c := newCollector(t, cfg)
		op := newOperator(t, cfg, c)
		ctx := context.Background()
		admin := pgtest.Connect(t, dsn)
		requests := func() int64 {
			return queryInt(t, admin, "SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested'")
		}
		if err := op.Resign(ctx, "nope", "test"); !errors.Is(err, ErrUnknownScope) {
			t.Fatalf("unknown scope: %v", err)
		}
		holder := pgtest.Connect(t, dsn)
		forgeHolder(t, holder, "m", "someone")
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		// The caller saw epoch 1; epoch 2 began since: nothing is marked.
		exec(t, holder, "SELECT pgleader.release_batch('someone', '{m}', '{1}', '{resigned}')")
		forgeHolder(t, holder, "m", "someone")
		err := op.Resign(ctx, "m", "test")
		if !errors.Is(err, ErrHolderChanged) || !strings.Contains(err.Error(), "epoch 2, not epoch 1") {
			t.Fatalf("changed term: %v", err)
		}
		if n := requests(); n != 0 {
			t.Fatalf("a refused request wrote %d audit rows", n)
		}
		// The term the caller saw ended and none began.
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		exec(t, holder, "SELECT pgleader.release_batch('someone', '{m}', '{2}', '{resigned}')")
		if err := op.Resign(ctx, "m", "test"); !errors.Is(err, ErrHolderChanged) || !strings.Contains(err.Error(), "no term is open") {
			t.Fatalf("ended term: %v", err)
		}
		// No leader in the latest snapshot.
		if _, err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if err := op.Resign(ctx, "m", "test"); !errors.Is(err, ErrNoHolder) {
			t.Fatalf("no leader: %v", err)
		}
		// No snapshot at all: the database says there is no open term.
		fresh := newOperator(t, cfg, newCollector(t, cfg))
		if err := fresh.Resign(ctx, "m", "test"); !errors.Is(err, ErrNoHolder) {
			t.Fatalf("no leader, no snapshot: %v", err)
		}
		if n := requests(); n != 0 {
			t.Fatalf("refused requests wrote %d audit rows", n)
		}
		// Without a snapshot, whichever term is open is marked.
		forgeHolder(t, holder, "m", "someone")
		if err := fresh.Resign(ctx, "m", "no snapshot"); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, admin, `SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested' AND scope = 'm'
		                            AND epoch = 3 AND detail->>'via' = 'collector: no snapshot'`); n != 1 {
			t.Fatalf("%d audit rows for the request", n)
		}
	})

	// Resign needs the operator role, not the right to signal backends that Evict
	// needs.
	t.Run("NoSignalPrivilege", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		admin := pgtest.Connect(t, dsn)
		role := fmt.Sprintf("collector_resign_%d", time.Now().UnixNano()%1e9)
		exec(t, admin, fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE pgleader_operator`, role))
		t.Cleanup(func() {
			exec(t, admin, fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %[1]s", role))
		})
		holder := pgtest.Connect(t, dsn)
		forgeHolder(t, holder, "m", "someone")
		cfg := testConfig(t, dsn)
		cfg.ConnConfig.User = role
		op := newOperator(t, cfg, newCollector(t, cfg))
		if err := op.Evict(context.Background(), "m", "test"); !errors.Is(err, ErrEvictForbidden) {
			t.Fatalf("Evict as %s: %v, want ErrEvictForbidden", role, err)
		}
		if err := op.Resign(context.Background(), "m", "test"); err != nil {
			t.Fatalf("Resign as %s: %v", role, err)
		}
		if n := queryInt(t, admin, "SELECT count(*) FROM pgleader.audit WHERE kind = 'resign_requested' AND scope = 'm' AND detail->>'by' = $1 AND session_role = $1", role); n != 1 {
			t.Fatalf("%d resign_requested audit rows attributed to %s, want 1", n, role)
		}
	})
}
