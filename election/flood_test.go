package election_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// floodRole creates a login role with nothing but CONNECT (which PUBLIC has on
// the test database) and returns a DSN that logs in as it; the role is dropped
// when the test ends.
func floodRole(t *testing.T, dsn string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "t" + hex.EncodeToString(b) + "_flood"
	exec(t, dsn, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_, _ = c.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// flood runs stmt, which sends per notifications on leader_change, from its own
// connection, one statement after the other, until ctx ends or limit
// notifications were sent; it returns how many it sent.
func flood(ctx context.Context, dsn, stmt string, per, limit int) (int, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	n := 0
	for n < limit {
		if _, err := c.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			if ctx.Err() != nil {
				return n, nil
			}
			return n, err
		}
		n += per
	}
	return n, nil
}

// floodPhase is what one phase of TestNotifyFloodLeavesLeadershipAlone measured.
type floodPhase struct {
	sent                 int64
	failed, closed, lost int
	slowest              time.Duration
}

func (p floodPhase) String() string {
	return fmt.Sprintf("%d notifications sent; heartbeats failed %d, gates closed %d, terms lost %d; slowest heartbeat %v",
		p.sent, p.failed, p.closed, p.lost, p.slowest)
}

// A NOTIFY flood on leader_change from a role with nothing but CONNECT — large
// payloads from two connections, small and forged ones (released, node_lost,
// node_joined, resign_requested of the scopes in play) from a third, as fast as
// the server takes them — must not disturb leadership under the chaos harness's
// timing: no heartbeat fails, no gate closes, no term is lost, every epoch stays.
// A control phase first sends the same statements on a channel nobody listens on,
// for comparison. No session of a node LISTENs, so neither phase delivers a
// notification to a node: what is left is the load on the server.
func TestNotifyFloodLeavesLeadershipAlone(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	attacker := floodRole(t, dsn)
	scopes := []string{"flood-a", "flood-b", "flood-c"}
	rec := &recorder{}
	var nodes []*testnode.Node
	for _, id := range []string{"flood-1", "flood-2", "flood-3"} {
		cfg := testnode.FastConfig(dsn, id, scopes...)
		// The chaos harness's timing (lab/chaos defaultNodeArgs).
		cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 100*time.Millisecond, 150*time.Millisecond
		cfg.TrustWindow, cfg.SessionLease = 500*time.Millisecond, 700*time.Millisecond
		nodes = append(nodes, testnode.Start(t, cfg, rec.Observe))
	}
	epochs := map[string]int64{}
	holders := map[string]string{}
	pgtest.WaitFor(t, "a leader for every scope", 10*time.Second, func() bool {
		for _, s := range scopes {
			l := leaders(nodes, s)
			if len(l) != 1 {
				return false
			}
			tok, err := l[0].Scope(s).Require(context.Background())
			if err != nil {
				return false
			}
			epochs[s], holders[s] = tok.Epoch, tok.Holder
		}
		return true
	})

	// Payloads differ within a statement: PostgreSQL folds identical ones of a
	// transaction into one.
	var forged []string
	for _, s := range scopes {
		for _, ev := range []string{"released", "resign_requested", "node_lost", "node_joined"} {
			forged = append(forged, fmt.Sprintf("('%s', '%s', '%s')", ev, s, holders[s]))
		}
	}
	phase := func(channel string, d time.Duration) floodPhase {
		big := "SELECT pg_notify('" + channel + "', g::text || repeat('x', 7000)) FROM generate_series(1, 100) g"
		small := "SELECT pg_notify('" + channel + "', json_build_object('event', e, 'scope', s, 'holder', h, 'by', 'forged', 'n', g)::text) " +
			"FROM generate_series(1, 50) g, (VALUES " + strings.Join(forged, ", ") + ") v(e, s, h)"
		type flooder struct {
			stmt       string
			per, limit int
		}
		flooders := []flooder{{big, 100, 60_000}, {big, 100, 60_000}, {small, 50 * len(forged), 1_000_000}}
		before := len(rec.snapshot())
		ctx, stop := context.WithTimeout(context.Background(), d)
		defer stop()
		var p floodPhase
		var sent atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, len(flooders))
		for i, f := range flooders {
			wg.Go(func() {
				n, err := flood(ctx, attacker, f.stmt, f.per, f.limit)
				sent.Add(int64(n))
				if err != nil {
					errs <- fmt.Errorf("flooder %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// One more trust window for a heartbeat that the flood's tail delayed.
		time.Sleep(600 * time.Millisecond)
		p.sent = sent.Load()
		for _, e := range rec.snapshot()[before:] {
			switch e.Kind {
			case election.EventHeartbeatFailed:
				p.failed++
				t.Logf("%s: heartbeat failed: %v", e.Node, e.Err)
			case election.EventGateClosed:
				p.closed++
			case election.EventLost:
				p.lost++
			case election.EventHeartbeatOK:
				p.slowest = max(p.slowest, e.Latency)
			}
		}
		return p
	}
	control := phase("pgleader_flood_control", 3*time.Second)
	t.Logf("control (channel nobody listens on): %v", control)
	flooded := phase("leader_change", 8*time.Second)
	t.Logf("flood on leader_change: %v", flooded)
	for name, p := range map[string]floodPhase{"control": control, "flood": flooded} {
		if p.failed+p.closed+p.lost > 0 {
			t.Errorf("%s disturbed leadership: %d heartbeats failed, %d gates closed, %d terms lost", name, p.failed, p.closed, p.lost)
		}
	}
	if flooded.sent < 10_000 {
		t.Errorf("%d notifications sent: the test did not flood", flooded.sent)
	}
	for _, s := range scopes {
		l := leaders(nodes, s)
		if len(l) != 1 {
			t.Errorf("%s: %d leaders after the flood", s, len(l))
			continue
		}
		tok, err := l[0].Scope(s).Require(context.Background())
		if err != nil || tok.Epoch != epochs[s] || tok.Holder != holders[s] {
			t.Errorf("%s: led by %s at epoch %d before the flood, now %+v (%v)", s, holders[s], epochs[s], tok, err)
		}
	}
}
