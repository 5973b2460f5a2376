package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/operator"
)

// The output of status and history over named targets and of scope bindings,
// pinned byte for byte like TestStatusGolden: -o json is a contract other
// tools parse. Each golden holds stdout, then stderr after a "--- stderr"
// line. Update with: go test ./cmd/pgleader -run Golden -update

// goldenOutput is stdout and stderr as one golden file.
func goldenOutput(stdout, stderr *bytes.Buffer) []byte {
	return append(append(stdout.Bytes(), "--- stderr\n"...), stderr.Bytes()...)
}

// TestStatusTargetsGolden: two databases read, one that could not be.
func TestStatusTargetsGolden(t *testing.T) {
	orders := scaleSnapshot(2, 2)
	orders.Health.Database = "orders @ db2:5432"
	results := []targetResult[*collector.Snapshot]{
		{target: cli.NamedTarget{Name: "billing"}, value: everyVerdictSnapshot()},
		{target: cli.NamedTarget{Name: "payroll"}, err: errors.New("dial tcp 10.0.0.9:5432: connect: connection refused")},
		{target: cli.NamedTarget{Name: "orders"}, value: orders},
	}
	for _, format := range []string{cli.FormatJSON, cli.FormatTable, cli.FormatTSV} {
		t.Run(format, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			a := &app{stdout: &stdout, stderr: &stderr}
			if v := a.writeStatusTargets(results, nil, format); v != collector.VerdictSplitBrain {
				t.Fatalf("worst verdict %q", v)
			}
			golden.RequireEqual(t, goldenOutput(&stdout, &stderr))
		})
	}
}

// TestHistoryTargetsGolden: the terms of two databases merged newest first
// and cut at the limit, and one database that could not be read. (The table
// prints local times: it is left to TestHistoryHandedOver.)
func TestHistoryTargetsGolden(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	results := []targetResult[[]collector.Term]{
		{target: cli.NamedTarget{Name: "billing"}, value: []collector.Term{
			{ID: 7, Scope: "jobs", Epoch: 3, Holder: "node-3", AcquiredAt: t0, HeldFor: time.Minute},
			{ID: 5, Scope: "jobs", Epoch: 2, Holder: "node-1", Hostname: "h1", AcquiredAt: t0.Add(-time.Hour), ReleasedAt: t0,
				EndedBy: collector.Reason("handed_over"), HandedTo: "node-3", HeldFor: time.Hour},
		}},
		{target: cli.NamedTarget{Name: "payroll"}, err: errors.New("dial tcp 10.0.0.9:5432: connect: connection refused")},
		{target: cli.NamedTarget{Name: "orders"}, value: []collector.Term{
			{ID: 9, Scope: "jobs", Epoch: 8, Holder: "node-2", AcquiredAt: t0.Add(-30 * time.Minute), ReleasedAt: t0.Add(-time.Minute),
				EndedBy: collector.Reason("crashed"), HandoverGap: 2 * time.Second, HeldFor: 29 * time.Minute},
			{ID: 8, Scope: "jobs", Epoch: 7, Holder: "node-1", AcquiredAt: t0.Add(-2 * time.Hour), ReleasedAt: t0.Add(-30 * time.Minute),
				EndedBy: collector.Reason("resigned"), HeldFor: 90 * time.Minute},
		}},
	}
	for _, format := range []string{cli.FormatJSON, cli.FormatTSV} {
		t.Run(format, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			a := &app{stdout: &stdout, stderr: &stderr}
			err := a.writeHistoryTargets(results, 3, format)
			var se *cli.StatusError
			if !errors.As(err, &se) || se.Code != cli.ExitUnreachable {
				t.Fatalf("error %v, want the exit code of an unreachable database", err)
			}
			golden.RequireEqual(t, goldenOutput(&stdout, &stderr))
		})
	}
}

// TestBindingsGolden: scope bindings, with a prefix, and a lock key override.
func TestBindingsGolden(t *testing.T) {
	bs := []operator.Binding{
		{Name: "billing", Roles: []string{"billing_svc"}, By: "owner"},
		{Prefix: true, Name: "reports/", Roles: []string{"reports_a", "reports_b"}, By: "owner"},
	}
	ks := []operator.KeyOverride{{Scope: "legacy-cron", LockKey: 4242, By: "ops"}}
	for _, format := range []string{cli.FormatJSON, cli.FormatTable, cli.FormatTSV} {
		t.Run(format, func(t *testing.T) {
			var stdout bytes.Buffer
			if err := writeBindings(&app{stdout: &stdout}, bs, ks, format); err != nil {
				t.Fatal(err)
			}
			golden.RequireEqual(t, stdout.Bytes())
		})
	}
	t.Run("none", func(t *testing.T) {
		var stdout bytes.Buffer
		if err := writeBindings(&app{stdout: &stdout}, nil, nil, cli.FormatJSON); err != nil {
			t.Fatal(err)
		}
		golden.RequireEqual(t, stdout.Bytes())
	})
}
