package collector

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func TestConfig(t *testing.T) {
	d := DefaultConfig()
	if d.PollInterval != DefaultPollInterval || d.NoLeaderAfter != DefaultNoLeaderAfter || d.StaleMargin != DefaultStaleMargin ||
		d.SplitBrainGrace != DefaultSplitBrainGrace || d.StaleNodeAfter != DefaultStaleNodeAfter || d.FlapWindow != DefaultFlapWindow ||
		d.FlapMax != DefaultFlapMax || d.FenceAlertFor != DefaultFenceAlertFor || d.LockPressure != DefaultLockPressure ||
		d.CollectorDownAfter != DefaultCollectorDownAfter || d.RecentTerms != DefaultRecentTerms || d.EvictAfter != DefaultEvictAfter || d.TermsWindow != DefaultTermsWindow ||
		d.EvictStale != nil || d.Logger == nil {
		t.Fatalf("DefaultConfig() = %+v", d)
	}
	base := testConfig(t, "postgres://u@127.0.0.1:5432/db")
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"NoConnConfig", func(c *Config) { c.ConnConfig = nil }, "ConnConfig"},
		{"PollTooShort", func(c *Config) { c.PollInterval = time.Millisecond }, "PollInterval"},
		{"PollTooLong", func(c *Config) { c.PollInterval = 2 * time.Hour }, "PollInterval"},
		{"NegativeNoLeader", func(c *Config) { c.NoLeaderAfter = -time.Second }, "NoLeaderAfter"},
		{"NegativeGrace", func(c *Config) { c.SplitBrainGrace = -1 }, "SplitBrainGrace"},
		{"NegativeFlapMax", func(c *Config) { c.FlapMax = -1 }, "FlapMax"},
		{"PressureAboveTwo", func(c *Config) { c.LockPressure = 3 }, "LockPressure"},
		{"NegativePressure", func(c *Config) { c.LockPressure = -0.1 }, "LockPressure"},
		{"TooManyTerms", func(c *Config) { c.RecentTerms = MaxRecentTerms + 1 }, "RecentTerms"},
		{"NegativeEvictAfter", func(c *Config) { c.EvictAfter = -time.Second }, "EvictAfter"},
		{"NegativeTermsWindow", func(c *Config) { c.TermsWindow = -time.Second }, "TermsWindow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New: %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if c.PollInterval() != 50*time.Millisecond {
		t.Fatalf("PollInterval() = %v", c.PollInterval())
	}
	c.SetPollInterval(time.Nanosecond)
	if c.PollInterval() != MinPollInterval {
		t.Fatalf("SetPollInterval(1ns) gave %v, want the minimum %v", c.PollInterval(), MinPollInterval)
	}
	if c.Snapshot() != nil {
		t.Fatal("Snapshot() before any read is not nil")
	}
}

func TestSnapshot(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	n1 := testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
	n2 := testnode.Start(t, testnode.FastConfig(dsn, "n2", "s"))
	cfg := testConfig(t, dsn)
	cfg.Source = SourceModeNotify
	c := newCollector(t, cfg)
	run(t, c)
	s := waitSnap(t, c, "a leader of s", func(s *Snapshot) bool {
		sc, ok := s.Scope("s")
		return ok && sc.HasLeader() && len(sc.Followers) == 1
	})
	sc := scope(t, s, "s")
	leader, follower := n1, n2
	if sc.Leader == "n2" {
		leader, follower = n2, n1
	}
	// The snapshot can show the claim a moment before the claimer's gate opens.
	pgtest.WaitFor(t, sc.Leader+"'s gate open", wait, func() bool { return leader.Leads("s") })
	if follower.Leads("s") {
		t.Fatalf("snapshot says %s leads, the electors disagree", sc.Leader)
	}
	if sc.Followers[0] != follower.NodeID() || !slices.Equal(sc.LockPIDs, []int{sc.HolderPID}) || sc.Epoch != 1 ||
		sc.Verdict != VerdictOK || sc.OpenTerm == nil || sc.OpenTerm.Epoch != 1 || sc.LeaderHost == "" ||
		sc.Timing.TrustWindow != 300*time.Millisecond || sc.Timing.SessionLease != 500*time.Millisecond {
		t.Fatalf("scope %+v", sc)
	}
	if len(s.Nodes) != 2 || !s.Nodes[0].Live || !s.Nodes[1].Live || s.Nodes[0].ID != "n1" {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	if l, _ := s.Node(sc.Leader); l.Role("s") != RoleLeader {
		t.Fatalf("leader node %+v has role %q", l, l.Role("s"))
	}
	if len(s.Terms) != 1 || s.Terms[0].Holder != sc.Leader || !s.Terms[0].Open() {
		t.Fatalf("terms %+v", s.Terms)
	}
	h := s.Health
	if h.Source != SourceLive || h.ServerVersion == "" || !strings.Contains(h.Database, "@ 127.0.0.1:") || h.Polls == 0 || h.PollDuration <= 0 {
		t.Fatalf("health %+v", h)
	}
	if s.Locks.Capacity <= 0 || s.Locks.Advisory < 1 {
		t.Fatalf("locks %+v", s.Locks)
	}
	if len(s.Alerts) != 0 {
		t.Fatalf("alerts on a healthy cluster: %+v", s.Alerts)
	}

	// Poll through Run, and Poll without Run (a second collector).
	ps, err := c.Poll(context.Background())
	if err != nil || ps.Seq <= s.Seq {
		t.Fatalf("Poll while running: seq %v err %v", ps, err)
	}
	other := newCollector(t, testConfig(t, dsn))
	os, err := other.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if osc := scope(t, os, "s"); osc.Leader != sc.Leader || osc.Epoch != sc.Epoch || os.Health.Source != SourcePolling {
		t.Fatalf("standalone Poll: scope %+v, source %s", osc, os.Health.Source)
	}
	if other.Snapshot() != os {
		t.Fatal("standalone Poll did not publish its snapshot")
	}
	if err := other.Run(canceled()); err != nil {
		t.Fatalf("Run with a cancelled context: %v", err)
	}
	if err := other.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Run: %v, want ErrClosed", err)
	}
	if _, err := other.Poll(context.Background()); err != nil {
		t.Fatalf("Poll after Run returned: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
