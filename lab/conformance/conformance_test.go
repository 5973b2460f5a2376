package conformance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/checker"
	"github.com/pgleader/pgleader/lab/cluster"
	"github.com/pgleader/pgleader/lab/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	// Nodes without the race detector, as chaos runs them: the kit is about
	// timing under faults on 2 cores.
	bin, cleanup, err := cluster.Build(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	pgtest.Main(m, cleanup)
}

// selfTemplate is pgleader node as the foreign node, with extra flags.
func selfTemplate(t *testing.T, extra string) Template {
	t.Helper()
	tmpl, err := ParseTemplate(binary + " node --id {id} --scope {scope} --dsn {dsn} --events {events} " +
		strings.Join(RefArgs, " ") + " " + extra)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestSelfCheck runs the kit against pgleader node itself, on the faults that
// exercise each direction of takeover and the predecessor wait: it must pass.
// (pgleader-lab conformance --self-check runs all of them.)
func TestSelfCheck(t *testing.T) {
	pgtest.Slow(t)
	var progress strings.Builder
	rep, err := Run(context.Background(), Options{Bin: binary, Node: selfTemplate(t, ""), DSN: pgtest.MigratedDSN(t),
		Dir: t.TempDir(), Seed: 1, Rounds: 1, Faults: []string{"kill9", "handover-to", "frozen-to-foreign"}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	WriteReport(&out, rep)
	if !rep.OK() {
		t.Fatalf("pgleader node is not conformant:\n%s\n%s", progress.String(), out.String())
	}
	if rep.ToForeign == 0 || rep.FromForeign == 0 {
		t.Errorf("takeovers to the foreign node %d, from it %d: want both", rep.ToForeign, rep.FromForeign)
	}
	t.Logf("\n%s", out.String())
}

// TestCatchesAnUnfencedNode runs the kit against a node that writes without
// the fence and stalls between its gate check and its write (the lab build's
// hooks): frozen there past its lease, its write lands in its successor's
// term. The kit must fail it, naming H3.
func TestCatchesAnUnfencedNode(t *testing.T) {
	pgtest.Slow(t)
	rep, err := Run(context.Background(), Options{Bin: binary, DSN: pgtest.MigratedDSN(t), Dir: t.TempDir(), Seed: 2, Rounds: 1,
		Node: selfTemplate(t, "--test-unsafe-skip-fence --test-pause-before-write 250ms"), Faults: []string{"stop"}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	WriteReport(&out, rep)
	if rep.OK() {
		t.Fatalf("an unfenced node passed the kit:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "H3 ") || !strings.Contains(out.String(), "NOT CONFORMANT") {
		t.Errorf("the verdict does not name H3 and say NOT CONFORMANT:\n%s", out.String())
	}
}

func TestParseTemplate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		argv []string // with id=n, scope=s, dsn=d, events=e
		err  string
	}{
		{in: "python3 c.py --id {id} --scope {scope} --dsn {dsn} --events {events}",
			argv: []string{"python3", "c.py", "--id", "n", "--scope", "s", "--dsn", "d", "--events", "e"}},
		{in: `run "--name={id} x" '{scope}' --events={events}`, argv: []string{"run", "--name=n x", "s", "--events=e"}},
		{in: `a\ b {id} {scope} {events} ""`, argv: []string{"a b", "n", "s", "e", ""}},
		{in: "", err: "is empty"},
		{in: "c --id {id} --events {events}", err: "has no {scope}"},
		{in: "c {id} {scope} {events} {host}", err: "unknown placeholder {host}"},
		{in: "c '{id} {scope} {events}", err: "single quote is not closed"},
	} {
		tmpl, err := ParseTemplate(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseTemplate(%q): error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseTemplate(%q): %v", tc.in, err)
		case tc.err == "":
			if got := tmpl.Argv("n", "s", "d", "e"); strings.Join(got, "|") != strings.Join(tc.argv, "|") {
				t.Errorf("ParseTemplate(%q).Argv = %q, want %q", tc.in, got, tc.argv)
			}
		}
	}
}

// TestRecordChecks holds hand-made event lines of a foreign node to the
// contract of its events file.
func TestRecordChecks(t *testing.T) {
	const w = 500 * time.Millisecond
	ms := func(v int64) int64 { return v * int64(time.Millisecond) }
	rec := func(at int64, event string, epoch, trustMS int64) eventlog.Record {
		r := eventlog.Record{MonoNS: ms(at), Time: "2026-01-01T00:00:00.000001Z", Node: Foreign, Scope: "s", Event: event,
			Epoch: epoch, Source: Foreign + ".jsonl"}
		if trustMS > 0 {
			r.TrustUntilMonoNS = ms(trustMS)
		}
		if strings.HasPrefix(event, "action_") {
			r.RequestID = fmt.Sprintf("x-%d", at)
		}
		return r
	}
	good := []eventlog.Record{rec(10, "acquired", 1, 0), rec(11, "gate_open", 1, 500), rec(20, "action_ok", 1, 0),
		rec(110, "heartbeat_ok", 1, 600), rec(200, "gate_closed", 1, 0), rec(201, "resigned", 1, 0)}
	if got := recordChecks(good, Foreign, "s", w); len(got) != 0 {
		t.Errorf("a well-formed file: %v", got)
	}
	for _, tc := range []struct {
		name string
		rs   []eventlog.Record
		want string
	}{
		{"TrustBeyondTheWindow", []eventlog.Record{rec(10, "acquired", 1, 0), rec(11, "gate_open", 1, 900)}, "bounded by the trust window"},
		{"GateBeforeAcquired", []eventlog.Record{rec(11, "gate_open", 1, 400)}, "only after its term's acquired"},
		{"WriteBeforeGate", []eventlog.Record{rec(10, "acquired", 1, 0), rec(12, "action_ok", 1, 0)}, "follows the gate_open"},
		{"NoTrust", []eventlog.Record{rec(10, "acquired", 1, 0), rec(11, "gate_open", 1, 0)}, "carry trust_until_mono_ns"},
		{"UnknownEvent", []eventlog.Record{rec(10, "elected", 1, 0)}, "every event is one of"},
		{"OtherNode", []eventlog.Record{func() eventlog.Record { r := rec(10, "acquired", 1, 0); r.Node = "x"; return r }()}, "names the node"},
		{"NoTime", []eventlog.Record{func() eventlog.Record { r := rec(10, "acquired", 1, 0); r.Time = ""; return r }()}, "RFC 3339"},
		{"NoRequestID", []eventlog.Record{rec(10, "acquired", 1, 0), rec(11, "gate_open", 1, 400),
			func() eventlog.Record { r := rec(12, "action_ok", 1, 0); r.RequestID = ""; return r }()}, "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordChecks(tc.rs, Foreign, "s", w)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("got %q, want one finding saying %q", got, tc.want)
			}
		})
	}
}

// TestDirections counts takeovers towards the foreign node and away from it,
// after the first fault only.
func TestDirections(t *testing.T) {
	open := func(at int64, node string, epoch int64) eventlog.Record {
		return eventlog.Record{MonoNS: at, Node: node, Scope: "s", Event: "gate_open", Epoch: epoch}
	}
	h := checker.History{Faults: []checker.Fault{{StartMono: 15}},
		Events: []eventlog.Record{open(10, ref1, 1), open(12, Foreign, 2), open(20, ref1, 3), open(21, ref1, 3),
			open(30, Foreign, 4), open(40, ref2, 5), open(50, ref1, 6)}}
	if to, from := directions(h, "s"); to != 1 || from != 2 {
		t.Errorf("directions = %d to, %d from; want 1 to (epoch 4), 2 from (epochs 3 and 5)", to, from)
	}
}
