package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// TestLeaseClaimIsOneCompareAndSwap: nodes that all saw the same free or expired
// lease claim it at the same moment, over and over; each time exactly one wins.
// (A claim that tested the row in one statement and locked it in another let a
// second node lock the row just after the first committed, and both led.)
func TestLeaseClaimIsOneCompareAndSwap(t *testing.T) {
	pgtest.Slow(t)
	cfg := setup(t)
	ctx := context.Background()
	const nodes, rounds = 6, 40
	conns := make([]*pgx.Conn, nodes)
	for i := range conns {
		conns[i] = pgtest.ConnectConfig(t, cfg)
		if _, err := conns[i].Exec(ctx, `SELECT pgleader.lease_register($1, 'h', 1, 'test', '{s}', 10, 30, 130, $2, 1, 0)`,
			fmt.Sprintf("n%d", i), int64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	claimAll := func(seq int64) []int {
		var wg sync.WaitGroup
		start := make(chan struct{})
		won := make([]bool, nodes)
		errs := make([]error, nodes)
		for i, c := range conns {
			wg.Go(func() {
				<-start
				errs[i] = c.QueryRow(ctx, `SELECT acquired FROM pgleader.lease_claim_batch($1, $2, 'h', 10, 10, 30, 130, '{s}', $3)`,
					fmt.Sprintf("n%d", i), int64(1000+i), []int64{seq}).Scan(&won[i])
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for i := range won {
			if errs[i] != nil {
				t.Fatalf("claim by n%d: %v", i, errs[i])
			}
			if won[i] {
				winners = append(winners, i)
			}
		}
		return winners
	}
	state := func() (seq, epoch int64, holder *string, released bool) {
		err := conns[0].QueryRow(ctx, `SELECT lease_seq, epoch, holder, released_at IS NOT NULL
		                                 FROM pgleader.leader_state WHERE scope = 's'`).Scan(&seq, &epoch, &holder, &released)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: never claimed
			t.Fatal(err)
		}
		return
	}
	for round := range rounds {
		seq, epoch, holder, released := state()
		// Even rounds: the scope is free (never claimed, or released). Odd rounds:
		// its holder stopped renewing and its 130 ms lease ran out, at seq.
		if round%2 == 1 {
			if holder == nil || released {
				t.Fatalf("round %d: no holder to expire", round)
			}
			time.Sleep(140 * time.Millisecond)
		}
		winners := claimAll(seq)
		if len(winners) != 1 {
			t.Fatalf("round %d: %d nodes won the lease (%v); want exactly one", round, len(winners), winners)
		}
		_, next, _, _ := state()
		if next != epoch+1 {
			t.Fatalf("round %d: epoch %d after %d", round, next, epoch)
		}
		if round%2 == 0 { // the winner keeps it; next round it expires
			continue
		}
		w := winners[0]
		if _, err := conns[w].Exec(ctx, `SELECT pgleader.lease_release_batch($1, $2, '{s}', $3, '{resigned}')`,
			fmt.Sprintf("n%d", w), int64(1000+w), []int64{next}); err != nil {
			t.Fatal(err)
		}
	}
	var terms int
	if err := conns[0].QueryRow(ctx, `SELECT count(DISTINCT epoch) FROM pgleader.terms WHERE scope = 's'`).Scan(&terms); err != nil {
		t.Fatal(err)
	}
	if terms != rounds {
		t.Fatalf("%d terms recorded, want %d (one per round)", terms, rounds)
	}
}

// TestMigrateRefusesPooler: through PgBouncer (which refuses the settings that
// carry the role names), Up fails at once with ErrPooler, naming the fix, and
// leaves the database untouched.
func TestMigrateRefusesPooler(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(pgtest.NewBouncer(t, dsn, "transaction"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Up(context.Background(), cfg, nil)
	if !errors.Is(err, migrate.ErrPooler) || !strings.Contains(err.Error(), "PostgreSQL itself") {
		t.Fatalf("Up through a transaction pooler = %v, want ErrPooler naming the fix", err)
	}
	direct, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := pgtest.ConnectConfig(t, direct).QueryRow(context.Background(), "SELECT to_regnamespace('pgleader') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("schema created through a refused migration (%v, %v)", exists, err)
	}
}
