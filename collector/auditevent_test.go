package collector

import (
	"slices"
	"testing"
	"time"
)

func TestAuditEventResignRequested(t *testing.T) {
	at := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	ev, ok := auditEvent(auditRow{ID: 7, At: at, Scope: "s", Node: "n1", Epoch: 4, Kind: "resign_requested",
		Detail: auditDetail{By: "oncall", Via: "collector: operator"}})
	want := Event{At: at, Kind: EventResignRequested, Scope: "s", Node: "n1", Epoch: 4, AuditID: 7,
		Detail: "requested by oncall via collector: operator"}
	if !ok || ev != want {
		t.Fatalf("auditEvent: %+v %v, want %+v", ev, ok, want)
	}
	if !slices.Contains(auditKinds, "resign_requested") {
		t.Fatal("the first read does not replay resign_requested rows")
	}
}
