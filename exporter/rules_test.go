package exporter_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

// promtool returns the path of promtool. Without it the test is skipped, except
// in CI, where a missing tool must not pass silently.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool not found in CI: %v", err)
		}
		t.Skip("promtool not found; install it with: apt-get install -y prometheus (or download a Prometheus release)")
	}
	return path
}

func run(t *testing.T, stdin []byte, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
	}
	t.Logf("%s %v:\n%s", filepath.Base(name), args, out)
}

func TestRulesCheck(t *testing.T) {
	t.Parallel()
	run(t, nil, promtool(t), "check", "rules", filepath.Join("rules", "pgleader.rules.yml"))
}

func TestRulesUnitTests(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: make test runs it, make test-short does not")
	}
	t.Parallel()
	run(t, nil, promtool(t), "test", "rules", filepath.Join("rules", "pgleader.rules_test.yml"))
}

// TestMetricsCheck lints the exporter's whole /metrics page with promtool, for a
// snapshot that makes every metric appear (alerts firing included): a small
// cluster, and 1,000 scopes over 10 nodes.
func TestMetricsCheck(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	for _, size := range []struct{ scopes, nodes int }{{5, 4}, {1000, 10}} {
		t.Run(fmt.Sprintf("%d_scopes_%d_nodes", size.scopes, size.nodes), func(t *testing.T) {
			snap := synthetic(size.scopes, size.nodes)
			snap.Alerts = []collector.Alert{
				{Kind: collector.AlertSplitBrain, Severity: collector.SeverityCritical, Scope: snap.Scopes[0].Name},
				{Kind: collector.AlertStaleLeader, Severity: collector.SeverityCritical, Scope: snap.Scopes[1].Name},
				{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: snap.Nodes[3].ID},
			}
			rec := httptest.NewRecorder()
			exporter.Handler(newRegistry(t, snap, t0), nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("/metrics: %d", rec.Code)
			}
			body := rec.Body.Bytes()
			for name := range metricInfo {
				if !bytes.Contains(body, []byte("\n"+name)) {
					t.Errorf("%s missing from /metrics", name)
				}
			}
			if got, want := bytes.Count(body, []byte("\npgleader_scope_epoch{")), size.scopes; got != want {
				t.Errorf("%d pgleader_scope_epoch series, want %d", got, want)
			}
			run(t, body, tool, "check", "metrics")
		})
	}
}
