package checker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/history"
)

// Hand-made histories. Times are in milliseconds: an event at ms has mono_ns ms·10⁶,
// a database timestamp at ms is t0 + ms. Every record is of scope "s" unless built
// with inScope.

const scope = "s"

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func mono(ms int64) int64 { return ms * int64(time.Millisecond) }
func wallAt(ms int64) time.Time {
	return t0.Add(time.Duration(ms) * time.Millisecond)
}

func ev(ms int64, node, event string, epoch int64) eventlog.Record {
	return eventlog.Record{MonoNS: mono(ms), Node: node, Scope: scope, Event: event, Epoch: epoch}
}

func acquired(ms int64, node string, epoch int64) eventlog.Record {
	return ev(ms, node, "acquired", epoch)
}

func gateOpen(ms int64, node string, epoch, untilMS int64) eventlog.Record {
	r := ev(ms, node, "gate_open", epoch)
	r.TrustUntilMonoNS = mono(untilMS)
	return r
}

func heartbeat(ms int64, node string, epoch, untilMS int64) eventlog.Record {
	r := ev(ms, node, "heartbeat_ok", epoch)
	r.TrustUntilMonoNS = mono(untilMS)
	return r
}

func gateClosed(ms int64, node string, epoch int64, reason string) eventlog.Record {
	r := ev(ms, node, "gate_closed", epoch)
	r.Reason = reason
	return r
}

func exit(ms int64, node string) eventlog.Record {
	return eventlog.Record{MonoNS: mono(ms), Node: node, Event: history.ProcessExit}
}

func action(ms int64, kind eventlog.ActionKind, node string, epoch int64, id string) eventlog.Record {
	r := ev(ms, node, string(kind), epoch)
	r.RequestID = id
	return r
}

func inScope(s string, r eventlog.Record) eventlog.Record { r.Scope = s; return r }

func term(epoch int64, holder string, ms int64) Term {
	return Term{Scope: scope, Epoch: epoch, Holder: holder, AcquiredAt: wallAt(ms)}
}

func write(epoch int64, node, id string, ms int64) Write {
	return Write{Scope: scope, Epoch: epoch, Node: node, RequestID: id, At: wallAt(ms)}
}

func fault(kind, node string, startMS, endMS int64) Fault {
	return Fault{Kind: kind, Node: node, StartMono: mono(startMS), EndMono: mono(endMS)}
}

// hist assembles a history of scope "s" ending at endMS.
func hist(endMS int64, events []eventlog.Record, terms []Term, writes []Write, faults ...Fault) History {
	events = slices.Clone(events)
	eventlog.SortByMono(events)
	return History{Scopes: []string{scope}, Events: events, Terms: terms, Writes: writes, Faults: faults, EndMono: mono(endMS)}
}

// handover: a leads epoch 1, resigns at 200; b takes over with epoch 2 at 206.
func handover() History {
	return hist(300, []eventlog.Record{
		acquired(0, "a", 1),
		gateOpen(1, "a", 1, 501),
		action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		heartbeat(100, "a", 1, 600),
		action(110, eventlog.ActionOK, "a", 1, "a:s:2"),
		gateClosed(200, "a", 1, "resigned"),
		ev(201, "a", "resigned", 1),
		acquired(205, "b", 2),
		gateOpen(206, "b", 2, 706),
		action(220, eventlog.ActionOK, "b", 2, "b:s:1"),
	}, []Term{term(1, "a", 0), term(2, "b", 205)},
		[]Write{write(1, "a", "a:s:1", 9), write(1, "a", "a:s:2", 109), write(2, "b", "b:s:1", 219)})
}

// crash: a is killed at 100 (its last write's outcome unknown); b takes over at 150.
func crash(unknownLanded bool) History {
	writes := []Write{write(1, "a", "a:s:1", 9), write(2, "b", "b:s:1", 160)}
	if unknownLanded {
		writes = append(writes, write(1, "a", "a:s:2", 99))
	}
	h := hist(300, []eventlog.Record{
		acquired(0, "a", 1),
		gateOpen(1, "a", 1, 501),
		action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		action(99, eventlog.ActionUnknown, "a", 1, "a:s:2"),
		exit(100, "a"),
		acquired(149, "b", 2),
		gateOpen(150, "b", 2, 650),
		action(161, eventlog.ActionOK, "b", 2, "b:s:1"),
	}, []Term{term(1, "a", 0), term(2, "b", 149)}, writes, fault("kill", "a", 100, 100))
	return h
}

// frozen: a is stopped at 100 (trust until 500) in the middle of an action, b takes
// over at 801, a resumes at 1000 and its write is refused by the fence.
func frozen() History {
	return hist(1200, []eventlog.Record{
		acquired(0, "a", 1),
		gateOpen(1, "a", 1, 501),
		action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		action(99, eventlog.ActionPaused, "a", 1, "a:s:2"),
		acquired(800, "b", 2),
		gateOpen(801, "b", 2, 1301),
		action(810, eventlog.ActionOK, "b", 2, "b:s:1"),
		gateClosed(1000, "a", 1, "trust_expired"),
		action(1001, eventlog.ActionRejected, "a", 1, "a:s:2"),
	}, []Term{term(1, "a", 0), term(2, "b", 800)},
		[]Write{write(1, "a", "a:s:1", 9), write(2, "b", "b:s:1", 809)},
		fault("sigstop", "a", 100, 1000))
}

func rules(r Report) []string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Rule)
	}
	return out
}

func TestCorrectHistoriesPass(t *testing.T) {
	cases := []struct {
		name   string
		h      History
		expect Footprint
	}{
		{"CleanHandover", handover(), Footprint{}},
		{"CrashTakeover", crash(false), Footprint{Takeover: true, FaultApplied: true}},
		{"UnknownWriteLanded", crash(true), Footprint{Takeover: true, FaultApplied: true}},
		{"RejectedStaleWrite", frozen(), Footprint{Takeover: true, FaultApplied: true, StaleRejected: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h, tc.expect)
			if !r.OK() {
				t.Fatalf("want OK, got %v", r)
			}
			if r.Figures.GateOverlap != 0 || r.Figures.StaleAccepted != 0 {
				t.Fatalf("figures %+v", r.Figures)
			}
		})
	}
}

func TestViolations(t *testing.T) {
	cases := []struct {
		name   string
		h      History
		rule   string
		detail string // a substring of the violation's detail
	}{
		{"EpochRegressesInEvents", hist(300, []eventlog.Record{
			acquired(100, "b", 34), gateOpen(101, "b", 34, 600), gateClosed(150, "b", 34, "resigned"),
			acquired(200, "a", 33), gateOpen(201, "a", 33, 700),
		}, []Term{term(34, "b", 100), term(33, "a", 200)}, nil), "H2", "33 acquired after 34"},
		{"EpochRegressesInTermsOnly", hist(300, nil,
			[]Term{term(34, "b", 100), term(33, "a", 200)}, nil), "H2", "33 acquired after 34 in pgleader.terms"},
		{"EpochGrantedTwiceInEvents", hist(300, []eventlog.Record{
			acquired(0, "a", 5), acquired(10, "b", 5),
		}, []Term{term(5, "a", 0)}, nil), "H1", "epoch 5 acquired by 2 nodes"},
		{"EpochGrantedTwiceInTerms", hist(300, nil,
			[]Term{term(5, "a", 0), term(5, "b", 10)}, nil), "H1", "epoch 5 granted 2 times"},
		{"AcquiredByAnotherThanHolder", hist(300, []eventlog.Record{acquired(0, "b", 5)},
			[]Term{term(5, "a", 0)}, nil), "H1", "grants it to a"},
		{"LostAcknowledgedWrite", hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 500), action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0)}, nil), "H5", "acknowledged write a:s:1"},
		{"DuplicatedAcknowledgedWrite", hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 500), action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0)}, []Write{write(1, "a", "a:s:1", 9), write(1, "a", "a:s:1", 9)}), "H5", "has 2 rows"},
		{"RejectedWriteHasRow", hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 500), action(10, eventlog.ActionRejected, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0)}, []Write{write(1, "a", "a:s:1", 9)}), "H5", "rejected write a:s:1"},
		{"UnknownWriteTwice", hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 500), action(10, eventlog.ActionUnknown, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0)}, []Write{write(1, "a", "a:s:1", 9), write(1, "a", "a:s:1", 9)}), "H5", "has 2 rows"},
		{"AcknowledgedUnderAnotherEpoch", hist(300, []eventlog.Record{
			action(110, eventlog.ActionOK, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0), term(2, "a", 100)}, []Write{write(2, "a", "a:s:1", 109)}), "H5", "its row has scope s, epoch 2"},
		{"WriteByNonHolder", hist(300, nil,
			[]Term{term(1, "a", 0)}, []Write{write(1, "b", "b:s:1", 50)}), "H4", "made by b, but the holder of epoch 1 is a"},
		{"WriteAfterSuccessorAcquired", hist(300, nil,
			[]Term{term(1, "a", 0), term(2, "b", 100)}, []Write{write(1, "a", "a:s:1", 103)}), "H3", "stale epoch"},
		{"WriteAfterLaterSuccessorAcquired", hist(300, nil, // epoch 2 never recorded: epoch 3 bounds epoch 1
			[]Term{term(1, "a", 0), term(3, "b", 100)}, []Write{write(1, "a", "a:s:1", 103)}), "H3", "epoch 3 was acquired"},
		{"WriteBeforeItsTerm", hist(300, nil,
			[]Term{term(1, "a", 0), term(2, "b", 100)}, []Write{write(2, "b", "b:s:1", 50)}), "H3", "acquired only later"},
		{"WriteWithoutTerm", hist(300, nil,
			[]Term{term(1, "a", 0)}, []Write{write(7, "a", "a:s:1", 50)}), "H3", "never granted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h, Footprint{})
			if r.OK() {
				t.Fatalf("want a %s violation, got OK", tc.rule)
			}
			for _, v := range r.Violations {
				if v.Rule != tc.rule {
					t.Errorf("unexpected %v", v)
				}
			}
			if !slices.ContainsFunc(r.Violations, func(v Violation) bool {
				return v.Rule == tc.rule && v.Scope == scope && strings.Contains(v.Detail, tc.detail)
			}) {
				t.Fatalf("want %s with %q, got %v", tc.rule, tc.detail, r)
			}
		})
	}
}

func TestStaleAcceptedCountsH3(t *testing.T) {
	r := Check(hist(300, nil, []Term{term(1, "a", 0), term(2, "b", 100)},
		[]Write{write(1, "a", "a:s:1", 99), write(1, "a", "a:s:2", 100), write(1, "a", "a:s:3", 150)}), Footprint{})
	if got := rules(r); !slices.Equal(got, []string{"H3", "H3"}) || r.Figures.StaleAccepted != 2 {
		t.Fatalf("rules %v, stale accepted %d: %v", got, r.Figures.StaleAccepted, r)
	}
}

func TestUnreportedRowIsFine(t *testing.T) {
	h := handover()
	h.Writes = append(h.Writes, write(2, "b", "b:s:2", 250)) // b died before reporting
	if r := Check(h, Footprint{}); !r.OK() {
		t.Fatal(r)
	}
}

func TestGateOverlap(t *testing.T) {
	// a's trust runs to 500 (it is frozen and cannot close); b opens at 300.
	h := hist(1000, []eventlog.Record{
		acquired(0, "a", 1), gateOpen(1, "a", 1, 500),
		acquired(299, "b", 2), gateOpen(300, "b", 2, 800),
		gateClosed(900, "a", 1, "trust_expired"),
	}, []Term{term(1, "a", 0), term(2, "b", 299)}, nil, fault("sigstop", "a", 100, 900))
	r := Check(h, Footprint{})
	if r.Figures.GateOverlap != 200*time.Millisecond {
		t.Fatalf("overlap %v, want 200ms", r.Figures.GateOverlap)
	}
	if len(r.Violations) != 0 {
		t.Fatalf("an overlap is a figure, not a violation: %v", r)
	}
}

func TestVacuity(t *testing.T) {
	// A follower is killed: the leader keeps leading.
	noTakeover := hist(1000, []eventlog.Record{
		acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
		heartbeat(400, "a", 1, 900), heartbeat(800, "a", 1, 1300),
		exit(300, "c"),
	}, []Term{term(1, "a", 0)}, nil, fault("kill", "c", 300, 300))
	// A primary failover ends a's session; a wins again, in a new term.
	sameNodeAgain := hist(1000, []eventlog.Record{
		acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
		gateClosed(300, "a", 1, "lost_connection"),
		acquired(420, "a", 2), gateOpen(421, "a", 2, 921),
	}, []Term{term(1, "a", 0), term(2, "a", 420)}, nil, fault("pg-failover", "primary", 300, 300))

	cases := []struct {
		name    string
		h       History
		expect  Footprint
		missing string // substring of the one missing footprint; "" for OK
	}{
		{"TakeoverExpectedButNone", noTakeover, Footprint{Takeover: true, FaultApplied: true}, "Takeover expected"},
		{"NoTransitionMet", noTakeover, Footprint{NoTransition: true, FaultApplied: true}, ""},
		{"NoTransitionButTakeover", crash(false), Footprint{NoTransition: true}, "NoTransition expected, but leadership moved"},
		{"StaleRejectedExpectedButNone", crash(false), Footprint{StaleRejected: true}, "StaleRejected expected"},
		{"FaultExpectedButNone", handover(), Footprint{FaultApplied: true}, "FaultApplied expected"},
		{"ResumedExpectedButNone", noTakeover, Footprint{Resumed: true, FaultApplied: true}, "Resumed expected"},
		{"ResumedBySameNode", sameNodeAgain, Footprint{Resumed: true, FaultApplied: true}, ""},
		{"ResumedBySameNodeIsNoTakeover", sameNodeAgain, Footprint{Takeover: true, FaultApplied: true}, "Takeover expected"},
		{"TakeoverBeforeTheFaultDoesNotCount", func() History {
			h := handover()
			h.Faults = []Fault{fault("kill", "b", 250, 250)}
			return h
		}(), Footprint{Takeover: true}, "Takeover expected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h, tc.expect)
			if len(r.Violations) != 0 {
				t.Fatalf("unexpected violations: %v", r)
			}
			if tc.missing == "" {
				if !r.OK() {
					t.Fatalf("want OK: %v", r)
				}
				return
			}
			if r.OK() || len(r.Missing) != 1 || !strings.Contains(r.Missing[0], tc.missing) {
				t.Fatalf("want one missing footprint %q, got %v", tc.missing, r)
			}
		})
	}
}

func TestRecordsAfterEndMono(t *testing.T) {
	// The runner stamped EndMono at 1000, then killed the nodes one by one: b took
	// over from the dead a before it was killed too.
	h := hist(1000, []eventlog.Record{
		acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
		heartbeat(400, "a", 1, 900), heartbeat(800, "a", 1, 1300),
		action(900, eventlog.ActionOK, "a", 1, "a:s:1"),
		exit(1010, "a"),
		acquired(1011, "b", 2), gateOpen(1012, "b", 2, 1512),
		action(1013, eventlog.ActionOK, "b", 2, "b:s:1"),
		exit(1020, "b"),
	}, []Term{term(1, "a", 0), term(2, "b", 1011)}, []Write{write(1, "a", "a:s:1", 899)},
		fault("sigstop", "a", 300, 350))
	r := Check(h, Footprint{NoTransition: true, FaultApplied: true})
	if len(r.Missing) != 0 || r.Figures.Transitions != 1 || r.Figures.Leaderless != 0 {
		t.Fatalf("the shutdown's handover counted: %v %+v", r, r.Figures)
	}
	// Safety still sees every record: b's acknowledged write has no row.
	if got := rules(r); !slices.Equal(got, []string{"H5"}) || r.Figures.Acked != 2 {
		t.Fatalf("rules %v, acked %d: %v", got, r.Figures.Acked, r)
	}

	// Without EndMono, the run ends with its last record.
	h.EndMono = 0
	r = Check(h, Footprint{NoTransition: true})
	if len(r.Missing) != 1 || r.Figures.Transitions != 2 {
		t.Fatalf("%v %+v", r, r.Figures)
	}
}

func TestReopenInSameTermIsNoTransition(t *testing.T) {
	// A latency fault below the heartbeat timeout: a's gate closes and reopens in
	// epoch 1; nobody else leads.
	h := hist(1000, []eventlog.Record{
		acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
		gateClosed(501, "a", 1, "trust_expired"),
		gateOpen(520, "a", 1, 1020),
	}, []Term{term(1, "a", 0)}, nil, fault("latency", "a", 300, 600))
	r := Check(h, Footprint{NoTransition: true, FaultApplied: true})
	if !r.OK() || r.Figures.Transitions != 1 {
		t.Fatalf("transitions %d: %v", r.Figures.Transitions, r)
	}
	if want := 19 * time.Millisecond; r.Figures.Leaderless != want {
		t.Fatalf("leaderless %v, want %v", r.Figures.Leaderless, want)
	}
}

func TestFigures(t *testing.T) {
	t.Run("FailoverFromFault", func(t *testing.T) {
		h := hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
			exit(100, "a"),
			acquired(111, "b", 2), gateOpen(112, "b", 2, 612),
		}, []Term{term(1, "a", 0), term(2, "b", 111)}, nil, fault("kill", "a", 100, 100))
		f := Check(h, Footprint{}).Figures
		if !slices.Equal(f.Failovers, []time.Duration{12 * time.Millisecond}) {
			t.Fatalf("failovers %v, want [12ms]", f.Failovers)
		}
		if !slices.Equal(f.Detections, []time.Duration{0}) {
			t.Fatalf("detections %v, want [0s] (process_exit stamped at the kill)", f.Detections)
		}
		if f.Leaderless != 12*time.Millisecond { // exit at 100 → gate_open at 112
			t.Fatalf("leaderless %v", f.Leaderless)
		}
		if f.Transitions != 2 {
			t.Fatalf("transitions %d", f.Transitions)
		}
		if want := 2 / (float64(mono(300)) / float64(time.Minute)); f.TransitionsPerMin != want {
			t.Fatalf("transitions per minute %v, want %v", f.TransitionsPerMin, want)
		}
	})
	t.Run("FailoverFromGateEndWithoutFault", func(t *testing.T) {
		f := Check(handover(), Footprint{}).Figures
		if !slices.Equal(f.Failovers, []time.Duration{6 * time.Millisecond}) {
			t.Fatalf("failovers %v, want [6ms] (a's gate_closed at 200 → b's gate_open at 206)", f.Failovers)
		}
		if len(f.Detections) != 0 {
			t.Fatalf("detections %v without a fault", f.Detections)
		}
		if f.Leaderless != 6*time.Millisecond {
			t.Fatalf("leaderless %v, want 6ms", f.Leaderless)
		}
		if f.Acked != 3 || f.Rejected != 0 || f.Unknown != 0 {
			t.Fatalf("outcomes %+v", f)
		}
	})
	t.Run("FrozenLeader", func(t *testing.T) {
		f := Check(frozen(), Footprint{}).Figures
		// The gate closed when a's trust ran out at 501, not when it said so at 1000.
		if !slices.Equal(f.Detections, []time.Duration{401 * time.Millisecond}) {
			t.Fatalf("detections %v, want [401ms]", f.Detections)
		}
		if !slices.Equal(f.Failovers, []time.Duration{701 * time.Millisecond}) {
			t.Fatalf("failovers %v, want [701ms]", f.Failovers)
		}
		if f.StaleRejected != 1 || f.Rejected != 1 || f.Acked != 2 {
			t.Fatalf("outcomes %+v", f)
		}
	})
	t.Run("FaultWithoutEffectIsNoDetection", func(t *testing.T) {
		// Latency on the leader that moves nothing; the run's shutdown closes the gate.
		h := hist(2000, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 501),
			heartbeat(400, "a", 1, 900), heartbeat(800, "a", 1, 1300), heartbeat(1200, "a", 1, 1700),
			gateClosed(1500, "a", 1, "shutdown"),
		}, []Term{term(1, "a", 0)}, nil, fault("latency", "a", 300, 600))
		if f := Check(h, Footprint{}).Figures; len(f.Detections) != 0 {
			t.Fatalf("detections %v", f.Detections)
		}
	})
	t.Run("ScopesSummed", func(t *testing.T) {
		h := hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(10, "a", 1, 1000),
			inScope("t", acquired(0, "b", 1)), inScope("t", gateOpen(20, "b", 1, 1000)),
			inScope("t", gateClosed(100, "b", 1, "resigned")), inScope("t", gateOpen(150, "a", 2, 1000)),
		}, []Term{term(1, "a", 0), {Scope: "t", Epoch: 1, Holder: "b", AcquiredAt: wallAt(0)},
			{Scope: "t", Epoch: 2, Holder: "a", AcquiredAt: wallAt(140)}}, nil)
		h.Scopes = []string{"s", "t"}
		r := Check(h, Footprint{})
		if !r.OK() || r.Figures.Transitions != 3 || r.Figures.Leaderless != 50*time.Millisecond ||
			!slices.Equal(r.Figures.Failovers, []time.Duration{50 * time.Millisecond}) {
			t.Fatalf("%v %+v", r, r.Figures)
		}
	})
}

func TestDeterministicAndJSON(t *testing.T) {
	h := hist(300, []eventlog.Record{acquired(0, "a", 5), acquired(10, "b", 5), acquired(20, "c", 4),
		action(30, eventlog.ActionOK, "c", 5, "c:s:1"), action(31, eventlog.ActionOK, "c", 5, "c:s:2")},
		[]Term{term(5, "a", 0), term(5, "b", 10), term(6, "a", 200)},
		[]Write{write(5, "c", "c:s:1", 30), write(9, "a", "a:s:1", 40), write(5, "a", "a:s:3", 250)},
		fault("kill", "a", 5, 5))
	expect := Footprint{Takeover: true, NoTransition: true, StaleRejected: true}
	first := Check(h, expect)
	t.Log(first)
	if got, want := rules(first), []string{"H1", "H1", "H2", "H3", "H3", "H4", "H5"}; !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	if len(first.Missing) != 2 {
		t.Fatalf("missing %q", first.Missing)
	}
	for range 20 {
		if again := Check(h, expect); again.String() != first.String() {
			t.Fatalf("reports differ:\n%v\n%v", first, again)
		}
	}
	if _, err := json.Marshal(first); err != nil {
		t.Fatal(err)
	}
}

// An acknowledged write lost with an asynchronous primary is counted, not a
// violation, inside a DataLoss window only; outside it, it is still H5.
func TestWritesLostWithPrimary(t *testing.T) {
	lost := func(from, to int64) History {
		h := hist(300, []eventlog.Record{
			acquired(0, "a", 1), gateOpen(1, "a", 1, 500), action(10, eventlog.ActionOK, "a", 1, "a:s:1"),
		}, []Term{term(1, "a", 0)}, nil)
		h.DataLoss = []Window{{StartMono: mono(from), EndMono: mono(to)}}
		return h
	}
	r := Check(lost(5, 20), Footprint{})
	if !r.OK() || r.Figures.LostWithPrimary != 1 {
		t.Fatalf("write acknowledged inside the loss window: lost %d, %v", r.Figures.LostWithPrimary, r)
	}
	r = Check(lost(11, 20), Footprint{})
	if got := rules(r); !slices.Equal(got, []string{"H5"}) || r.Figures.LostWithPrimary != 0 {
		t.Fatalf("write acknowledged before the loss window: rules %v, lost %d", got, r.Figures.LostWithPrimary)
	}
}
