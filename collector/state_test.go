package collector

import (
	"slices"
	"testing"
	"time"
)

// These tests drive state.apply with forged reads and a controlled clock: the
// timing rules (grace, thresholds, Since) without a database.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func unitConfig() *Config {
	c := DefaultConfig()
	c.SplitBrainGrace = 2 * time.Second
	c.NoLeaderAfter = 10 * time.Second
	return &c
}

// world is a forged database: one scope s led by n1 (pid 100) since t0.
type world struct {
	now   time.Time // database time
	scope scopeRow
	nodes []Node
	audit []auditRow
}

func newWorld() *world {
	return &world{
		now: t0.Add(time.Second),
		scope: scopeRow{Name: "s", Recorded: true, LockKey: 42, Epoch: 1, Holder: "n1", HolderPID: 100,
			AcquiredAt: t0, LastHeartbeat: t0.Add(time.Second), LockPIDs: []int{100},
			Timing: Timing{HeartbeatInterval: 500 * time.Millisecond, TrustWindow: 1500 * time.Millisecond, SessionLease: 2 * time.Second},
			Latest: &Term{ID: 1, Scope: "s", Epoch: 1, Holder: "n1", AcquiredAt: t0}, Changes: 1, MaxTermEpoch: 1},
		nodes: []Node{
			{ID: "n1", Hostname: "h1", StartedAt: t0, LastSeen: t0.Add(time.Second), Scopes: []string{"s"}, Leads: []string{"s"}},
			{ID: "n2", Hostname: "h2", StartedAt: t0, LastSeen: t0.Add(time.Second), Scopes: []string{"s"}, Leads: []string{}},
		},
	}
}

func (w *world) read() *dbRead {
	nodes := slices.Clone(w.nodes)
	for i := range nodes {
		nodes[i].Scopes, nodes[i].Leads = slices.Clone(nodes[i].Scopes), slices.Clone(nodes[i].Leads)
	}
	r := &dbRead{Now: w.now, Capacity: 6400, Advisory: 3, Used: 3, Scopes: []scopeRow{w.scope}, Nodes: nodes, Audit: w.audit}
	w.audit = nil
	return r
}

// step advances both clocks by d and applies a read.
func step(st *state, cfg *Config, w *world, d time.Duration) (*Snapshot, []Event) {
	w.now = w.now.Add(d)
	s, evs, _ := st.apply(cfg, w.read(), w.now, Health{Source: SourceLive})
	return s, evs
}

func hasAlert(s *Snapshot, kind AlertKind) bool {
	_, ok := alert(s, kind, "")
	return ok
}

func TestApplyGrace(t *testing.T) {
	cfg, st, w := unitConfig(), newState(), newWorld()
	s, _ := step(st, cfg, w, 0)
	if len(s.Alerts) != 0 || s.Scopes[0].Verdict != VerdictOK {
		t.Fatalf("healthy world: alerts %+v verdict %s", s.Alerts, s.Scopes[0].Verdict)
	}
	// A squatter (pid 200) holds the lock of the open term of pid 100: transient
	// (a claim in flight) for less than the grace, then persistent.
	w.scope.LockPIDs = []int{200}
	first := w.now.Add(100 * time.Millisecond)
	for range 20 { // seen at +0 … +1.9 s
		s, _ = step(st, cfg, w, 100*time.Millisecond)
		w.scope.LastHeartbeat = w.now
		if hasAlert(s, AlertSplitBrain) {
			t.Fatalf("split brain fired within the grace, at %v", w.now.Sub(first))
		}
	}
	s, evs := step(st, cfg, w, 100*time.Millisecond)
	a, ok := alert(s, AlertSplitBrain, "s")
	if !ok || !a.Since.Equal(first) || s.Scopes[0].Verdict != VerdictSplitBrain {
		t.Fatalf("after the grace: alert %+v (since want %v) verdict %s", a, first, s.Scopes[0].Verdict)
	}
	if !slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == EventAlertFiring && e.Alert.Kind == AlertSplitBrain }) {
		t.Fatalf("no firing event in %+v", evs)
	}
	s, _ = step(st, cfg, w, 100*time.Millisecond)
	if a2, _ := alert(s, AlertSplitBrain, "s"); !a2.Since.Equal(first) {
		t.Fatalf("Since changed from %v to %v", first, a2.Since)
	}
	// One read without the condition resets the grace.
	w.scope.LockPIDs = []int{100}
	s, evs = step(st, cfg, w, 100*time.Millisecond)
	if hasAlert(s, AlertSplitBrain) || !slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == EventAlertResolved }) {
		t.Fatalf("not resolved: %+v %+v", s.Alerts, evs)
	}
	w.scope.LockPIDs = []int{200}
	s, _ = step(st, cfg, w, 100*time.Millisecond)
	if hasAlert(s, AlertSplitBrain) {
		t.Fatal("a reappearing condition skipped the grace")
	}
}

// A crashed holder leaves its term open and its lock free, and its node row still
// lists the scope: that is no leader, never split brain.
func TestApplyCrashIsNoLeader(t *testing.T) {
	cfg, st, w := unitConfig(), newState(), newWorld()
	step(st, cfg, w, 0)
	w.scope.LockPIDs = nil // n1 died; no candidate claims (n2 is stuck, say)
	crashAt := w.now
	var s *Snapshot
	for range 120 { // 12 s
		s, _ = step(st, cfg, w, 100*time.Millisecond)
		if hasAlert(s, AlertSplitBrain) || hasAlert(s, AlertStaleLeader) {
			t.Fatalf("%v after the crash: %+v", w.now.Sub(crashAt), s.Alerts)
		}
		sc := s.Scopes[0]
		if sc.Verdict != VerdictNoLeader {
			t.Fatalf("verdict %s", sc.Verdict)
		}
		if fired := hasAlert(s, AlertNoLeader); fired != (sc.LeaderlessFor >= cfg.NoLeaderAfter) {
			t.Fatalf("no_leader fired=%v with leaderless for %v", fired, sc.LeaderlessFor)
		}
	}
	if !hasAlert(s, AlertNoLeader) {
		t.Fatal("no_leader never fired")
	}
	// The holder heartbeats again (it lives) and still lists the scope while
	// nobody holds the lock: (d) after the grace.
	var fired time.Time
	for range 40 {
		w.nodes[0].LastSeen = w.now.Add(50 * time.Millisecond)
		s, _ = step(st, cfg, w, 100*time.Millisecond)
		if hasAlert(s, AlertSplitBrain) && fired.IsZero() {
			fired = w.now
		}
	}
	if fired.IsZero() {
		t.Fatal("(d) never fired")
	}
}

func TestApplyLeaderlessSeed(t *testing.T) {
	cfg, st, w := unitConfig(), newState(), newWorld()
	// First sight: released 20 s ago (database time), candidates live.
	w.scope.Holder, w.scope.HolderPID, w.scope.LockPIDs = "", 0, nil
	w.scope.ReleasedAt = w.now.Add(-20 * time.Second)
	s, _ := step(st, cfg, w, 0)
	if sc := s.Scopes[0]; sc.LeaderlessFor != 20*time.Second || !hasAlert(s, AlertNoLeader) {
		t.Fatalf("leaderless for %v, alerts %+v", sc.LeaderlessFor, s.Alerts)
	}
	// Every candidate stopped cleanly: nobody is meant to lead.
	w.nodes[0].StoppedAt, w.nodes[1].StoppedAt = w.now, w.now
	s, _ = step(st, cfg, w, time.Second)
	if hasAlert(s, AlertNoLeader) || s.Scopes[0].Verdict != VerdictIdle {
		t.Fatalf("scope whose candidates all stopped: alerts %+v verdict %s, want no alert and IDLE", s.Alerts, s.Scopes[0].Verdict)
	}
}

func TestApplyChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(w *world, cfg *Config)
		kind  AlertKind
		node  string
		sever Severity
	}{
		{"EpochBelowTerms", func(w *world, _ *Config) { w.scope.Epoch, w.scope.MaxTermEpoch = 3, 4 }, AlertSplitBrain, "", SeverityCritical},
		{"StaleLeader", func(w *world, cfg *Config) {
			w.scope.LastHeartbeat = w.now.Add(-3 * time.Second)
			cfg.SplitBrainGrace = time.Nanosecond // fire at the second read (below)
		}, AlertStaleLeader, "n1", SeverityCritical},
		{"StaleNode", func(w *world, _ *Config) { w.nodes[1].LastSeen = w.now.Add(-time.Minute) }, AlertStaleNode, "n2", SeverityWarning},
		{"Flapping", func(w *world, _ *Config) { w.scope.Changes = 7 }, AlertFlapping, "", SeverityWarning},
		{"LockPressure", func(_ *world, cfg *Config) { cfg.LockPressure = 0.0001 }, AlertLockPressure, "", SeverityWarning},
		{"FenceRejected", func(w *world, _ *Config) {
			w.audit = []auditRow{{ID: 1, At: w.now, Scope: "s", Node: "zombie", Epoch: 1, Kind: "fence_rejected"}}
		}, AlertFenceRejected, "zombie", SeverityWarning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, st, w := unitConfig(), newState(), newWorld()
			tc.edit(w, cfg)
			s, _ := step(st, cfg, w, 0)
			since := w.now
			if tc.kind == AlertStaleLeader {
				if hasAlert(s, tc.kind) {
					t.Fatal("stale_leader skipped its grace")
				}
				s, _ = step(st, cfg, w, time.Millisecond)
			}
			a, ok := alert(s, tc.kind, "")
			if !ok || a.Node != tc.node || a.Severity != tc.sever || a.Summary == "" || a.Hint == "" ||
				a.Runbook != "docs/runbooks.md#"+string(tc.kind) || !a.Since.Equal(since) {
				t.Fatalf("alert %+v (found %v) in %+v", a, ok, s.Alerts)
			}
		})
	}
	t.Run("StaleLeaderThreshold", func(t *testing.T) {
		cfg, st, w := unitConfig(), newState(), newWorld()
		// W 1.5s + margin 1s: 2.4 s is not stale yet, 2.6 s is; then the grace.
		w.scope.LastHeartbeat = w.now.Add(-2400 * time.Millisecond)
		if s, _ := step(st, cfg, w, 0); hasAlert(s, AlertStaleLeader) || s.Scopes[0].Verdict != VerdictDegraded {
			t.Fatalf("2.4s: %+v verdict %s (a late heartbeat degrades)", s.Alerts, s.Scopes[0].Verdict)
		}
		for range 21 { // 2.5 s … 4.5 s: stale from 2.6 s (strictly above 2.5 s), within the grace
			if s, _ := step(st, cfg, w, 100*time.Millisecond); hasAlert(s, AlertStaleLeader) {
				t.Fatalf("stale_leader within the grace, heartbeat %v old", s.Scopes[0].HeartbeatAge)
			}
		}
		if s, _ := step(st, cfg, w, 100*time.Millisecond); !hasAlert(s, AlertStaleLeader) {
			t.Fatal("no stale_leader after the grace")
		}
		// The lock freed (the lease ended the session): resolved, now no leader.
		w.scope.LockPIDs = nil
		if s, _ := step(st, cfg, w, 100*time.Millisecond); hasAlert(s, AlertStaleLeader) {
			t.Fatal("stale_leader outlived the lock")
		}
	})
	t.Run("OtherNodeLeadsBeforeTerm", func(t *testing.T) {
		cfg, st, w := unitConfig(), newState(), newWorld()
		// n2's entry predates the term (it led before and froze): not counted.
		w.nodes[1].Leads, w.nodes[1].LastSeen = []string{"s"}, t0.Add(-time.Millisecond)
		for range 30 {
			if s, _ := step(st, cfg, w, 100*time.Millisecond); hasAlert(s, AlertSplitBrain) {
				t.Fatalf("stale leads entry counted: %+v", s.Alerts)
			}
		}
		w.nodes[1].LastSeen = w.now
		var s *Snapshot
		for range 25 {
			s, _ = step(st, cfg, w, 100*time.Millisecond)
		}
		if a, ok := alert(s, AlertSplitBrain, "s"); !ok || a.Node != "n2" {
			t.Fatalf("two leaders not reported: %+v", s.Alerts)
		}
	})
	t.Run("RegressionImmediateAndLasting", func(t *testing.T) {
		cfg, st, w := unitConfig(), newState(), newWorld()
		w.scope.Epoch, w.scope.MaxTermEpoch = 5, 5
		step(st, cfg, w, 0)
		w.scope.Epoch, w.scope.MaxTermEpoch = 2, 2 // a restored backup: terms too
		s, _ := step(st, cfg, w, 10*time.Millisecond)
		if !hasAlert(s, AlertSplitBrain) {
			t.Fatal("regression not immediate")
		}
		w.scope.Epoch = 4
		if s, _ = step(st, cfg, w, time.Second); !hasAlert(s, AlertSplitBrain) {
			t.Fatal("resolved below the highest epoch seen")
		}
		w.scope.Epoch = 5
		if s, _ = step(st, cfg, w, time.Second); hasAlert(s, AlertSplitBrain) {
			t.Fatal("not resolved at the highest epoch seen")
		}
	})
}

func TestApplyAuditOnce(t *testing.T) {
	cfg, st, w := unitConfig(), newState(), newWorld()
	row := func(id int64) auditRow {
		return auditRow{ID: id, At: w.now, Scope: "s", Node: "n1", Epoch: id, Kind: "elected"}
	}
	ids := func(evs []Event) []int64 {
		var out []int64
		for _, e := range evs {
			if e.AuditID != 0 {
				out = append(out, e.AuditID)
			}
		}
		return out
	}
	w.audit = []auditRow{row(1), row(2)}
	_, evs := step(st, cfg, w, 0)
	if got := ids(evs); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first read: %v", got)
	}
	st.lastAudit = 2 // as if the first read's snapshot ended at id 2
	w.audit = []auditRow{row(3), row(5)}
	_, evs = step(st, cfg, w, time.Millisecond)
	if got := ids(evs); !slices.Equal(got, []int64{3, 5}) || !slices.Equal(st.cursor(planPoll, false).missing, []int64{4}) {
		t.Fatalf("gap: %v, missing %v", got, st.cursor(planPoll, false).missing)
	}
	w.audit = []auditRow{row(3), row(4), row(5), row(6)} // 3 and 5 again must not repeat
	_, evs = step(st, cfg, w, time.Millisecond)
	if got := ids(evs); !slices.Equal(got, []int64{4, 6}) || len(st.cursor(planPoll, false).missing) != 0 {
		t.Fatalf("late row: %v, missing %v", got, st.cursor(planPoll, false).missing)
	}
	w.audit = []auditRow{row(8)}
	step(st, cfg, w, time.Millisecond)
	step(st, cfg, w, missingWait+time.Second)
	if len(st.cursor(planPoll, false).missing) != 0 {
		t.Fatalf("id 7 (rolled back) still looked for after %v", missingWait)
	}
}

// TestApplyAuditReset: rows that survive a reset of the audit table (a restore,
// a failover that lost the newest rows) are not delivered twice; rows after it
// are, whatever their ids.
func TestApplyAuditReset(t *testing.T) {
	cfg, st, w := unitConfig(), newState(), newWorld()
	row := func(id int64) auditRow {
		return auditRow{ID: id, At: w.now, Scope: "s", Node: "n1", Epoch: id, Kind: "fence_rejected"}
	}
	apply := func(maxID int64, rows ...auditRow) []Event {
		w.now = w.now.Add(time.Millisecond)
		r := w.read()
		r.Audit, r.MaxAuditID, r.Cursor = rows, maxID, st.cursor(planPoll, false)
		_, evs, _ := st.apply(cfg, r, w.now, Health{Source: SourceLive})
		return evs
	}
	type got struct {
		ids    []int64
		resets int
	}
	sum := func(evs []Event) got {
		var g got
		for _, e := range evs {
			if e.AuditID != 0 {
				g.ids = append(g.ids, e.AuditID)
			}
			if e.Kind == EventAuditReset {
				g.resets++
			}
		}
		return g
	}
	old := []auditRow{row(1), row(2), row(3)}
	if g := sum(apply(3, old...)); !slices.Equal(g.ids, []int64{1, 2, 3}) || g.resets != 0 {
		t.Fatalf("first read: %+v", g)
	}
	w.now = w.now.Add(time.Second)
	if g := sum(apply(5, row(4), row(5))); !slices.Equal(g.ids, []int64{4, 5}) || g.resets != 0 {
		t.Fatalf("second read: %+v", g)
	}
	// Rows 4 and 5 are gone: the newest id is 3, below the 5 read before.
	if g := sum(apply(3)); len(g.ids) != 0 || g.resets != 1 || !st.auditReread {
		t.Fatalf("read after the reset: %+v, read again %v", g, st.auditReread)
	}
	// The replay shows the survivors 1–3 (delivered) and a new row 4.
	w.now = w.now.Add(time.Second)
	if g := sum(apply(4, append(old, row(4))...)); !slices.Equal(g.ids, []int64{4}) || g.resets != 0 || st.auditReread {
		t.Fatalf("replay: %+v, read again %v", g, st.auditReread)
	}
	if g := sum(apply(6, row(5), row(6))); !slices.Equal(g.ids, []int64{5, 6}) || g.resets != 0 {
		t.Fatalf("after the replay: %+v", g)
	}
	if n := st.fenceCount["s"]; n != 8 {
		t.Fatalf("fence_rejected counted %d times, want 8 (5 before the reset, 3 after)", n)
	}
}
