package exporter_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/collector/logical"
	"github.com/pgleader/pgleader/exporter"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// A collector streaming through a permanent slot shows in the metrics: source 3,
// the slot's lag, the age of the stream's last change.
func TestExporterLogicalSource(t *testing.T) {
	pgtest.Slow(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, cc, nil); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	const slot = "pgleader_exporter_test"
	t.Cleanup(func() {
		// After the collector stopped (cleanups run last in, first out); a
		// database with a slot cannot be dropped.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			err := logical.DropSlot(dctx, admin, slot)
			if errors.Is(err, logical.ErrSlotInUse) && dctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Errorf("drop slot: %v", err)
			}
			break
		}
		admin.Close(context.Background())
	})

	col, err := collector.New(collector.Config{ConnConfig: cc, PollInterval: 50 * time.Millisecond,
		Source: collector.SourceModeLogical, Slot: slot, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- col.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for s := col.Snapshot(); s == nil || s.Health.Source != collector.SourceLogical; s = col.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not stream within 10s: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := admin.Exec(ctx, `INSERT INTO pgleader.audit (scope, node_id, kind) VALUES ('s', 'n', 'test')`); err != nil {
		t.Fatal(err)
	}
	for s := col.Snapshot(); s.Health.LastChange.IsZero() || s.Health.SlotLagBytes < 0; s = col.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("no change or slot lag within 10s: %+v", s.Health)
		}
		time.Sleep(5 * time.Millisecond)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exporter.New(col, exporter.Options{}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) == 1 && m[0].GetGauge() != nil {
			got[mf.GetName()] = m[0].GetGauge().GetValue()
		}
	}
	if got["pgleader_collector_source"] != 3 {
		t.Errorf("pgleader_collector_source %v, want 3", got["pgleader_collector_source"])
	}
	for _, name := range []string{"pgleader_collector_slot_lag_bytes", "pgleader_collector_last_change_age_seconds"} {
		if v, ok := got[name]; !ok || v < 0 {
			t.Errorf("%s: %v, present %v; want a value ≥ 0", name, v, ok)
		}
	}
	t.Logf("slot lag %v bytes, last change %vs ago", got["pgleader_collector_slot_lag_bytes"], got["pgleader_collector_last_change_age_seconds"])
}
