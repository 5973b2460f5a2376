package replay

import (
	"slices"
	"testing"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/protocol"
)

// replayFixture is a history of two scopes and two nodes, in memory:
//
//	10:00:00  n1 leads s (epoch 1)
//	10:01:00  n2 leads r (epoch 1)
//	10:04:57  n1's last heartbeat (it crashed; W = 1.5 s)
//	10:05:00  n2 claims s (epoch 2) and closes n1's term as crashed (gap 3 s)
//	10:06:00  n1 registers again (its row keeps only this lifetime)
//	10:07:00  n2 releases r (shutdown), 10:08:00 r is retired
//	10:10:00  n2 stops cleanly, releasing s (shutdown)
//	10:20:00  now; n1 last seen 10:19:59.900
func replayFixture(t *testing.T) (*History, func(string) time.Time) {
	t.Helper()
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(hms string) time.Time {
		c, err := time.Parse("15:04:05.000", hms)
		if err != nil {
			c, err = time.Parse("15:04:05", hms)
		}
		if err != nil {
			t.Fatal(err)
		}
		return day.Add(time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute +
			time.Duration(c.Second())*time.Second + time.Duration(c.Nanosecond()))
	}
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second}
	return New(collector.HistoryRows{From: at("09:20:00"), To: at("10:20:00"), DBNow: at("10:20:00"), Earliest: at("10:00:00"),
		Scopes: []collector.HistoryScope{
			{Name: "r", LockKey: 2, Mode: "lock", Epoch: 1, Timing: timing, RetiredAt: at("10:08:00"), First: at("10:01:00")},
			{Name: "s", LockKey: 1, Mode: "lock", Epoch: 2, Timing: timing, First: at("10:00:00")},
		},
		Terms: []collector.Term{
			{ID: 1, Scope: "s", Epoch: 1, Holder: "n1", Hostname: "h1", HolderPID: 101, AcquiredAt: at("10:00:00"),
				ReleasedAt: at("10:05:00"), EndedBy: protocol.ReasonCrashed},
			{ID: 3, Scope: "s", Epoch: 2, Holder: "n2", Hostname: "h2", HolderPID: 202, AcquiredAt: at("10:05:00"),
				ReleasedAt: at("10:10:00"), EndedBy: protocol.ReasonShutdown, HandoverGap: 3 * time.Second},
			{ID: 2, Scope: "r", Epoch: 1, Holder: "n2", Hostname: "h2", HolderPID: 203, AcquiredAt: at("10:01:00"),
				ReleasedAt: at("10:07:00"), EndedBy: protocol.ReasonShutdown},
		},
		Audit: []collector.HistoryAudit{
			{ID: 1, At: at("10:00:00"), Scope: "s", Node: "n1", Epoch: 1, Kind: "elected"},
			{ID: 2, At: at("10:01:00"), Scope: "r", Node: "n2", Epoch: 1, Kind: "elected"},
			{ID: 3, At: at("10:05:00"), Scope: "s", Node: "n1", Epoch: 1, Kind: "term_closed_by_successor", Detail: []byte(`{"reason":"crashed","successor":"n2"}`)},
			{ID: 4, At: at("10:05:00"), Scope: "s", Node: "n2", Epoch: 2, Kind: "elected"},
			{ID: 5, At: at("10:07:00"), Scope: "r", Node: "n2", Epoch: 1, Kind: "released", Detail: []byte(`{"reason":"shutdown"}`)},
			{ID: 6, At: at("10:08:00"), Scope: "r", Epoch: 1, Kind: "scope_retired", Detail: []byte(`{"by":"ops"}`)},
			{ID: 7, At: at("10:10:00"), Scope: "s", Node: "n2", Epoch: 2, Kind: "released", Detail: []byte(`{"reason":"shutdown"}`)},
		},
		Nodes: []collector.HistoryNode{
			{Node: collector.Node{ID: "n1", Hostname: "h1", StartedAt: at("09:59:00"), LastSeen: at("10:19:59.900"), Scopes: []string{"s"},
				Timing: timing, Priority: 1, Mode: "lock"}, Registered: at("10:06:00")},
			{Node: collector.Node{ID: "n2", Hostname: "h2", StartedAt: at("09:59:00"), LastSeen: at("10:10:00"), StoppedAt: at("10:10:00"),
				Scopes: []string{"s", "r"}, Timing: timing, Priority: 1, Mode: "lock"}, Registered: at("09:59:00")},
		},
	}), at
}

func nodeAt(t *testing.T, s *collector.Snapshot, id string) collector.Node {
	t.Helper()
	n, ok := s.Node(id)
	if !ok {
		t.Fatalf("replay at %s: no node %s in %+v", s.DBTime.Format("15:04:05.000"), id, s.Nodes)
	}
	return n
}

func TestReplayHistoryAt(t *testing.T) {
	h, at := replayFixture(t)

	t.Run("BeforeTheFirstRecord", func(t *testing.T) {
		s := h.At(at("09:59:30"))
		if len(s.Scopes) != 0 || s.Replay == nil || len(s.Replay.Notes) == 0 {
			t.Fatalf("scopes %v, replay %+v: want none, with a note", s.Scopes, s.Replay)
		}
		if n := nodeAt(t, s, "n2"); n.State != collector.NodeLive {
			t.Errorf("n2 (registered 09:59, stopped 10:10): %s, want live", n.State)
		}
		if n := nodeAt(t, s, "n1"); n.State != collector.NodeUnknown {
			t.Errorf("n1 before its current lifetime, no term: %s, want unknown", n.State)
		}
	})
	t.Run("Led", func(t *testing.T) {
		s := h.At(at("10:02:00"))
		sc := scope(t, s, "s")
		if !sc.HasLeader() || sc.Leader != "n1" || sc.Epoch != 1 || sc.Tenure != 2*time.Minute || sc.Verdict != collector.VerdictOK {
			t.Fatalf("s at 10:02: %+v", sc)
		}
		if sc.HeartbeatAge != 0 || !sc.LastHeartbeat.IsZero() {
			t.Errorf("heartbeat before the term's last: age %v at %v, want unknown (zero)", sc.HeartbeatAge, sc.LastHeartbeat)
		}
		if n := nodeAt(t, s, "n1"); n.State != collector.NodeLive || !slices.Equal(n.Leads, []string{"s"}) {
			t.Errorf("n1 leads s in an earlier lifetime: %s, leads %v", n.State, n.Leads)
		}
		if !slices.Equal(sc.Followers, []string{"n2"}) {
			t.Errorf("followers %v, want [n2]", sc.Followers)
		}
		if s.Health.Source != collector.SourceReplay || len(s.Alerts) != 0 {
			t.Errorf("source %s, alerts %v", s.Health.Source, s.Alerts)
		}
	})
	t.Run("WithinTheTrustWindowAfterTheLastHeartbeat", func(t *testing.T) {
		sc := scope(t, h.At(at("10:04:58.000")), "s")
		if !sc.HasLeader() || sc.Leader != "n1" || sc.HeartbeatAge != time.Second {
			t.Fatalf("s 1 s after n1's last heartbeat: %+v", sc)
		}
	})
	t.Run("HolderSilentTermOpenOnRecord", func(t *testing.T) {
		s := h.At(at("10:04:59.000"))
		sc := scope(t, s, "s")
		if sc.HasLeader() || sc.Leader != "n1" || sc.LeaderLive || sc.Verdict != collector.VerdictNoLeader ||
			sc.LeaderlessFor != 2*time.Second || sc.HeartbeatAge != 2*time.Second {
			t.Fatalf("s 2 s after n1's last heartbeat: %+v", sc)
		}
		if len(s.Alerts) != 0 {
			t.Errorf("no_leader before NoLeaderAfter: %v", s.Alerts)
		}
	})
	t.Run("Successor", func(t *testing.T) {
		s := h.At(at("10:05:01"))
		sc := scope(t, s, "s")
		if !sc.HasLeader() || sc.Leader != "n2" || sc.Epoch != 2 || sc.OpenTerm == nil || sc.OpenTerm.HandoverGap != 3*time.Second {
			t.Fatalf("s at 10:05:01: %+v", sc)
		}
		if n := nodeAt(t, s, "n1"); n.State != collector.NodeUnknown {
			t.Errorf("n1 between its crash and its new lifetime: %s, want unknown", n.State)
		}
		if s.Terms[0].Epoch != 2 || !s.Terms[0].Open() || s.Terms[2].EndedBy != protocol.ReasonCrashed {
			t.Errorf("terms at 10:05:01: %+v", s.Terms)
		}
	})
	t.Run("RetiredLater", func(t *testing.T) {
		if sc := scope(t, h.At(at("10:07:30")), "r"); sc.HasLeader() || sc.Epoch != 1 || sc.Verdict != collector.VerdictNoLeader {
			t.Errorf("r after its shutdown, n2 still a live candidate: %+v", sc)
		}
		s := h.At(at("10:09:00"))
		if _, ok := s.Scope("r"); ok || s.Retired != 1 {
			t.Errorf("r after its retirement: shown, retired %d", s.Retired)
		}
	})
	t.Run("LeaderlessAfterTheLastShutdown", func(t *testing.T) {
		s := h.At(at("10:12:00"))
		sc := scope(t, s, "s")
		if sc.HasLeader() || sc.Verdict != collector.VerdictNoLeader || sc.LeaderlessFor != 2*time.Minute {
			t.Fatalf("s at 10:12 (n1 a live candidate): %+v", sc)
		}
		if a, ok := alert(s, collector.AlertNoLeader, "s"); !ok || !a.Since.Equal(at("10:10:00")) {
			t.Errorf("no_leader: %+v", s.Alerts)
		}
		if n := nodeAt(t, s, "n2"); n.State != collector.NodeStopped {
			t.Errorf("n2 after its stop: %s", n.State)
		}
	})
	t.Run("Transitions", func(t *testing.T) {
		ts := h.Transitions()
		for _, want := range []string{"10:00:00", "10:04:58.501", "10:05:00", "10:06:00", "10:08:00", "10:10:00", "10:19:59.901"} {
			if !slices.ContainsFunc(ts, func(x time.Time) bool { return x.Equal(at(want)) }) {
				t.Errorf("transitions lack %s: %v", want, ts)
			}
		}
		if got := h.Next(at("10:04:58.000")); !got.Equal(at("10:04:58.501")) {
			t.Errorf("Next(10:04:58) = %v", got)
		}
		if got := h.Prev(at("10:05:00")); !got.Equal(at("10:04:58.501")) {
			t.Errorf("Prev(10:05:00) = %v", got)
		}
		if got := h.Prev(at("10:00:00")); !got.Equal(at("09:59:00")) {
			t.Errorf("Prev(10:00) = %v, want n2's registration", got)
		}
		if got := h.Prev(at("09:59:00")); !got.IsZero() {
			t.Errorf("Prev of the first = %v, want none", got)
		}
	})
	t.Run("Events", func(t *testing.T) {
		evs := h.Events(at("10:06:00"), 100)
		var kinds []collector.EventKind
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		want := []collector.EventKind{collector.EventNodeJoined, collector.EventElected, collector.EventElected, collector.EventTermClosed, collector.EventElected, collector.EventNodeJoined}
		if !slices.Equal(kinds, want) {
			t.Errorf("events up to 10:06: %v, want %v", kinds, want)
		}
		if got := h.Events(at("10:06:00"), 2); len(got) != 2 || got[1].Kind != collector.EventNodeJoined {
			t.Errorf("the last 2: %+v", got)
		}
	})
}

// TestReplayLastSign: how long a term's holder counts as leading.
func TestReplayLastSign(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	timing := collector.Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 4 * time.Second}
	build := func(mode string, terms ...collector.Term) *History {
		return New(collector.HistoryRows{From: t0.Add(-time.Hour), To: t0.Add(time.Hour), DBNow: t0.Add(time.Hour), Earliest: t0,
			Scopes: []collector.HistoryScope{{Name: "s", Mode: mode, Epoch: 2, Holder: "b", Timing: timing, First: t0, LastHeartbeat: t0.Add(10 * time.Second)}},
			Terms:  terms})
	}
	t.Run("ReleasedByItsHolder", func(t *testing.T) {
		// A holder that released with heartbeat_timeout itself: the successor
		// claims later, so the release is its last sign.
		h := build("lock",
			collector.Term{ID: 1, Scope: "s", Epoch: 1, Holder: "a", AcquiredAt: t0, ReleasedAt: t0.Add(time.Minute), EndedBy: protocol.ReasonHeartbeatTimeout},
			collector.Term{ID: 2, Scope: "s", Epoch: 2, Holder: "b", AcquiredAt: t0.Add(time.Minute + time.Second), HandoverGap: time.Second})
		if sc := scope(t, h.At(t0.Add(time.Minute+500*time.Millisecond)), "s"); sc.Leader != "" || sc.LeaderlessFor != 500*time.Millisecond {
			t.Errorf("between a's release and b's claim: %+v", sc)
		}
	})
	t.Run("CurrentTermSilent", func(t *testing.T) {
		// The open term of leader_state, its holder silent since t0+10s.
		h := build("lock", collector.Term{ID: 2, Scope: "s", Epoch: 2, Holder: "b", AcquiredAt: t0})
		if sc := scope(t, h.At(t0.Add(11*time.Second)), "s"); !sc.LeaderLive {
			t.Errorf("1 s after the last heartbeat: %+v", sc)
		}
		if sc := scope(t, h.At(t0.Add(12*time.Second)), "s"); sc.LeaderLive || sc.HeartbeatAge != 2*time.Second {
			t.Errorf("2 s after the last heartbeat (W 1.5 s): %+v", sc)
		}
	})
	t.Run("LeaseUntilItsLease", func(t *testing.T) {
		h := build("lease", collector.Term{ID: 2, Scope: "s", Epoch: 2, Holder: "b", AcquiredAt: t0})
		if sc := scope(t, h.At(t0.Add(13*time.Second)), "s"); !sc.LeaderLive || !sc.HasLeader() {
			t.Errorf("lease mode, 3 s after the last renewal (lease 4 s): %+v", sc)
		}
		if sc := scope(t, h.At(t0.Add(15*time.Second)), "s"); sc.LeaderLive || sc.HasLeader() {
			t.Errorf("lease mode, 5 s after the last renewal: %+v", sc)
		}
	})
}
