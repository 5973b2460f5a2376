package collector

import (
	"context"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

// TestAuditReset: a TRUNCATE of pgleader.audit (RESTART IDENTITY starts the ids
// again at 1, below the collector's cursor) is reported once as audit_reset,
// and every row written after it becomes an event, once, whichever source
// reads the table and whether the new rows come before or after the
// collector's next read.
func TestAuditReset(t *testing.T) {
	pgtest.Slow(t)
	for _, src := range []SourceMode{SourceModeNotify, SourceModeLogical} {
		for _, tc := range []struct {
			name     string
			truncate string
			withRows bool // the new rows commit with the TRUNCATE, before any read sees it
		}{
			{"RestartIdentity", "TRUNCATE pgleader.audit RESTART IDENTITY", false},
			{"RestartIdentityWithRows", "TRUNCATE pgleader.audit RESTART IDENTITY", true},
			{"Emptied", "TRUNCATE pgleader.audit", false},
		} {
			t.Run(string(src)+"/"+tc.name, func(t *testing.T) {
				dsn := pgtest.MigratedDSN(t)
				cfg := testConfig(t, dsn)
				cfg.Source = src
				c := newCollector(t, cfg)
				rec := record(t, c)
				run(t, c)
				waitSnap(t, c, "the source up", live)
				admin := pgtest.Connect(t, dsn)
				fence := func(epoch int) {
					exec(t, admin, "SELECT pgleader.fence_rejected('s', $1, 'zombie', 'test')", int64(epoch))
				}
				fenceEvent := func(epoch int64) func(Event) bool {
					return func(e Event) bool { return e.Kind == EventFenceRejected && e.Epoch == epoch }
				}

				// The old history: the cursor ends well above the ids the new one
				// starts with.
				testnode.Start(t, testnode.FastConfig(dsn, "n1", "s"))
				rec.waitEvent(t, "elected n1", func(e Event) bool { return e.Kind == EventElected && e.Scope == "s" })
				for i := range 20 {
					fence(100 + i)
				}
				rec.waitEvent(t, "the last fence event before the truncate", fenceEvent(119))
				before := queryInt(t, admin, "SELECT max(id) FROM pgleader.audit")

				if tc.withRows {
					tx, err := admin.Begin(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					for _, q := range []string{tc.truncate,
						"SELECT pgleader.fence_rejected('s', 1001, 'zombie', 'test')",
						"SELECT pgleader.fence_rejected('s', 1002, 'zombie', 'test')"} {
						if _, err := tx.Exec(context.Background(), q); err != nil {
							t.Fatalf("%s: %v", q, err)
						}
					}
					if err := tx.Commit(context.Background()); err != nil {
						t.Fatal(err)
					}
				} else {
					exec(t, admin, tc.truncate)
					rec.waitEvent(t, "audit_reset of the emptied table", func(e Event) bool { return e.Kind == EventAuditReset })
					fence(1001)
					fence(1002)
				}
				// New rows through the engine (a claim) and the SQL functions.
				testnode.Start(t, testnode.FastConfig(dsn, "n2", "t"))
				fence(1003)
				reset := rec.waitEvent(t, "audit_reset", func(e Event) bool { return e.Kind == EventAuditReset })
				rec.waitEvent(t, "elected n2 after the reset", func(e Event) bool { return e.Kind == EventElected && e.Scope == "t" })
				rec.waitEvent(t, "the last fence event after the reset", fenceEvent(1003))
				if tc.truncate == "TRUNCATE pgleader.audit RESTART IDENTITY" {
					if after := queryInt(t, admin, "SELECT max(id) FROM pgleader.audit"); after >= before {
						t.Fatalf("new ids reach %d, not below the old cursor %d: the test does not test the reset", after, before)
					}
				}

				// Every row of the new history exactly once, after the reset event;
				// one reset event. The history is read until it holds every row an
				// event names: a transaction decoded from the WAL can reach the
				// collector before its commit is visible to a new snapshot (the
				// commit record is flushed before the backend leaves the proc
				// array), and the claim of n2 commits last.
				var want map[int64]bool
				readWant := func() map[int64]bool {
					m := map[int64]bool{}
					rows, err := admin.Query(context.Background(), "SELECT id FROM pgleader.audit WHERE kind = ANY ($1)", auditKinds)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var id int64
						if err := rows.Scan(&id); err != nil {
							t.Fatal(err)
						}
						m[id] = true
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
					return m
				}
				deadline := time.Now().Add(time.Second)
				for want = readWant(); time.Now().Before(deadline); want = readWant() {
					seen := true
					for _, e := range rec.all() {
						if e.Seq > reset.Seq && e.AuditID != 0 && !want[e.AuditID] {
							seen = false
						}
					}
					if seen {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				pgtest.WaitFor(t, "an event per row of the new history", wait, func() bool {
					n := 0
					for _, e := range rec.all() {
						if e.Seq > reset.Seq && e.AuditID != 0 {
							n++
						}
					}
					return n >= len(want)
				})
				got := map[int64]int{}
				resets := 0
				for _, e := range rec.all() {
					switch {
					case e.Kind == EventAuditReset:
						resets++
					case e.Seq > reset.Seq && e.AuditID != 0:
						got[e.AuditID]++
						if !want[e.AuditID] {
							t.Errorf("event %+v: no such row in the new history", e)
						}
					}
				}
				for id := range want {
					if got[id] != 1 {
						t.Errorf("audit row %d: %d events, want 1", id, got[id])
					}
				}
				if resets != 1 || reset.Detail == "" {
					t.Errorf("%d audit_reset events (the first %+v), want 1", resets, reset)
				}
				if t.Failed() {
					for _, e := range rec.all() {
						t.Logf("%+v", e)
					}
				}
			})
		}
	}
}
