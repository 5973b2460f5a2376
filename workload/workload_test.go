package workload

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type action struct {
	kind      eventlog.ActionKind
	scope     string
	epoch     int64
	requestID string
	reason    string
}

// recorder collects actions and wakes waiters on each one.
type recorder struct {
	mu      sync.Mutex
	actions []action
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) Action(kind eventlog.ActionKind, scope string, epoch int64, requestID, reason string) {
	r.mu.Lock()
	r.actions = append(r.actions, action{kind, scope, epoch, requestID, reason})
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []action {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]action(nil), r.actions...)
}

// waitFor waits until cond holds for the recorded actions, or fails the test.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]action) bool) []action {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		if got := r.snapshot(); cond(got) {
			return got
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; actions: %+v", what, r.snapshot())
		}
	}
}

func count(as []action, kind eventlog.ActionKind) int {
	n := 0
	for _, a := range as {
		if a.kind == kind {
			n++
		}
	}
	return n
}

type bundle struct {
	elector *election.Elector
	pool    *pgxpool.Pool
	admin   *pgx.Conn
	rec     *recorder
	work    *Workload
}

// setup migrates a fresh database and returns an Elector for scope "a" (not
// running) and a Workload on it (not running).
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	e, err := election.New(election.Config{DSN: dsn, NodeID: "n1", Scopes: []string{"a"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewPool(cfg, "n1", 1, 2*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	rec := newRecorder()
	return &bundle{elector: e, pool: pool, admin: admin, rec: rec, work: &Workload{
		Pool: pool, Scopes: e.Scopes(), Node: "n1", Interval: 20 * time.Millisecond, Recorder: rec,
	}}
}

// start runs the elector and the workload until the test ends, stopping the
// workload after the elector has drained, as the node command does.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	workCtx, stopWork := context.WithCancel(context.Background())
	runErr, workErr := make(chan error, 1), make(chan error, 1)
	go func() { runErr <- b.elector.Run(ctx) }()
	go func() { workErr <- b.work.Run(workCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("elector.Run: %v", err)
		}
		stopWork()
		if err := <-workErr; err != nil {
			t.Errorf("workload.Run: %v", err)
		}
	})
}

// rows returns request_id → epoch of pgleader.demo_actions.
func (b *bundle) rows(t *testing.T) map[string]int64 {
	t.Helper()
	rows, _ := b.admin.Query(context.Background(), "SELECT request_id, epoch FROM pgleader.demo_actions")
	out := map[string]int64{}
	var id string
	var epoch int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &epoch}, func() error { out[id] = epoch; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWorkload(t *testing.T) {
	pgtest.Slow(t)
	t.Run("WritesWhileLeading", func(t *testing.T) {
		b := setup(t)
		b.start(t)
		got := b.rec.waitFor(t, "3 action_ok", func(as []action) bool { return count(as, eventlog.ActionOK) >= 3 })
		rows := b.rows(t)
		seen := map[string]bool{}
		for _, a := range got {
			if a.kind != eventlog.ActionOK {
				t.Errorf("unexpected outcome %+v", a)
				continue
			}
			if seen[a.requestID] {
				t.Errorf("request id %s used twice", a.requestID)
			}
			seen[a.requestID] = true
			if !strings.HasPrefix(a.requestID, "n1:a:") || a.scope != "a" || a.epoch != 1 {
				t.Errorf("action %+v: want scope a, epoch 1, request id n1:a:…", a)
			}
			if epoch, ok := rows[a.requestID]; !ok || epoch != a.epoch {
				t.Errorf("action_ok %s: row epoch %d (present %v), want %d", a.requestID, epoch, ok, a.epoch)
			}
		}
	})

	t.Run("FencedWriteIsRejected", func(t *testing.T) {
		b := setup(t)
		// Once, between the gate check and the write, a successor's epoch appears
		// (as if this process had paused while another node claimed the scope).
		var bumped atomic.Bool
		b.work.BeforeWrite = func(tok election.Token) {
			if bumped.CompareAndSwap(false, true) {
				if _, err := b.admin.Exec(context.Background(),
					"UPDATE pgleader.leader_state SET epoch = epoch + 1 WHERE scope = $1", tok.Scope); err != nil {
					t.Error(err)
				}
			}
		}
		b.start(t)
		got := b.rec.waitFor(t, "action_rejected", func(as []action) bool { return count(as, eventlog.ActionRejected) >= 1 })
		var rej action
		for _, a := range got {
			if a.kind == eventlog.ActionRejected {
				rej = a
				break
			}
		}
		if !strings.Contains(rej.reason, "fenced") {
			t.Errorf("rejected reason = %q, want the fence's message", rej.reason)
		}
		if _, ok := b.rows(t)[rej.requestID]; ok {
			t.Errorf("rejected action %s left a row", rej.requestID)
		}
	})

	t.Run("GateClosedBeforeWriteIsNotReported", func(t *testing.T) {
		b := setup(t)
		// The first action waits between its gate check and its write until the
		// gate has closed (its term is evicted): its context is cancelled, nothing
		// reaches the server, and nothing is reported.
		var first atomic.Bool
		b.work.BeforeWrite = func(tok election.Token) {
			if !first.CompareAndSwap(false, true) {
				return
			}
			if _, err := b.admin.Exec(context.Background(),
				"UPDATE pgleader.leader_state SET epoch = epoch + 1 WHERE scope = $1", tok.Scope); err != nil {
				t.Error(err)
			}
			select {
			case <-tok.Context().Done():
			case <-time.After(20 * time.Second):
				t.Error("the gate did not close after the epoch moved on")
			}
		}
		b.start(t)
		got := b.rec.waitFor(t, "action_ok of a later term", func(as []action) bool {
			for _, a := range as {
				if a.kind == eventlog.ActionOK && a.epoch > 2 {
					return true
				}
			}
			return false
		})
		for _, a := range got {
			if a.kind != eventlog.ActionOK || strings.HasSuffix(a.requestID, "-1") {
				t.Errorf("unexpected outcome %+v", a)
			}
		}
	})

	t.Run("FailureAfterInsertIsUnknown", func(t *testing.T) {
		b := setup(t)
		// A deferred constraint fails at COMMIT: after the INSERT was sent.
		if _, err := b.admin.Exec(context.Background(), `
			CREATE FUNCTION public.fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS
			  $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
			CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON pgleader.demo_actions
			  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.fail_at_commit();`); err != nil {
			t.Fatal(err)
		}
		b.start(t)
		got := b.rec.waitFor(t, "action_unknown", func(as []action) bool { return count(as, eventlog.ActionUnknown) >= 1 })
		for _, a := range got {
			if a.kind != eventlog.ActionUnknown || !strings.Contains(a.reason, "refused at commit") {
				t.Errorf("unexpected outcome %+v", a)
			}
		}
	})

	t.Run("NothingWhileNotLeading", func(t *testing.T) {
		b := setup(t) // the elector never runs: the scope is never led
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		var hooked atomic.Bool
		b.work.BeforeWrite = func(election.Token) { hooked.Store(true) }
		go func() { done <- b.work.Run(ctx) }()
		// Let several intervals pass; the assertion is that nothing happens, so a
		// wait is the test itself here, not a timing assumption.
		time.Sleep(10 * b.work.Interval)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := b.rec.snapshot(); len(got) != 0 || hooked.Load() {
			t.Fatalf("actions without leadership: %+v (hook called: %v)", got, hooked.Load())
		}
	})

	t.Run("PoolEndsIdleTransactions", func(t *testing.T) {
		b := setup(t)
		var v string
		if err := b.pool.QueryRow(context.Background(), "SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil || v != "2s" {
			t.Fatalf("idle_in_transaction_session_timeout = %q, %v; want 2s", v, err)
		}
	})

	t.Run("RejectsZeroInterval", func(t *testing.T) {
		w := &Workload{}
		if err := w.Run(context.Background()); err == nil {
			t.Fatal("Run with a zero interval succeeded")
		}
	})

	t.Run("RunReturnsWhenStopped", func(t *testing.T) {
		b := setup(t)
		b.start(t)
		b.rec.waitFor(t, "action_ok", func(as []action) bool { return count(as, eventlog.ActionOK) >= 1 })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() {
			done <- (&Workload{Pool: b.pool, Scopes: b.elector.Scopes(), Node: "n1", Interval: time.Millisecond}).Run(ctx)
		}()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
	})
}
