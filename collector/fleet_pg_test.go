package collector

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/faultnet"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// dsnFor is dsn with its host and port replaced by addr and its database by
// db.
func dsnFor(t *testing.T, dsn, addr, db string) string {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	}
	u := url.URL{Scheme: "postgres", User: url.User(cc.User), Host: addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	if cc.Password != "" {
		u.User = url.UserPassword(cc.User, cc.Password)
	}
	return u.String()
}

// secondDatabase creates and migrates another database on dsn's server,
// dropped when the test ends, and returns its DSN.
func secondDatabase(t *testing.T, dsn, suffix string) string {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cc.Database + "_" + suffix
	admin := pgtest.Connect(t, dsn)
	ident := pgx.Identifier{name}.Sanitize()
	exec(t, admin, "CREATE DATABASE "+ident+" TEMPLATE template0")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	other := dsnFor(t, dsn, "", name)
	pgtest.Migrate(t, other)
	return other
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestFleetPostgres runs a fleet over real databases on one server: billing
// and orders, each with a node-1 leading a scope named jobs, and down, a
// database nothing listens for. orders goes through a proxy that then hangs:
// orders becomes unreachable with its last-known scope (not NO LEADER),
// while billing's changes keep arriving; healed, orders reads again.
func TestFleetPostgres(t *testing.T) {
	pgtest.Slow(t)
	billing := pgtest.MigratedDSN(t)
	orders := secondDatabase(t, billing, "orders")
	cc, err := pgx.ParseConfig(orders)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultnet.New("fleet-orders", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	b1 := testnode.Start(t, testnode.FastConfig(billing, "node-1", "jobs"))
	waitLeads(t, b1, "jobs")
	testnode.Start(t, testnode.FastConfig(billing, "node-2", "jobs"))
	waitLeads(t, testnode.Start(t, testnode.FastConfig(orders, "node-1", "jobs")), "jobs")

	members := []FleetMember{
		{Name: "billing", Collector: newCollector(t, testConfig(t, billing))},
		{Name: "orders", Collector: newCollector(t, testConfig(t, dsnFor(t, orders, proxy.Addr(), cc.Database)))},
		{Name: "down", Collector: newCollector(t, testConfig(t, dsnFor(t, billing, closedPort(t), "nothing")))},
	}
	f, err := NewFleet(members, FleetConfig{UnreachableAfter: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Fleet.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Fleet.Run did not return within 30s of cancel")
		}
	}()

	scopeOf := func(s *Snapshot, db string) (Scope, bool) {
		for _, sc := range s.Scopes {
			if sc.Database == db && sc.Name == "jobs" {
				return sc, true
			}
		}
		return Scope{}, false
	}
	s := waitFleet(t, f, "both databases led, down unreachable", func(s *Snapshot) bool {
		b, okB := scopeOf(s, "billing")
		o, okO := scopeOf(s, "orders")
		return okB && okO && b.Leader == "node-1" && o.Leader == "node-1" && b.Verdict == VerdictOK && o.Verdict == VerdictOK &&
			s.Databases[0].Up() && s.Databases[1].Up() && s.Databases[2].Status == DatabaseUnreachable
	})
	if a := s.Alerts; len(a) != 1 || a[0].Database != "down" || a[0].Kind != AlertCollectorDown {
		t.Fatalf("alerts %+v", a)
	}

	if err := proxy.Hang(); err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	b1.Stop() // billing changes leader while orders hangs
	waitFleet(t, f, "billing led by node-2 while orders hangs", func(s *Snapshot) bool {
		b, _ := scopeOf(s, "billing")
		return b.Leader == "node-2" && b.HasLeader()
	})
	if time.Since(hung) > 10*time.Second {
		t.Errorf("billing's change took %v to arrive while orders hung", time.Since(hung))
	}
	s = waitFleet(t, f, "orders unreachable", func(s *Snapshot) bool { return s.Databases[1].Status == DatabaseUnreachable })
	if o, ok := scopeOf(s, "orders"); !ok || o.Verdict != VerdictOK || o.Leader != "node-1" {
		t.Fatalf("orders' last-known jobs: %+v (found %v)", o, ok)
	}
	for _, sc := range s.Scopes {
		if sc.Verdict == VerdictNoLeader {
			t.Fatalf("%s/%s is NO LEADER", sc.Database, sc.Name)
		}
	}
	before := s.Databases[0].LastRead
	waitFleet(t, f, "billing still read", func(s *Snapshot) bool { return s.Databases[0].LastRead.After(before) && s.Databases[0].Up() })

	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, f, "orders read again", func(s *Snapshot) bool { return s.Databases[1].Up() })
}

func waitLeads(t *testing.T, n *testnode.Node, scope string) {
	t.Helper()
	pgtest.WaitFor(t, n.NodeID()+" leads "+scope, wait, func() bool { return n.Leads(scope) })
}

func waitFleet(t *testing.T, f *Fleet, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	var last *Snapshot
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if last = f.Snapshot(); last != nil && cond(last) {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("%s: not within 20s; databases %+v", what, last.Databases)
	}
	t.Fatalf("%s: no merged snapshot within 20s", what)
	return nil
}
