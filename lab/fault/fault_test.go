package fault_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/lab/fault"
)

// recorder is every kind of target at once; it records what was done to it.
type recorder struct{ did []string }

func (r *recorder) Signal(sig syscall.Signal) (int64, error) {
	r.did = append(r.did, sig.String())
	return 42, nil
}

func (r *recorder) Kill() (int64, error) {
	r.did = append(r.did, "kill")
	return 43, nil
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.did = append(r.did, sql)
	for _, a := range args {
		r.did = append(r.did, a.(string))
	}
	return pgconn.CommandTag{}, nil
}

func (r *recorder) Restart(_ context.Context, mode string) error {
	r.did = append(r.did, "restart "+mode)
	return nil
}

func (r *recorder) Stop(mode string) error {
	r.did = append(r.did, "stop "+mode)
	return nil
}

func (r *recorder) Promote(context.Context) error {
	r.did = append(r.did, "promote")
	return nil
}

func (r *recorder) Hang() error  { r.did = append(r.did, "hang"); return nil }
func (r *recorder) Reset() error { r.did = append(r.did, "reset"); return nil }
func (r *recorder) Cut() error   { r.did = append(r.did, "cut"); return nil }
func (r *recorder) Heal() error  { r.did = append(r.did, "heal"); return nil }
func (r *recorder) Latency(d, jitter time.Duration) error {
	r.did = append(r.did, "latency "+d.String()+" "+jitter.String())
	return nil
}

// healer is a link that can do nothing but heal.
type healer struct{}

func (healer) Heal() error { return nil }

// TestCatalogue: each fault does to its target what its doc says, undoes it if
// it holds, and a process fault is struck when its signal was sent.
func TestCatalogue(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		f          fault.Fault
		name       string
		apply, all []string // what Apply does; with Undo
		at         int64    // Apply's time, when the target gives it
	}{
		{fault.Kill9, "kill9", []string{"kill"}, nil, 43},
		{fault.SIGTERM, "sigterm", []string{"terminated"}, nil, 42},
		{fault.Resign, "resign", []string{"user defined signal 1"}, nil, 42},
		{fault.Freeze, "freeze", []string{"stopped (signal)"}, []string{"stopped (signal)", "continued"}, 42},
		{fault.Terminate, "terminate", []string{"SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope = $1", "billing"}, nil, 0},
		{fault.Crash, "pg-crash", []string{"stop immediate"}, nil, 0},
		{fault.Promote, "pg-promote", []string{"promote"}, nil, 0},
		{fault.Restart("fast"), "pg-fast", []string{"restart fast"}, nil, 0},
		{fault.Restart("immediate"), "pg-immediate", []string{"restart immediate"}, nil, 0},
		{fault.NetHang, "net-hang", []string{"hang"}, []string{"hang", "heal"}, 0},
		{fault.NetReset, "net-reset", []string{"reset"}, []string{"reset", "heal"}, 0},
		{fault.Partition, "partition", []string{"cut"}, []string{"cut", "heal"}, 0},
		{fault.Latency(30*time.Millisecond, 5*time.Millisecond), "latency", []string{"latency 30ms 5ms"}, []string{"latency 30ms 5ms", "latency 0s 0s"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.f.Name != tt.name || tt.f.About == "" {
				t.Errorf("Name %q About %q; want name %q and a description", tt.f.Name, tt.f.About, tt.name)
			}
			r := &recorder{}
			target := fault.Target{Node: r, Scope: "billing", Admin: r, Link: r, Server: r}
			at, err := tt.f.Apply(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			if tt.at != 0 && at != tt.at {
				t.Errorf("Apply returned %d, want the target's time %d", at, tt.at)
			}
			if at == 0 {
				t.Error("Apply returned no time")
			}
			if !slices.Equal(r.did, tt.apply) {
				t.Errorf("Apply did %q, want %q", r.did, tt.apply)
			}
			if _, err := tt.f.Undo(ctx, target); err != nil {
				t.Fatal(err)
			}
			if want := tt.all; want != nil && !slices.Equal(r.did, want) {
				t.Errorf("Apply and Undo did %q, want %q", r.did, want)
			} else if want == nil && !slices.Equal(r.did, tt.apply) {
				t.Errorf("Undo of a fault that does not hold did %q", r.did[len(tt.apply):])
			}
		})
	}
}

// TestLinkLacksMethod: a network fault on a link that cannot do it is an error
// that names the link's type and what it lacks.
func TestLinkLacksMethod(t *testing.T) {
	for _, f := range []fault.Fault{fault.NetHang, fault.NetReset, fault.Partition, fault.Latency(time.Millisecond, 0)} {
		_, err := f.Apply(context.Background(), fault.Target{Link: healer{}})
		if err == nil || !strings.Contains(err.Error(), "fault_test.healer cannot") {
			t.Errorf("%s on a link without the method: %v", f.Name, err)
		}
	}
}

// TestHandover runs the command a handover names, and reports its output when
// it fails.
func TestHandover(t *testing.T) {
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	bin := filepath.Join(dir, "pgleader")
	script := "#!/bin/sh\necho \"$@\" > " + args + "\n[ \"$3\" = --to ] && [ \"$4\" = n2 ] || { echo cannot lead; exit 1; }\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	target := fault.Target{Scope: "billing", To: "n2", Bin: bin, DSN: "postgres://x"}
	if _, err := fault.Handover.Apply(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(args); string(b) != "handover billing --to n2 --timeout 10s --dsn postgres://x\n" {
		t.Errorf("ran pgleader %q", b)
	}
	target.To = "n3"
	if _, err := fault.Handover.Apply(context.Background(), target); err == nil ||
		!strings.Contains(err.Error(), "pgleader handover billing --to n3") || !strings.Contains(err.Error(), "cannot lead") {
		t.Errorf("failed handover: %v", err)
	}
}
