package collector

import (
	"testing"
	"time"
)

// Two claim transactions run at once after a leader died: node-1's takes 500
// audit ids, node-3's 20, and their ids interleave (one sequence). node-3's
// commits first. Every row of both becomes one event, on the stream and on
// the poll alike.
func TestAuditGateInterleavedTransactions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var big, small []auditRow
	id := int64(0)
	row := func(node string) auditRow {
		id++
		return auditRow{ID: id, At: now, Scope: "s", Node: node, Kind: "elected"}
	}
	for range 300 {
		big = append(big, row("node-1"))
	}
	for range 20 {
		small = append(small, row("node-3"))
	}
	for range 200 {
		big = append(big, row("node-1"))
	}
	st := newState()
	n := len(st.streamAudit(small, now, 1))
	n += len(st.streamAudit(big, now, 2))
	if n != len(big)+len(small) {
		t.Fatalf("%d events from %d audit rows", n, len(big)+len(small))
	}
}
