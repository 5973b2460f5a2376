package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/replay"
	"github.com/pgleader/pgleader/protocol"
)

// replayHistory is 40 minutes of billing and reports before t0:
//
//	t0-30m  node-a leads billing (epoch 41), node-b reports (epoch 7)
//	t0-14m  node-a's last heartbeat; W = 1.5 s
//	t0-14m+3s  node-c claims billing (epoch 42), closing node-a's term as crashed
func replayHistory() *replay.History {
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	crash := t0.Add(-14 * time.Minute)
	claim := crash.Add(3 * time.Second)
	node := func(id, host string) collector.HistoryNode {
		return collector.HistoryNode{Node: collector.Node{ID: id, Hostname: host, StartedAt: t0.Add(-time.Hour),
			LastSeen: t0, Scopes: []string{"billing", "reports"}, Timing: timing, Priority: 1, Mode: "lock", Version: "v1.4.0"},
			Registered: t0.Add(-time.Hour)}
	}
	a := node("node-a", "host-a")
	a.Registered = crash.Add(time.Minute) // restarted after its crash
	return replay.New(collector.HistoryRows{
		From: t0.Add(-40 * time.Minute), To: t0, DBNow: t0, Earliest: t0.Add(-time.Hour),
		Scopes: []collector.HistoryScope{
			{Name: "billing", LockKey: 1, Mode: "lock", Epoch: 42, Holder: "node-c", LastHeartbeat: t0, Timing: timing, First: t0.Add(-time.Hour)},
			{Name: "reports", LockKey: 2, Mode: "lock", Epoch: 7, Holder: "node-b", LastHeartbeat: t0, Timing: timing, First: t0.Add(-time.Hour)},
		},
		Terms: []collector.Term{
			{ID: 1, Scope: "billing", Epoch: 41, Holder: "node-a", Hostname: "host-a", HolderPID: 4241, AcquiredAt: t0.Add(-30 * time.Minute),
				ReleasedAt: claim, EndedBy: protocol.ReasonCrashed},
			{ID: 2, Scope: "reports", Epoch: 7, Holder: "node-b", Hostname: "host-b", HolderPID: 5151, AcquiredAt: t0.Add(-30 * time.Minute)},
			{ID: 3, Scope: "billing", Epoch: 42, Holder: "node-c", Hostname: "host-c", HolderPID: 4242, AcquiredAt: claim, HandoverGap: 3 * time.Second},
		},
		Audit: []collector.HistoryAudit{
			{ID: 10, At: claim, Scope: "billing", Node: "node-a", Epoch: 41, Kind: "term_closed_by_successor", Detail: []byte(`{"reason":"crashed","successor":"node-c"}`)},
			{ID: 11, At: claim, Scope: "billing", Node: "node-c", Epoch: 42, Kind: "elected", Detail: []byte(`{"prev_epoch":41}`), PrevHolder: "node-a"},
		},
		Nodes: []collector.HistoryNode{a, node("node-b", "host-b"), node("node-c", "host-c")},
	})
}

// replayAt opens the dashboard in replay mode at at, over the healthy live feed.
func replayAt(t *testing.T, at time.Time, opts ...func(*Options)) (*Model, *bundle) {
	t.Helper()
	h := replayHistory()
	return setup(t, healthySnapshot(), append([]func(*Options){func(o *Options) { o.ReplayFrom, o.ReplayAt = oneHistory(h), at }}, opts...)...)
}

func leaderOf(t *testing.T, m *Model, scope string) collector.Scope {
	t.Helper()
	sc, ok := m.snap.Scope(scope)
	if !ok {
		t.Fatalf("no scope %s on screen", scope)
	}
	return sc
}

func TestReplay(t *testing.T) {
	t.Run("Banner", func(t *testing.T) {
		m, _ := replayAt(t, t0.Add(-20*time.Minute))
		s := screen(m)
		first := strings.SplitN(s, "\n", 2)[0]
		if !strings.Contains(first, "REPLAY 02:52:00.000") || !strings.Contains(first, "NOT LIVE") {
			t.Errorf("first line %q: want the REPLAY banner", first)
		}
		if strings.Contains(s, "· ● live ·") || strings.Contains(s, "updated") {
			t.Errorf("a replayed frame reads as live:\n%s", s)
		}
		if sc := leaderOf(t, m, "billing"); sc.Leader != "node-a" || sc.Epoch != 41 {
			t.Errorf("billing at t0-20m: %s epoch %d", sc.Leader, sc.Epoch)
		}
	})
	t.Run("LiveSnapshotsWait", func(t *testing.T) {
		m, _ := replayAt(t, t0.Add(-20*time.Minute))
		m.Update(snapshotMsg{healthySnapshot()})
		if m.snap.Replay == nil {
			t.Fatal("a live snapshot replaced the replayed one")
		}
	})
	t.Run("ActionsRefused", func(t *testing.T) {
		for _, k := range []string{"x", "R", "O", "K", "space", "r"} {
			m, b := replayAt(t, t0.Add(-20*time.Minute))
			keys(m, k)
			if m.mode.overlay == overlayConfirm || len(b.actions.calls)+len(b.actions.resigns)+len(b.actions.handovers) != 0 || len(b.faults.calls) != 0 || m.paused {
				t.Errorf("%s while replaying: confirm %v, actions %+v, faults %v, paused %v", k, m.mode.confirm, b.actions, b.faults.calls, m.paused)
			}
			if !strings.Contains(m.status, "replaying") {
				t.Errorf("%s while replaying: status %q, want it refused", k, m.status)
			}
		}
	})
	t.Run("StepChangesTheLeader", func(t *testing.T) {
		m, _ := replayAt(t, t0.Add(-20*time.Minute))
		var seen []string
		for range 5 {
			keys(m, "]")
			sc := leaderOf(t, m, "billing")
			seen = append(seen, sc.Leader+":"+itoa(int(sc.Epoch))+":"+string(sc.Verdict))
		}
		want := "node-a:41:NO LEADER node-c:42:OK"
		if got := strings.Join(seen[:2], " "); got != want {
			t.Errorf("] from t0-20m: %v, want %s first", seen, want)
		}
		keys(m, "[", "[")
		if sc := leaderOf(t, m, "billing"); sc.Leader != "node-a" || sc.LeaderLive {
			t.Errorf("[ back: billing %+v, want node-a silent", sc)
		}
		if s := screen(m); !strings.Contains(s, "was node-a") {
			t.Errorf("a holder past its last heartbeat does not show as gone:\n%s", s)
		}
	})
	t.Run("BackToLive", func(t *testing.T) {
		m, b := replayAt(t, t0.Add(-20*time.Minute))
		m.Update(eventsMsg{sampleEvents()})
		keys(m, "L")
		if m.replay != nil || m.snap.Replay != nil || m.snap.Seq != 100 {
			t.Fatalf("after L: replay %v, snapshot %d", m.replay, m.snap.Seq)
		}
		if s := screen(m); strings.Contains(s, "REPLAY") || !strings.Contains(s, "● live") {
			t.Errorf("after L the frame is not live:\n%s", s)
		}
		keys(m, "x")
		if m.mode.overlay != overlayConfirm {
			t.Error("live again, x does not ask to evict")
		}
		_ = b
	})
	t.Run("EnterFromLive", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Replay = fakeReplayer{replayHistory()} })
		cmd := keys(m, "[")
		if cmd == nil {
			t.Fatal("[ live: no read of the history")
		}
		m.Update(cmd())
		if m.snap.Replay == nil || !m.snap.Replay.At.Equal(t0.Add(-13*time.Minute)) {
			t.Fatalf("[ live: at %+v, want the last transition (node-a's registration)", m.snap.Replay)
		}
		if m.status != "" {
			t.Errorf("the history is read, the status still says %q", m.status)
		}
	})
}

// oneHistory is the windows of history of one database.
func oneHistory(h *replay.History) []DatabaseHistory { return []DatabaseHistory{{History: h}} }

type fakeReplayer struct{ h *replay.History }

func (f fakeReplayer) History(context.Context, time.Time) (*replay.History, error) {
	return f.h, nil
}

func TestReplayReadsTheNextWindow(t *testing.T) {
	// A window that ends at t0-10m with a transition recorded after it: the
	// step past the edge reads the window around that transition.
	later := t0.Add(-5 * time.Minute)
	first := replay.New(collector.HistoryRows{From: t0.Add(-40 * time.Minute), To: t0.Add(-10 * time.Minute),
		DBNow: t0, Earliest: t0.Add(-time.Hour), After: later})
	m, _ := setup(t, healthySnapshot(), func(o *Options) {
		o.ReplayFrom, o.ReplayAt = oneHistory(first), t0.Add(-20*time.Minute)
		o.Replay = fakeReplayer{replayHistory()}
	})
	cmd := keys(m, "]")
	if cmd == nil || !m.replay.loading {
		t.Fatalf("] past the window: no read (status %q)", m.status)
	}
	keys(m, "]") // ignored while reading
	m.Update(cmd())
	if m.replay.loading || !m.snap.Replay.At.Equal(later) || !m.replay.dbs[0].History.Contains(later) {
		t.Fatalf("after the read: at %v, loading %v", m.snap.Replay.At, m.replay.loading)
	}
}

// TestReplayUnknownNodes: a node whose state the history cannot tell (it
// registered again after the instant, and held no term then) shows as
// unknown everywhere — never "not live", "follows none" or "not following",
// and the scopes it may have followed say so instead of "none".
func TestReplayUnknownNodes(t *testing.T) {
	m, _ := replayAt(t, t0.Add(-14*time.Minute+2*time.Second))
	s := screen(m)
	row := lineWith(s, `node-a\s+host-a`)
	if !strings.Contains(row, "? unknown") || !strings.Contains(row, "reports:?") || strings.Contains(row, "not live") || strings.Contains(row, "follows none") {
		t.Errorf("node-a's row %q: want unknown, its scopes '?'", row)
	}
	if row := lineWith(s, `reports\s+✔ OK`); !strings.Contains(row, "1: node-c +1 unknown") {
		t.Errorf("reports' row %q: want its unknown candidate counted", row)
	}
	keys(m, "tab", "enter")
	s = screen(m)
	if !strings.Contains(s, "? unknown · not recorded") || strings.Contains(s, "not following") || strings.Contains(s, "not live") {
		t.Errorf("node-a's detail reads as known:\n%s", s)
	}
}

// ordersHistory is another database's history with the same scope names:
// in orders, node-x leads billing from t0-20m until it crashes at t0-10m;
// node-y claims it 1 s later.
func ordersHistory() *replay.History {
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	crash := t0.Add(-10 * time.Minute)
	node := func(id string) collector.HistoryNode {
		return collector.HistoryNode{Node: collector.Node{ID: id, Hostname: "host-" + id, StartedAt: t0.Add(-time.Hour),
			LastSeen: t0, Scopes: []string{"billing"}, Timing: timing, Priority: 1, Mode: "lock", Version: "v1.4.0"},
			Registered: t0.Add(-time.Hour)}
	}
	return replay.New(collector.HistoryRows{
		From: t0.Add(-40 * time.Minute), To: t0, DBNow: t0, Earliest: t0.Add(-time.Hour),
		Scopes: []collector.HistoryScope{
			{Name: "billing", LockKey: 1, Mode: "lock", Epoch: 9, Holder: "node-y", LastHeartbeat: t0, Timing: timing, First: t0.Add(-time.Hour)},
		},
		Terms: []collector.Term{
			{ID: 1, Scope: "billing", Epoch: 8, Holder: "node-x", Hostname: "host-node-x", AcquiredAt: t0.Add(-20 * time.Minute),
				ReleasedAt: crash.Add(time.Second), EndedBy: protocol.ReasonCrashed},
			{ID: 2, Scope: "billing", Epoch: 9, Holder: "node-y", Hostname: "host-node-y", AcquiredAt: crash.Add(time.Second), HandoverGap: time.Second},
		},
		Nodes: []collector.HistoryNode{node("node-x"), node("node-y")},
	})
}

// fleetHistories is the windows of two databases, ledger (replayHistory) and
// orders (ordersHistory).
func fleetHistories() []DatabaseHistory {
	return []DatabaseHistory{{Database: "ledger", History: replayHistory()}, {Database: "orders", History: ordersHistory()}}
}

// TestReplayFleet: top --at over several databases replays them side by
// side, each row naming its database, and steps through the transitions of
// all of them; a database whose history cannot be read is unreachable, not
// left out; [ in a live fleet enters replay.
func TestReplayFleet(t *testing.T) {
	t.Run("SideBySide", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.ReplayFrom, o.ReplayAt = fleetHistories(), t0.Add(-12*time.Minute) })
		s := screen(m)
		if !strings.Contains(s, "REPLAY 03:00:00.000") || !strings.Contains(s, "DATABASE") {
			t.Fatalf("no fleet replay on screen:\n%s", s)
		}
		for _, want := range []string{`ledger\s+billing\s+✔ OK\s+node-c`, `orders\s+billing\s+✔ OK\s+node-x`, `ledger\s+reports\s+✔ OK\s+node-b`} {
			if lineWith(s, want) == "" {
				t.Errorf("no row %s:\n%s", want, s)
			}
		}
		if n := len(m.snap.Databases); n != 2 {
			t.Errorf("%d databases in the replayed snapshot, want 2", n)
		}
	})
	t.Run("StepsAcrossDatabases", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.ReplayFrom, o.ReplayAt = fleetHistories(), t0.Add(-12*time.Minute) })
		crash := t0.Add(-10 * time.Minute)
		keys(m, "]") // orders: node-x's trust window ends (its last sign is its successor's start minus the gap)
		if got := m.snap.Replay.At; !got.After(t0.Add(-12*time.Minute)) || got.After(crash.Add(time.Second)) {
			t.Fatalf("] from t0-12m: at %v, want orders' next transition, by %v", got, crash.Add(time.Second))
		}
		for m.snap.Replay.At.Before(crash.Add(time.Second)) {
			keys(m, "]")
		}
		sc, _ := findScope(m.snap, keyOf("orders", "billing"))
		if sc.Leader != "node-y" || sc.Epoch != 9 {
			t.Errorf("orders/billing at %v: %s epoch %d, want node-y 9", m.snap.Replay.At, sc.Leader, sc.Epoch)
		}
		if sc, _ := findScope(m.snap, keyOf("ledger", "billing")); sc.Leader != "node-c" {
			t.Errorf("ledger/billing moved with orders: %+v", sc)
		}
		keys(m, "[")
		if sc, _ := findScope(m.snap, keyOf("orders", "billing")); sc.Leader != "node-x" {
			t.Errorf("[ back: orders/billing led by %s, want node-x again", sc.Leader)
		}
	})
	t.Run("UnreadableDatabase", func(t *testing.T) {
		dbs := []DatabaseHistory{{Database: "ledger", History: replayHistory()}, {Database: "orders", Err: errors.New("connection refused")}}
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.ReplayFrom, o.ReplayAt = dbs, t0.Add(-12*time.Minute) })
		s := screen(m)
		if !strings.Contains(s, "orders ✖ UNREACHABLE") {
			t.Errorf("orders is not shown unreachable:\n%s", s)
		}
		if d, _ := m.dbState("orders"); d.Up() || !strings.Contains(d.Reason, "connection refused") {
			t.Errorf("orders: %+v", d)
		}
	})
	t.Run("EnterFromLiveFleet", func(t *testing.T) {
		m, _ := setup(t, fleetSnapshot(), func(o *Options) {
			o.Replay = ReplayFleet{{Database: "ledger", Replayer: fakeReplayer{replayHistory()}}, {Database: "orders", Replayer: fakeReplayer{ordersHistory()}}}
		})
		cmd := keys(m, "[")
		if cmd == nil {
			t.Fatalf("[ in a live fleet: %q", m.status)
		}
		m.Update(cmd())
		if m.snap.Replay == nil || len(m.snap.Databases) != 2 || !strings.Contains(screen(m), "REPLAY") {
			t.Fatalf("[ in a live fleet does not replay it: %+v", m.snap.Replay)
		}
		if sc, ok := findScope(m.snap, keyOf("orders", "billing")); !ok || sc.Leader != "node-y" {
			t.Errorf("orders/billing replayed: %+v", sc)
		}
	})
}

// TestReplayStepsVisibly: transitions microseconds apart (a claim's term row
// and its audit row) read as one instant on screen: [ and ] step past them
// as one, never to an instant that shows the same time.
func TestReplayStepsVisibly(t *testing.T) {
	claim := t0.Add(-14*time.Minute + 3*time.Second)
	rows := collector.HistoryRows{From: t0.Add(-40 * time.Minute), To: t0, DBNow: t0, Earliest: t0.Add(-time.Hour)}
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	rows.Scopes = []collector.HistoryScope{{Name: "billing", LockKey: 1, Mode: "lock", Epoch: 2, Holder: "node-b", LastHeartbeat: t0, Timing: timing, First: t0.Add(-time.Hour)}}
	rows.Terms = []collector.Term{
		{ID: 1, Scope: "billing", Epoch: 1, Holder: "node-a", AcquiredAt: t0.Add(-30 * time.Minute), ReleasedAt: claim, EndedBy: protocol.ReasonResigned},
		{ID: 2, Scope: "billing", Epoch: 2, Holder: "node-b", AcquiredAt: claim},
	}
	rows.Audit = []collector.HistoryAudit{{ID: 1, At: claim.Add(60 * time.Microsecond), Scope: "billing", Node: "node-b", Epoch: 2, Kind: "elected"}}
	m, _ := setup(t, healthySnapshot(), func(o *Options) {
		o.ReplayFrom, o.ReplayAt = oneHistory(replay.New(rows)), t0.Add(-20*time.Minute)
	})
	keys(m, "]")
	at := m.snap.Replay.At
	if !at.Equal(claim.Add(60 * time.Microsecond)) {
		t.Fatalf("] from t0-20m: at %v, want past the claim's two rows (%v)", at, claim.Add(60*time.Microsecond))
	}
	keys(m, "[")
	if got := m.snap.Replay.At; got.Sub(at).Abs() < time.Millisecond {
		t.Errorf("[ from %v went to %v: the same instant on screen", at, got)
	}
}
