package collector

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// offlineCollector is a collector that never connects: the fleet tests
// publish its snapshots and events themselves.
func offlineCollector(t *testing.T, db string) *Collector {
	t.Helper()
	cc, err := pgx.ParseConfig("postgres://nobody@127.0.0.1:1/" + db)
	if err != nil {
		t.Fatal(err)
	}
	return newCollector(t, Config{ConnConfig: cc, Logger: pgtest.Logger()})
}

// memberSnapshot is a database with scopes a (led by node-1) and b (no
// leader, with its alert), nodes node-1 and node-2, read at at.
func memberSnapshot(seq uint64, at time.Time) *Snapshot {
	noLeader := Alert{Kind: AlertNoLeader, Severity: SeverityCritical, Scope: "b", Summary: "no leader"}
	open := &Term{Scope: "a", Epoch: 3, Holder: "node-1", AcquiredAt: at.Add(-time.Minute)}
	return &Snapshot{Seq: seq, At: at, DBTime: at,
		Scopes: []Scope{
			{Name: "a", Leader: "node-1", Epoch: 3, LockPIDs: []int{7}, Verdict: VerdictOK, OpenTerm: open},
			{Name: "b", Verdict: VerdictNoLeader, Alerts: []Alert{noLeader}},
		},
		Nodes:  []Node{{ID: "node-1", Leads: []string{"a"}}, {ID: "node-2"}},
		Terms:  []Term{*open},
		Alerts: []Alert{noLeader},
		Health: Health{Source: SourceLive, Database: "x @ h:5432", LastPoll: at, Polls: seq},
	}
}

// fleetOf starts watching a fleet of offline collectors named names, in a
// synctest bubble; it returns the fleet, its members, and a func that
// stops it and waits.
func fleetOf(t *testing.T, names ...string) (*Fleet, []*Collector, func()) {
	t.Helper()
	var ms []FleetMember
	var cs []*Collector
	for _, n := range names {
		c := offlineCollector(t, n)
		ms = append(ms, FleetMember{Name: n, Collector: c})
		cs = append(cs, c)
	}
	f, err := NewFleet(ms, FleetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.watch(ctx, func() {}); close(done) }()
	synctest.Wait() // subscribed
	return f, cs, func() { cancel(); <-done }
}

func TestFleetMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		now := time.Now()
		cs[0].hub.publish(memberSnapshot(1, now), nil)
		cs[1].hub.publish(memberSnapshot(1, now.Add(time.Millisecond)), nil)
		time.Sleep(time.Second)
		synctest.Wait()
		s := f.Snapshot()
		if s == nil {
			t.Fatal("no merged snapshot")
		}
		if len(s.Scopes) != 4 || len(s.Nodes) != 4 || len(s.Terms) != 2 {
			t.Fatalf("merged %d scopes, %d nodes, %d terms; want 4, 4, 2", len(s.Scopes), len(s.Nodes), len(s.Terms))
		}
		var keys []string
		for _, sc := range s.Scopes {
			keys = append(keys, sc.Database+"/"+sc.Name)
			if sc.OpenTerm != nil && sc.OpenTerm.Database != sc.Database {
				t.Errorf("%s/%s: open term of database %q", sc.Database, sc.Name, sc.OpenTerm.Database)
			}
			for _, a := range sc.Alerts {
				if a.Database != sc.Database {
					t.Errorf("%s/%s: alert of database %q", sc.Database, sc.Name, a.Database)
				}
			}
		}
		if got := strings.Join(keys, " "); got != "billing/a billing/b orders/a orders/b" {
			t.Fatalf("scopes %s", got)
		}
		for _, n := range s.Nodes {
			if n.Database == "" {
				t.Fatalf("node %s without its database", n.ID)
			}
		}
		if s.Terms[0].Database != "orders" {
			t.Fatalf("terms not newest first: %+v", s.Terms)
		}
		if len(s.Alerts) != 2 || s.Alerts[0].Database != "billing" || s.Alerts[1].Database != "orders" {
			t.Fatalf("alerts %+v", s.Alerts)
		}
		if len(s.Databases) != 2 || !s.Databases[0].Up() || !s.Databases[1].Up() || s.Databases[0].Troubled != 1 {
			t.Fatalf("databases %+v", s.Databases)
		}
		if s.Health.Source != SourceLive || s.Health.Polls != 2 || s.Health.Database != "2 databases" {
			t.Fatalf("health %+v", s.Health)
		}
		// The member snapshots are not modified (they are shared).
		if cs[0].Snapshot().Scopes[0].Database != "" || cs[0].Snapshot().Scopes[0].OpenTerm.Database != "" {
			t.Fatal("the merge wrote into a member's snapshot")
		}
	})
}

// TestFleetUnreachableMember: a member that stops publishing (a hung read)
// keeps its last-known scopes, marked unreachable, its alerts replaced by
// one collector_down; the other member's snapshots keep flowing; and it is
// back when it publishes again.
func TestFleetUnreachableMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		evs, unsub := f.Subscribe(64)
		defer unsub()
		start := time.Now()
		cs[1].hub.publish(memberSnapshot(1, start), nil) // orders reads once, then hangs
		for i := range 8 {
			cs[0].hub.publish(memberSnapshot(uint64(i+1), time.Now()), nil)
			time.Sleep(time.Second)
			synctest.Wait()
			s := f.Snapshot()
			if s.Databases[0].LastRead != time.Now().Add(-time.Second) {
				t.Fatalf("second %d: billing's newest read not merged while orders hangs: %v", i, s.Databases[0].LastRead)
			}
			orders := s.Databases[1]
			if i < 4 && !orders.Up() {
				t.Fatalf("second %d: orders unreachable too early: %+v", i, orders)
			}
			if i >= 5 && orders.Status != DatabaseUnreachable {
				t.Fatalf("second %d: orders still %s after its reads stopped", i, orders.Status)
			}
		}
		s := f.Snapshot()
		orders := s.Databases[1]
		if !strings.Contains(orders.Reason, "slow or the network hangs") || orders.LastRead != start {
			t.Fatalf("orders: %+v", orders)
		}
		var ordersScopes, ordersAlerts int
		for _, sc := range s.Scopes {
			if sc.Database == "orders" {
				ordersScopes++
			}
		}
		for _, a := range s.Alerts {
			if a.Database == "orders" {
				ordersAlerts++
				if a.Kind != AlertCollectorDown || !strings.Contains(a.Summary, "h:5432: reads not finishing — orders unread since") {
					t.Fatalf("orders' alert %+v", a)
				}
			}
		}
		if ordersScopes != 2 || ordersAlerts != 1 {
			t.Fatalf("orders: %d scopes (want its 2 last-known), %d alerts (want 1 collector_down)", ordersScopes, ordersAlerts)
		}
		if s.Health.Source != SourceLive {
			t.Fatalf("one database down dims the fleet: health %+v", s.Health)
		}
		firing := drain(evs)
		if len(firing) != 1 || firing[0].Kind != EventAlertFiring || firing[0].Database != "orders" {
			t.Fatalf("events %+v", firing)
		}

		cs[1].hub.publish(memberSnapshot(2, time.Now()), nil)
		time.Sleep(300 * time.Millisecond) // past MergeGap
		synctest.Wait()
		if st := f.Snapshot().Databases[1]; !st.Up() {
			t.Fatalf("orders reads again, still %+v", st)
		}
		if got := drain(evs); len(got) != 1 || got[0].Kind != EventAlertResolved || got[0].Database != "orders" {
			t.Fatalf("events %+v", got)
		}
	})
}

// TestFleetDisconnectedMember: a member whose collector says it is
// disconnected is unreachable at once, with the collector's error.
func TestFleetDisconnectedMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		cs[0].hub.publish(memberSnapshot(1, time.Now()), nil)
		down := memberSnapshot(1, time.Now())
		down.Health.Source, down.Health.LastError = SourceDisconnected, "dial tcp 127.0.0.1:1: connect: connection refused"
		cs[1].hub.publish(down, nil)
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		st := f.Snapshot().Databases[1]
		if st.Status != DatabaseUnreachable || !strings.Contains(st.Reason, "connection refused") {
			t.Fatalf("orders %+v", st)
		}
		for _, sc := range f.Snapshot().Scopes {
			if sc.Database == "orders" && sc.Name == "a" && sc.Verdict != VerdictOK {
				t.Fatalf("orders/a lost its last-known verdict: %s", sc.Verdict)
			}
		}
	})
}

// TestFleetStoppedMember: a member whose collector stopped (its Run failed,
// e.g. a logical source its database cannot serve) is unreachable with the
// error, its last snapshot kept.
func TestFleetStoppedMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		cs[0].hub.publish(memberSnapshot(1, time.Now()), nil)
		cs[1].hub.publish(memberSnapshot(1, time.Now()), nil)
		err := ErrLogicalUnavailable
		f.members[1].stopped.Store(&err)
		f.poke()
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		s := f.Snapshot()
		if st := s.Databases[1]; st.Status != DatabaseUnreachable || !strings.Contains(st.Reason, "its collector stopped") {
			t.Fatalf("orders %+v", st)
		}
		if len(s.Scopes) != 4 {
			t.Fatalf("%d scopes, want orders' last-known two kept", len(s.Scopes))
		}
	})
}

// TestFleetConnecting: a member with no read yet is connecting, then
// unreachable once UnreachableAfter has passed since the start.
func TestFleetConnecting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		cs[0].hub.publish(memberSnapshot(1, time.Now()), nil)
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if st := f.Snapshot().Databases[1]; st.Status != DatabaseConnecting {
			t.Fatalf("orders %+v", st)
		}
		if a := f.Snapshot().Alerts; len(a) != 1 || a[0].Database != "billing" {
			t.Fatalf("a connecting database alerts: %+v", a)
		}
		for range 6 {
			cs[0].hub.publish(memberSnapshot(1, time.Now()), nil)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if st := f.Snapshot().Databases[1]; st.Status != DatabaseUnreachable || !strings.Contains(st.Reason, "no read has finished") {
			t.Fatalf("orders %+v", st)
		}
	})
}

// TestFleetMergeGap: updates of several members within MergeGap make one
// merge, and a merge with nothing new publishes nothing.
func TestFleetMergeGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		cs[0].hub.publish(memberSnapshot(1, time.Now()), nil)
		synctest.Wait()
		first := f.Snapshot()
		time.Sleep(50 * time.Millisecond)
		cs[1].hub.publish(memberSnapshot(1, time.Now()), nil)
		time.Sleep(50 * time.Millisecond)
		cs[0].hub.publish(memberSnapshot(2, time.Now()), nil)
		time.Sleep(time.Second)
		synctest.Wait()
		s := f.Snapshot()
		if s.Seq != first.Seq+1 || !s.Databases[1].Up() || s.Databases[0].Scopes != 2 {
			t.Fatalf("seq %d after %d, databases %+v: want one merge of both updates", s.Seq, first.Seq, s.Databases)
		}
		if again := f.merge(time.Now()); again != s {
			t.Fatal("a merge with nothing new made a new snapshot")
		}
	})
}

// TestFleetEvents: the members' events come out as one stream, each with its
// database, renumbered.
func TestFleetEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cs, stop := fleetOf(t, "billing", "orders")
		defer stop()
		evs, unsub := f.Subscribe(64)
		defer unsub()
		a := Alert{Kind: AlertNoLeader, Scope: "b"}
		cs[0].hub.publish(nil, []Event{{Kind: EventElected, Scope: "a", Node: "node-1", Epoch: 3}})
		synctest.Wait()
		cs[1].hub.publish(nil, []Event{{Kind: EventAlertFiring, Scope: "b", Alert: &a}})
		synctest.Wait()
		got := drain(evs)
		if len(got) != 2 || got[0].Database != "billing" || got[1].Database != "orders" || got[1].Alert.Database != "orders" ||
			got[0].Seq != 1 || got[1].Seq != 2 {
			t.Fatalf("events %+v", got)
		}
		if a.Database != "" {
			t.Fatal("the fleet wrote into a member's alert")
		}
	})
}

func TestFleetConfigErrors(t *testing.T) {
	c := offlineCollector(t, "x")
	for _, tc := range []struct {
		ms   []FleetMember
		want string
	}{
		{nil, "at least one member"},
		{[]FleetMember{{Name: "", Collector: c}}, "has no name"},
		{[]FleetMember{{Name: "a", Collector: c}, {Name: "a", Collector: c}}, "used twice"},
		{[]FleetMember{{Name: "a"}}, "has no collector"},
	} {
		if _, err := NewFleet(tc.ms, FleetConfig{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.ms, err, tc.want)
		}
	}
}

// TestFleetSingleDatabaseJSON: the Database fields are omitted when empty, so
// a single database's JSON keeps its shape.
func TestFleetSingleDatabaseJSON(t *testing.T) {
	b, err := json.Marshal(memberSnapshot(1, time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), `"database":`) != 1 || strings.Contains(string(b), `"databases"`) {
		t.Fatalf("single-database JSON carries fleet fields: %s", b)
	}
}

func drain(ch <-chan Event) []Event {
	var out []Event
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Databases of one server that cannot be read are one outage: one
// collector_down naming the server, its cause and every database; another
// server's, its own.
func TestUnreachableAlertsPerServer(t *testing.T) {
	now := time.Date(2026, 11, 28, 21, 54, 0, 0, time.UTC)
	read := now.Add(-time.Minute)
	states := []DatabaseState{
		{Name: "orders", Status: DatabaseUnreachable, Database: "orders @ db1:5432", LastRead: read, Reason: "collector: connect: dial tcp 10.0.0.1:5432: connect: connection refused"},
		{Name: "billing", Status: DatabaseUnreachable, Database: "billing @ db1:5432", LastRead: read.Add(time.Second), Reason: "dial tcp: connection refused"},
		{Name: "jobs", Status: DatabaseUp, Database: "jobs @ db2:5432"},
		{Name: "audit", Status: DatabaseUnreachable, Database: "audit @ db2:5433", Reason: "read: timeout: context deadline exceeded"},
	}
	got := unreachableAlerts(states, now)
	if len(got) != 2 {
		t.Fatalf("%d alerts, want one per server (2): %+v", len(got), got)
	}
	a := got["db1:5432"]
	if a.Summary != "db1:5432: connection refused — orders, billing unread since 21:53:00" || a.Database != "orders, billing" {
		t.Errorf("db1's alert: %q (database %q)", a.Summary, a.Database)
	}
	if b := got["db2:5433"]; b.Summary != "db2:5433: timed out — audit never read" {
		t.Errorf("db2:5433's alert: %q", b.Summary)
	}
	// The server and the cause lead, and fit an 80-column alert line after
	// its "‼ CRITICAL collector_down: " (27 columns).
	for _, a := range got {
		if head, _, ok := strings.Cut(a.Summary, " — "); !ok || len([]rune(head)) > 80-27 {
			t.Errorf("%q: the server and the cause do not lead within 53 columns", a.Summary)
		}
	}
}
