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

// TestLeaseFencedOffTermNotRenewed: a lease-mode term that end_fenced fenced
// off (leader_state.fenced_off_epoch) is not renewed by its holder's heartbeat:
// the holder, frozen while its lease ran out and back since, loses the term
// instead of leading on with an epoch fence refuses (docs/model.md §8.4). Its
// renewals succeed until then.
func TestLeaseFencedOffTermNotRenewed(t *testing.T) {
	cfg := setup(t)
	ctx := context.Background()
	c := pgtest.ConnectConfig(t, cfg)
	if _, err := c.Exec(ctx, `SELECT pgleader.lease_register('n0', 'h', 1, 'test', '{s}', 10, 30, 130, 1000, 1, 0)`); err != nil {
		t.Fatal(err)
	}
	var won bool
	if err := c.QueryRow(ctx, `SELECT acquired FROM pgleader.lease_claim_batch('n0', 1000, 'h', 10, 10, 30, 130, '{s}', '{0}')`).Scan(&won); err != nil || !won {
		t.Fatalf("claim: %v, %v", won, err)
	}
	var epoch, seq int64
	if err := c.QueryRow(ctx, `SELECT epoch, lease_seq FROM pgleader.leader_state WHERE scope = 's'`).Scan(&epoch, &seq); err != nil {
		t.Fatal(err)
	}
	renew := func() (ok bool, after int64) {
		t.Helper()
		if err := c.QueryRow(ctx, `SELECT ok FROM pgleader.lease_heartbeat('n0', 1000, '{s}', $1, '{}') WHERE kind = 'led'`,
			[]int64{epoch}).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, `SELECT lease_seq FROM pgleader.leader_state WHERE scope = 's'`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		return ok, after
	}
	if ok, after := renew(); !ok || after != seq+1 {
		t.Fatalf("renewal of a live term: ok %v, lease_seq %d after %d", ok, after, seq)
	}
	// What end_fenced records when it ends the dead term's fenced writers.
	if _, err := c.Exec(ctx, `UPDATE pgleader.leader_state SET fenced_off_epoch = epoch WHERE scope = 's'`); err != nil {
		t.Fatal(err)
	}
	if ok, after := renew(); ok || after != seq+1 {
		t.Fatalf("renewal of a fenced-off term: ok %v, lease_seq %d (was %d); want refused, unchanged", ok, after, seq+1)
	}
}
