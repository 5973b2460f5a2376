package exporter_test

import (
	"strings"
	"testing"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// payload is what someone who can write the database may put in a name: a
// screen clear, a colour, CR, LF, TAB, a right-to-left override, DEL, the C1
// CSI and a byte that is not UTF-8.
const payload = "\x1b[2J\x1b[31m\r\n\tX\u202eY\x7f\u009b\xff"

// hostileCluster is ledCluster with the payload in every scope name and node id.
func hostileCluster(f func(string) string) *collector.Snapshot {
	s := ledCluster()
	for i := range s.Scopes {
		sc := &s.Scopes[i]
		sc.Name, sc.Leader, sc.Followers = f(sc.Name), f(sc.Leader), []string{f(sc.Followers[0])}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.ID, n.Leads, n.Scopes = f(n.ID), []string{f(n.Leads[0])}, []string{f("billing"), f("reports")}
	}
	s.FenceRejected = map[string]uint64{f("billing"): 2, f("gone"): 1}
	s.Alerts = []collector.Alert{{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: f("node-b")}}
	return s
}

// assertInertExposition fails unless body has no control character but its
// line feeds, no DEL, C1 or text-direction control, and the series of plain.
func assertInertExposition(t *testing.T, body, plain string) {
	t.Helper()
	for i, r := range body {
		if r != '\n' && termsafe.Unsafe(r) {
			t.Fatalf("%U at byte %d of the scrape:\n%q", r, i, body)
		}
	}
	if !strings.Contains(body, `\\x1b[2J\\x1b[31m\\r\\n\\tX\\u202eY\\x7f\\u009b\\xff`) {
		t.Fatalf("the payload is not shown escaped:\n%s", body)
	}
	if g, w := strings.Count(body, "\n"), strings.Count(plain, "\n"); g != w {
		t.Fatalf("%d lines, %d with plain names:\n%s", g, w, body)
	}
}

// TestEscapeHostileLabels: scope names and node ids from the database reach the
// scrape as escapes: no ESC, no forged line, no panic on a byte that is not
// UTF-8, and every series of the same cluster with plain names.
func TestEscapeHostileLabels(t *testing.T) {
	t.Parallel()
	hostile := hostileCluster(func(s string) string { return s + payload })
	plain := hostileCluster(func(s string) string { return s + "payload" })
	_, body := get(t, exporter.Handler(newRegistry(t, hostile, t0), nil), "/metrics")
	_, want := get(t, exporter.Handler(newRegistry(t, plain, t0), nil), "/metrics")
	assertInertExposition(t, body, want)
	if !strings.Contains(body, `pgleader_node_stale{node="node-b\\x1b[2J`) {
		t.Errorf("stale_node alert not matched to its escaped node:\n%s", body)
	}
}
