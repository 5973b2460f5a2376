package tui

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestEvictConfirm(t *testing.T) {
	m, b := setup(t, healthySnapshot())

	keys(m, "x")
	if m.mode.overlay != overlayConfirm || !strings.Contains(screen(m), "Evict the leader of billing?") {
		t.Fatal("x does not ask for confirmation")
	}
	if cmd := keys(m, "n"); cmd != nil {
		t.Fatal("n returned a command")
	}
	if m.mode.overlay == overlayConfirm || len(b.actions.calls) != 0 {
		t.Fatalf("n: confirm=%v calls=%v", m.mode.confirm, b.actions.calls)
	}
	keys(m, "x")
	if cmd := keys(m, "enter"); cmd != nil || len(b.actions.calls) != 0 {
		t.Fatal("enter is not a yes")
	}

	keys(m, "down", "x") // reports, led by node-b
	runCmd(t, m, keys(m, "y"))
	if want := []evictCall{{"reports", "operator eviction from pgleader top"}}; !slices.Equal(b.actions.calls, want) {
		t.Fatalf("Evict calls %v, want %v", b.actions.calls, want)
	}
	last := m.events.entries[len(m.events.entries)-1]
	if last.ev.Kind != eventAction || !strings.Contains(last.line, "evicted node-b, leader of reports") {
		t.Fatalf("log entry %+v", last)
	}

	// An error reaches the log and the status line.
	b.actions.err = errors.New("permission denied to terminate process")
	keys(m, "x")
	runCmd(t, m, keys(m, "Y"))
	if !strings.Contains(screen(m), "permission denied") {
		t.Error("the eviction error is not shown")
	}
}

func TestEvictGuards(t *testing.T) {
	t.Run("LeaderChangedWhileAsking", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "x")
		next := healthySnapshot()
		next.Seq = 101
		next.Scopes[0].Leader = "node-c"
		m.Update(snapshotMsg{next})
		if cmd := keys(m, "y"); cmd != nil || len(b.actions.calls) != 0 {
			t.Fatal("evicted a leader the operator did not confirm")
		}
		if !strings.Contains(screen(m), "not evicting: billing is now led by node-c, not node-a") {
			t.Fatalf("no explanation:\n%s", screen(m))
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Actions = nil })
		keys(m, "x")
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "read-only") {
			t.Fatal("x without Actions must explain read-only mode")
		}
		keys(m, "?")
		if s := screen(m); strings.Contains(s, "evict: terminate") || strings.Contains(s, "resign the leader") {
			t.Error("help lists the actions in read-only mode")
		}
	})
	t.Run("NoLeader", func(t *testing.T) {
		m, b := setup(t, troubleSnapshot())
		keys(m, "down", "x") // reports has no leader
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "reports has no leader") {
			t.Fatal("x on a leaderless scope must say so")
		}
		if len(b.actions.calls) != 0 {
			t.Fatal("Evict called")
		}
	})
	t.Run("FromDetail", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "down", "enter", "x")
		runCmd(t, m, keys(m, "y"))
		if len(b.actions.calls) != 1 || b.actions.calls[0].scope != "reports" {
			t.Fatalf("calls %v", b.actions.calls)
		}
	})
}

func TestResignConfirm(t *testing.T) {
	m, b := setup(t, healthySnapshot())

	keys(m, "R")
	s := screen(m)
	if m.mode.overlay != overlayConfirm || m.mode.confirm.kind != actionResign || !strings.Contains(s, "Resign the leader of billing?") ||
		!strings.Contains(s, "Asks node-a through the database to hand billing over") || !strings.Contains(s, "y resign") {
		t.Fatalf("R does not ask for confirmation of a resign:\n%s", s)
	}
	if strings.Contains(s, "Evict") || strings.Contains(s, "Terminates") {
		t.Fatalf("the resign question reads like an eviction:\n%s", s)
	}
	if cmd := keys(m, "N"); cmd != nil {
		t.Fatal("N returned a command")
	}
	if m.mode.overlay == overlayConfirm || len(b.actions.resignCalls()) != 0 || !strings.Contains(screen(m), "resign billing cancelled") {
		t.Fatalf("N: confirm=%v calls=%v", m.mode.confirm, b.actions.resignCalls())
	}

	keys(m, "down", "R") // reports, led by node-b
	runCmd(t, m, keys(m, "y"))
	if want := []evictCall{{"reports", "operator resign from pgleader top"}}; !slices.Equal(b.actions.resignCalls(), want) {
		t.Fatalf("Resign calls %v, want %v", b.actions.resignCalls(), want)
	}
	if len(b.actions.calls) != 0 {
		t.Fatalf("a resign evicted: %v", b.actions.calls)
	}
	last := m.events.entries[len(m.events.entries)-1]
	if last.ev.Kind != eventAction || !strings.Contains(last.line, "asked node-b, leader of reports (epoch 7), to resign") {
		t.Fatalf("log entry %+v", last)
	}

	// An error reaches the log and the status line.
	b.actions.err = errors.New("collector: holder changed: reports is now held by node-c")
	keys(m, "R")
	runCmd(t, m, keys(m, "Y"))
	if s := screen(m); !strings.Contains(s, "holder changed") {
		t.Errorf("the resign error is not shown:\n%s", s)
	}
	if last := m.events.entries[len(m.events.entries)-1]; !strings.Contains(last.line, "resign node-b of reports: error:") || last.tone != toneBad {
		t.Errorf("log entry %+v", last)
	}
}

func TestResignGuards(t *testing.T) {
	t.Run("LeaderChangedWhileAsking", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "R")
		next := healthySnapshot()
		next.Seq = 101
		next.Scopes[0].Leader = "node-c"
		m.Update(snapshotMsg{next})
		if cmd := keys(m, "y"); cmd != nil || len(b.actions.resignCalls()) != 0 {
			t.Fatal("asked a leader the operator did not confirm to resign")
		}
		if !strings.Contains(screen(m), "not resigning: billing is now led by node-c, not node-a; press R again") {
			t.Fatalf("no explanation:\n%s", screen(m))
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Actions = nil })
		keys(m, "R")
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "read-only: start with --allow-actions to resign a leader") {
			t.Fatal("R without Actions must explain read-only mode")
		}
		if strings.Contains(screen(m), "R resign") {
			t.Error("the footer offers R in read-only mode")
		}
	})
	t.Run("NoLeader", func(t *testing.T) {
		m, b := setup(t, troubleSnapshot())
		keys(m, "down", "R") // reports has no leader
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "reports has no leader to resign") {
			t.Fatal("R on a leaderless scope must say so")
		}
		if len(b.actions.resignCalls()) != 0 {
			t.Fatal("Resign called")
		}
	})
	t.Run("FromDetail", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "down", "enter", "R")
		runCmd(t, m, keys(m, "y"))
		if calls := b.actions.resignCalls(); len(calls) != 1 || calls[0].scope != "reports" {
			t.Fatalf("calls %v", calls)
		}
	})
	t.Run("NotRefresh", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		if cmd := keys(m, "R"); cmd != nil {
			t.Fatal("R returned a command before the answer")
		}
		b.feed.mu.Lock()
		refreshes := b.feed.refreshes
		b.feed.mu.Unlock()
		if m.mode.overlay != overlayConfirm || refreshes != 0 {
			t.Fatalf("R: confirm=%v refreshes=%d", m.mode.confirm, refreshes)
		}
	})
	t.Run("Help", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot())
		if s := screen(m); !strings.Contains(s, "R resign") || !strings.Contains(s, "x evict") {
			t.Errorf("footer lacks the actions:\n%s", s)
		}
		keys(m, "?")
		typed(m, "gracefully")
		if s := screen(m); !strings.Contains(s, "R resign the leader gracefully") {
			t.Fatalf("help search 'gracefully':\n%s", s)
		}
	})
}

func TestFaultKeys(t *testing.T) {
	m, b := setup(t, healthySnapshot(), func(o *Options) {
		o.Faults = &fakeFaults{keys: []FaultKey{{Key: "K", Help: "kill -9 leader"}, {Key: "s", Help: "SIGSTOP leader"}}}
	})
	b.faults = m.opts.Faults.(*fakeFaults)

	keys(m, "down")
	runCmd(t, m, keys(m, "K"))
	if want := []faultCall{{"K", "reports"}}; !slices.Equal(b.faults.calls, want) {
		t.Fatalf("Do calls %v, want %v", b.faults.calls, want)
	}
	var lines []string
	for _, e := range m.events.entries {
		lines = append(lines, e.line)
	}
	log := strings.Join(lines, "\n")
	if !strings.Contains(log, "» fault") || !strings.Contains(log, "sent SIGKILL to the leader of reports") {
		t.Fatalf("fault result not logged:\n%s", log)
	}
	// "s" is the sort key: the fault is refused and said so.
	if !strings.Contains(log, `fault key "s" (SIGSTOP leader) ignored`) {
		t.Errorf("colliding fault key not reported:\n%s", log)
	}
	if cmd := keys(m, "s"); cmd != nil || len(b.faults.calls) != 1 {
		t.Fatal("s ran a fault")
	}
	if !strings.Contains(screen(m), "K faults") {
		t.Error("the fault key is not in the footer")
	}
}

func TestHandoverConfirm(t *testing.T) {
	m, b := setup(t, handoverSnapshot())

	keys(m, "O") // billing: node-c has the highest priority among its followers
	s := screen(m)
	if m.mode.overlay != overlayConfirm || m.mode.confirm.kind != actionHandover || m.mode.confirm.target != "node-c" ||
		!strings.Contains(s, "Hand billing over to node-c?") || !strings.Contains(s, "Asks node-a through the database to hand billing to") ||
		!strings.Contains(s, "priority 2") || !strings.Contains(s, "y hand over") {
		t.Fatalf("O does not ask to hand billing over to node-c:\n%s", s)
	}
	if cmd := keys(m, "n"); cmd != nil || m.mode.overlay == overlayConfirm || len(b.actions.handoverCalls()) != 0 ||
		!strings.Contains(screen(m), "hand over billing cancelled") {
		t.Fatalf("n: confirm=%v calls=%v", m.mode.confirm, b.actions.handoverCalls())
	}

	keys(m, "O")
	runCmd(t, m, keys(m, "y"))
	if want := []handoverCall{{"billing", "node-c", "pgleader top"}}; !slices.Equal(b.actions.handoverCalls(), want) {
		t.Fatalf("Handover calls %v, want %v", b.actions.handoverCalls(), want)
	}
	if len(b.actions.calls) != 0 || len(b.actions.resignCalls()) != 0 {
		t.Fatal("a handover evicted or resigned")
	}
	last := m.events.entries[len(m.events.entries)-1]
	if last.ev.Kind != eventAction || !strings.Contains(last.line, "handed billing over to node-c (was led by node-a at epoch 42)") {
		t.Fatalf("log entry %+v", last)
	}

	// Equal priorities: the first by node id.
	m, b = setup(t, healthySnapshot())
	keys(m, "O")
	if m.mode.overlay != overlayConfirm || m.mode.confirm.target != "node-b" {
		t.Fatalf("equal priorities: confirm %+v, want node-b", m.mode.confirm)
	}

	// An error (the database refused) reaches the log and the status line.
	b.actions.err = errors.New("collector: handover refused: node node-b resigned scope billing and cools down")
	runCmd(t, m, keys(m, "y"))
	if s := screen(m); !strings.Contains(s, "cools down") {
		t.Errorf("the handover error is not shown:\n%s", s)
	}
	if last := m.events.entries[len(m.events.entries)-1]; !strings.Contains(last.line, "hand billing over to node-b: error:") || last.tone != toneBad {
		t.Errorf("log entry %+v", last)
	}
}

func TestHandoverGuards(t *testing.T) {
	t.Run("NoneEligible", func(t *testing.T) {
		m, _ := setup(t, handoverSnapshot())
		keys(m, "end", "O") // archive: IDLE, no follower
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "not handing archive over: no follower is eligible") {
			t.Fatalf("O without an eligible follower must refuse without asking:\n%s", screen(m))
		}
		s := handoverSnapshot()
		s.Scopes[1].Followers = []string{"node-d"} // billing: only the priority-0 node
		m, b := setup(t, s)
		keys(m, "O")
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "not handing billing over: no follower is eligible") {
			t.Fatalf("a priority-0 follower is not a target:\n%s", screen(m))
		}
		if len(b.actions.handoverCalls()) != 0 {
			t.Fatal("Handover called")
		}
	})
	t.Run("NoLeader", func(t *testing.T) {
		m, b := setup(t, troubleSnapshot())
		keys(m, "down", "O") // reports has no leader; node-a follows it
		if s := screen(m); m.mode.overlay != overlayConfirm || !strings.Contains(s, "Hand reports over to node-a?") ||
			!strings.Contains(s, "reports has no leader: reserves it for node-a") {
			t.Fatalf("O on a leaderless scope with a follower asks to reserve it:\n%s", s)
		}
		runCmd(t, m, keys(m, "y"))
		if want := []handoverCall{{"reports", "node-a", "pgleader top"}}; !slices.Equal(b.actions.handoverCalls(), want) {
			t.Fatalf("Handover calls %v, want %v", b.actions.handoverCalls(), want)
		}
		if last := m.events.entries[len(m.events.entries)-1]; !strings.Contains(last.line, "handed reports, which had no leader, to node-a") {
			t.Fatalf("log entry %+v", last)
		}
	})
	t.Run("TargetNoLongerEligible", func(t *testing.T) {
		m, b := setup(t, handoverSnapshot())
		keys(m, "O")
		next := handoverSnapshot()
		next.Seq = 104
		next.Nodes[2].Priority = 0 // node-c restarted with priority 0
		m.Update(snapshotMsg{next})
		if cmd := keys(m, "y"); cmd != nil || len(b.actions.handoverCalls()) != 0 {
			t.Fatal("handed over to a node that is no longer eligible")
		}
		if !strings.Contains(screen(m), "not handing over: node-c is no longer an eligible follower of billing; press O again") {
			t.Fatalf("no explanation:\n%s", screen(m))
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := setup(t, healthySnapshot(), func(o *Options) { o.Actions = nil })
		keys(m, "O")
		if m.mode.overlay == overlayConfirm || !strings.Contains(screen(m), "read-only: start with --allow-actions to hand over a scope") {
			t.Fatal("O without Actions must explain read-only mode")
		}
		if strings.Contains(screen(m), "O handover") {
			t.Error("the footer offers O in read-only mode")
		}
	})
	t.Run("FromDetail", func(t *testing.T) {
		m, b := setup(t, healthySnapshot())
		keys(m, "down", "enter", "O")
		runCmd(t, m, keys(m, "y"))
		if calls := b.actions.handoverCalls(); len(calls) != 1 || calls[0].scope != "reports" || calls[0].to != "node-a" {
			t.Fatalf("calls %v", calls)
		}
	})
}
