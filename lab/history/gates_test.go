package history

import (
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
)

func rec(event, node string, atMS, untilMS int64) eventlog.Record {
	ms := int64(time.Millisecond)
	return eventlog.Record{Event: event, Scope: "s", Node: node, MonoNS: atMS * ms, TrustUntilMonoNS: untilMS * ms}
}

func TestOverlaps(t *testing.T) {
	cases := []struct {
		name string
		recs []eventlog.Record
		want time.Duration
	}{
		{"TrustBoundsAFrozenGate", []eventlog.Record{
			rec("gate_open", "a", 0, 100),
			rec("heartbeat_ok", "a", 50, 150),
			rec("gate_open", "b", 120, 300),
			rec("gate_closed", "a", 200, 0), // written late (frozen); trusted until 150
			rec("gate_closed", "b", 250, 0),
		}, 30 * time.Millisecond},
		{"HandoverWithoutOverlap", []eventlog.Record{
			rec("gate_open", "a", 0, 100),
			rec("gate_closed", "a", 60, 0),
			rec("gate_open", "a", 70, 170), // same node reopening is not an overlap
			rec("gate_closed", "a", 80, 0),
			rec("gate_open", "b", 80, 200),
			rec("gate_closed", "b", 90, 0),
		}, 0},
		{"ProcessExitClosesGates", []eventlog.Record{
			rec("gate_open", "a", 0, 300),
			{Event: ProcessExit, Node: "a", MonoNS: 10 * int64(time.Millisecond)}, // killed
			rec("gate_open", "b", 20, 300),
		}, 0},
		{"TwinsUnderOneNodeIDOverlap", []eventlog.Record{
			{Event: "gate_open", Scope: "s", Node: "a", Source: "a.jsonl", MonoNS: 0, TrustUntilMonoNS: 100 * int64(time.Millisecond)},
			{Event: "gate_open", Scope: "s", Node: "a", Source: "a.twin.jsonl", MonoNS: 50 * int64(time.Millisecond), TrustUntilMonoNS: 300 * int64(time.Millisecond)},
		}, 50 * time.Millisecond},
		{"OtherScopesIgnored", []eventlog.Record{
			rec("gate_open", "a", 0, 100),
			{Event: "gate_open", Scope: "t", Node: "b", MonoNS: 10, TrustUntilMonoNS: 1e9},
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ivs := GateIntervals(tc.recs, "s", 1<<62)
			if got := TotalOverlap(Overlaps(ivs)); got != tc.want {
				t.Fatalf("overlap %v, want %v (intervals %+v)", got, tc.want, ivs)
			}
		})
	}
}
