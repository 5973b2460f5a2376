package electionlog_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionlog"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens an events file whose Observer the test feeds.
func open(t *testing.T) (*eventlog.Writer, func(election.Event), string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := eventlog.Open(path, "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, electionlog.Observer(w), path
}

func TestObserver(t *testing.T) {
	t.Run("EngineEvents", func(t *testing.T) {
		w, obs, path := open(t)
		at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		events := []election.Event{
			{Kind: election.EventAcquired, Scope: "billing", Node: "n1", Epoch: 7, MonoNS: 100, Time: at},
			{Kind: election.EventHeartbeatOK, Node: "n1", MonoNS: 200, Time: at,
				TrustUntilMonoNS: 1_500_000_200, Latency: 300 * time.Microsecond,
				Terms: []election.TermRef{{Scope: "billing", Epoch: 7}}},
			// A service's view of the term: no lines of the file.
			{Kind: election.EventElected, Scope: "billing", Node: "n1", Epoch: 7, MonoNS: 250, Time: at, Holder: "n1"},
			{Kind: election.EventGateClosed, Scope: "billing", Node: "n1", Epoch: 7, MonoNS: 300, Time: at, Reason: "shutdown"},
			{Kind: election.EventRevoked, Scope: "billing", Node: "n1", Epoch: 7, MonoNS: 301, Time: at, Holder: "n1", Reason: "shutdown"},
			{Kind: election.EventObserved, Scope: "billing", Node: "n1", Epoch: 8, MonoNS: 400, Time: at, Holder: "n2"},
			{Kind: election.EventHeartbeatFailed, Node: "n1", MonoNS: 500, Time: at, Reason: "heartbeat_timeout",
				Err: errors.New("heartbeat took 120ms, timeout is 100ms")}, // no scope led
		}
		for _, ev := range events {
			obs(ev)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := pgtest.JSONLines(t, path)
		// elected and revoked have no lines.
		events = slices.DeleteFunc(events, func(ev election.Event) bool {
			return ev.Kind == election.EventElected || ev.Kind == election.EventRevoked
		})
		if len(got) != len(events) {
			t.Fatalf("got %d lines, want %d", len(got), len(events))
		}
		for i, l := range got {
			for _, k := range []string{"mono_ns", "time", "node", "scope", "event", "epoch"} {
				if _, ok := l[k]; !ok {
					t.Errorf("line %d lacks %q: %v", i+1, k, l)
				}
			}
			if l["event"] != string(events[i].Kind) || l["mono_ns"] != float64(events[i].MonoNS) {
				t.Errorf("line %d = %v, want event %s mono_ns %d", i+1, l, events[i].Kind, events[i].MonoNS)
			}
			if l["time"] != "2025-01-02T03:04:05.000000006Z" {
				t.Errorf("line %d time = %v", i+1, l["time"])
			}
		}
		if got[0]["epoch"] != float64(7) || got[0]["scope"] != "billing" || got[0]["node"] != "n1" {
			t.Errorf("acquired line = %v", got[0])
		}
		for _, k := range []string{"trust_until_mono_ns", "reason", "latency_ns", "holder", "request_id"} {
			if _, ok := got[0][k]; ok {
				t.Errorf("acquired line has zero-valued %q: %v", k, got[0])
			}
		}
		if got[1]["trust_until_mono_ns"] != float64(1_500_000_200) || got[1]["latency_ns"] != float64(300_000) ||
			got[1]["scope"] != "billing" || got[1]["epoch"] != float64(7) {
			t.Errorf("heartbeat_ok line = %v", got[1])
		}
		if got[2]["reason"] != "shutdown" {
			t.Errorf("gate_closed line = %v", got[2])
		}
		if got[3]["holder"] != "n2" {
			t.Errorf("leader_observed line = %v", got[3])
		}
		if got[4]["scope"] != "" || got[4]["reason"] != "heartbeat_timeout" || got[4]["error"] != "heartbeat took 120ms, timeout is 100ms" {
			t.Errorf("heartbeat_failed line = %v", got[4])
		}
	})

	// A heartbeat round trip is one engine event; the file has a line per term,
	// none for a follower's successful heartbeat.
	t.Run("HeartbeatPerTerm", func(t *testing.T) {
		w, obs, path := open(t)
		terms := []election.TermRef{{Scope: "a", Epoch: 3}, {Scope: "b", Epoch: 9}}
		obs(election.Event{Kind: election.EventHeartbeatOK, Node: "n1", MonoNS: 10, TrustUntilMonoNS: 99, Terms: terms})
		obs(election.Event{Kind: election.EventHeartbeatOK, Node: "n1", MonoNS: 11, TrustUntilMonoNS: 100})
		obs(election.Event{Kind: election.EventHeartbeatFailed, Node: "n1", MonoNS: 12, Reason: "lost_connection", Terms: terms})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := pgtest.JSONLines(t, path)
		want := []struct {
			event, scope string
			epoch        float64
		}{{"heartbeat_ok", "a", 3}, {"heartbeat_ok", "b", 9}, {"heartbeat_failed", "a", 3}, {"heartbeat_failed", "b", 9}}
		if len(got) != len(want) {
			t.Fatalf("got %d lines, want %d: %v", len(got), len(want), got)
		}
		for i, w := range want {
			if got[i]["event"] != w.event || got[i]["scope"] != w.scope || got[i]["epoch"] != w.epoch {
				t.Errorf("line %d = %v, want %s %s epoch %v", i+1, got[i], w.event, w.scope, w.epoch)
			}
		}
	})

	// With OmitHeartbeats, the file keeps no heartbeat_ok line, and every other.
	t.Run("OmitHeartbeats", func(t *testing.T) {
		w, obs, path := open(t)
		w.OmitHeartbeats()
		terms := []election.TermRef{{Scope: "a", Epoch: 3}}
		obs(election.Event{Kind: election.EventHeartbeatOK, Node: "n1", MonoNS: 10, TrustUntilMonoNS: 99, Terms: terms})
		obs(election.Event{Kind: election.EventGateClosed, Scope: "a", Node: "n1", Epoch: 3, MonoNS: 11, Reason: "shutdown"})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := pgtest.JSONLines(t, path); len(got) != 1 || got[0]["event"] != "gate_closed" {
			t.Fatalf("lines = %v, want gate_closed alone", got)
		}
	})
}
