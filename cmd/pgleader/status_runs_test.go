package main

import (
	"strings"
	"testing"

	"github.com/pgleader/pgleader/collector"
)

// TestStatusRunsColumn: status names what a pgleader run node supervises, in a
// RUNS column that appears only when some node supervises a command.
func TestStatusRunsColumn(t *testing.T) {
	exit := 1
	nodes := []collector.Node{
		{ID: "plain", Hostname: "h1", Priority: 1, Live: true, State: collector.NodeLive},
		{ID: "runner", Hostname: "h2", Priority: 1, Live: true, State: collector.NodeLive,
			Supervisor: &collector.Supervised{Command: "worker", State: "running", PID: 4242, Restarts: 2}},
		{ID: "waiter", Hostname: "h3", Priority: 1, Live: true, State: collector.NodeLive,
			Supervisor: &collector.Supervised{Command: "worker", State: "waiting", LastExit: &exit}},
	}
	var b strings.Builder
	writeNodes(&b, nodes, nil, false)
	out := b.String()
	for _, want := range []string{"RUNS", "worker: running pid 4242, 2 restarts", "worker: waiting, last exit 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("status nodes lack %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "plain ") && !strings.HasSuffix(strings.TrimSpace(l), "—") {
			t.Errorf("a plain node's RUNS cell is not a dash: %q", l)
		}
	}
	b.Reset()
	writeNodes(&b, nodes[:1], nil, false)
	if strings.Contains(b.String(), "RUNS") {
		t.Errorf("RUNS column without a supervised node:\n%s", b.String())
	}
}
