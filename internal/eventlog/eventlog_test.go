package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) (*Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := Open(path, "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, path
}

func TestWriter(t *testing.T) {
	// With OmitHeartbeats, heartbeat_ok records are left out, all others kept.
	t.Run("OmitHeartbeats", func(t *testing.T) {
		w, path := open(t)
		w.OmitHeartbeats()
		w.Append(Record{Event: "heartbeat_ok", Scope: "a", Epoch: 3}, Record{Event: "heartbeat_failed", Scope: "a", Epoch: 3})
		w.Append(Record{Event: "heartbeat_ok", Scope: "b", Epoch: 9})
		w.Action(ActionOK, "a", 3, "r", "")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := pgtest.JSONLines(t, path)
		if len(got) != 2 || got[0]["event"] != "heartbeat_failed" || got[1]["event"] != "action_ok" {
			t.Fatalf("lines = %v, want heartbeat_failed, action_ok", got)
		}
	})

	t.Run("Actions", func(t *testing.T) {
		w, path := open(t)
		before := time.Now()
		w.Action(ActionOK, "billing", 3, "n1:billing:1", "")
		w.Action(ActionRejected, "billing", 3, "n1:billing:2", "fenced")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := pgtest.JSONLines(t, path)
		if len(got) != 2 {
			t.Fatalf("got %d lines, want 2", len(got))
		}
		if l := got[0]; l["event"] != "action_ok" || l["node"] != "n1" || l["scope"] != "billing" ||
			l["epoch"] != float64(3) || l["request_id"] != "n1:billing:1" || l["mono_ns"].(float64) <= 0 {
			t.Errorf("action_ok line = %v", l)
		}
		if _, ok := got[0]["reason"]; ok {
			t.Errorf("action_ok line has a reason: %v", got[0])
		}
		if got[1]["event"] != "action_rejected" || got[1]["reason"] != "fenced" {
			t.Errorf("action_rejected line = %v", got[1])
		}
		ts, err := time.Parse(time.RFC3339Nano, got[0]["time"].(string))
		if err != nil || ts.Before(before.Add(-time.Second)) {
			t.Errorf("time = %v (%v), want about now", got[0]["time"], err)
		}
	})

	t.Run("Appends", func(t *testing.T) {
		w, path := open(t)
		w.Action(ActionOK, "a", 1, "r1", "")
		_ = w.Close()
		w2, err := Open(path, "n1")
		if err != nil {
			t.Fatal(err)
		}
		w2.Action(ActionOK, "a", 1, "r2", "")
		_ = w2.Close()
		if got := pgtest.JSONLines(t, path); len(got) != 2 || got[1]["request_id"] != "r2" {
			t.Fatalf("after reopening: %v", got)
		}
	})

	t.Run("ConcurrentWritersStress", func(t *testing.T) {
		w, path := open(t)
		const goroutines, each = 8, 500
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					if i%2 == 0 {
						w.Append(Record{Event: "heartbeat_ok", Node: "n1", Time: time.Now().UTC().Format(time.RFC3339Nano),
							Scope: "s", Epoch: int64(g)})
					} else {
						w.Action(ActionOK, "s", int64(g), "req", "")
					}
				}
			})
		}
		wg.Wait()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := pgtest.JSONLines(t, path); len(got) != goroutines*each {
			t.Fatalf("got %d lines, want %d", len(got), goroutines*each)
		}
	})

	t.Run("AfterClose", func(t *testing.T) {
		w, path := open(t)
		_ = w.Close()
		w.Action(ActionOK, "a", 1, "r", "") // dropped, no panic
		if got := pgtest.JSONLines(t, path); len(got) != 0 {
			t.Fatalf("wrote after Close: %v", got)
		}
	})

	t.Run("OpenError", func(t *testing.T) {
		if _, err := Open(filepath.Join(t.TempDir(), "missing", "events.jsonl"), "n1"); err == nil {
			t.Fatal("Open in a missing directory succeeded")
		}
	})
}

func TestTailReadsOnlyCompleteNewLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	tail := NewTail(path)
	if rs, err := tail.Next(); err != nil || len(rs) != 0 {
		t.Fatalf("missing file: %v %v", rs, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(`{"mono_ns":2,"event":"acquired","node":"a"}` + "\n" + `{"mono_ns":3,"ev`)
	rs, err := tail.Next()
	if err != nil || len(rs) != 1 || rs[0].Event != "acquired" || rs[0].MonoNS != 2 {
		t.Fatalf("first read: %+v %v", rs, err)
	}
	f.WriteString(`ent":"gate_open","node":"a"}` + "\n")
	rs, err = tail.Next()
	if err != nil || len(rs) != 1 || rs[0].Event != "gate_open" || rs[0].MonoNS != 3 {
		t.Fatalf("second read (partial line completed): %+v %v", rs, err)
	}
	if rs, _ := tail.Next(); len(rs) != 0 {
		t.Fatalf("third read returned old lines: %+v", rs)
	}
}

// TestOpenRefusesUnsafeFiles: the events file is the node's own. A path
// another user prepared — a symbolic link to a file of the node's user, a file
// that user owns, a file anyone may write, a FIFO that would block the open, a
// hard link to another file — is refused with ErrUnsafeFile and left as it is;
// a new file is created 0600 whatever the umask; an existing 0600 or 0644 file
// of the user is appended to.
func TestOpenRefusesUnsafeFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()

	t.Run("NewFileIs0600", func(t *testing.T) {
		path := filepath.Join(dir, "new.jsonl")
		w, err := Open(path, "n1")
		if err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("created with mode %v (%v), want 0600 under umask 0", fi.Mode(), err)
		}
	})

	t.Run("AppendsToOwnFiles", func(t *testing.T) {
		for _, mode := range []os.FileMode{0o600, 0o644, 0o400 | 0o200} {
			path := filepath.Join(dir, fmt.Sprintf("own-%o.jsonl", mode))
			if err := os.WriteFile(path, []byte(`{"mono_ns":1}`+"\n"), mode); err != nil {
				t.Fatal(err)
			}
			w, err := Open(path, "n1")
			if err != nil {
				t.Fatalf("mode %o: %v", mode, err)
			}
			w.Action(ActionOK, "a", 1, "r", "")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := pgtest.JSONLines(t, path); len(got) != 2 {
				t.Fatalf("mode %o: %d lines after appending, want 2", mode, len(got))
			}
		}
	})

	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name, want string
		prepare    func(path string) error
	}{
		{"Symlink", "symbolic link", func(p string) error { return os.Symlink(victim, p) }},
		{"DanglingSymlink", "symbolic link", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
		{"WorldWritable", "chmod 600", func(p string) error { return os.WriteFile(p, nil, 0o666) }},
		{"GroupWritable", "chmod 600", func(p string) error { return os.WriteFile(p, nil, 0o620) }},
		{"FIFO", "not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"Directory", "not a regular file", func(p string) error { return os.Mkdir(p, 0o700) }},
		{"HardLink", "hard link", func(p string) error { return os.Link(victim, p) }},
		{"OtherOwner", "owned by", func(p string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Chown(p, 101, 101) // any uid but ours
		}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".jsonl")
			if err := tt.prepare(path); errors.Is(err, errSkip) {
				t.Skip("needs root to give a file to another user")
			} else if err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(path)
			done := make(chan error, 1)
			go func() {
				w, err := Open(path, "n1")
				if err == nil {
					_ = w.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Open blocked (a FIFO without a reader?)")
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open = %v; want ErrUnsafeFile, one line containing %q", err, tt.want)
			}
			after, _ := os.Lstat(path)
			if before.Mode() != after.Mode() || before.Size() != after.Size() {
				t.Errorf("the refused path changed: %v %d → %v %d", before.Mode(), before.Size(), after.Mode(), after.Size())
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
				t.Fatalf("the file behind the link was written: %q", b)
			}
		})
	}

	t.Run("ReopenRefusesToo", func(t *testing.T) {
		path := filepath.Join(dir, "rotated.jsonl")
		w, err := Open(path, "n1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// logrotate moved the file away; someone put a link in its place.
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, path); err != nil {
			t.Fatal(err)
		}
		if err := w.Reopen(); !errors.Is(err, ErrUnsafeFile) {
			t.Fatalf("Reopen over a symlink = %v, want ErrUnsafeFile", err)
		}
		w.Action(ActionOK, "a", 1, "r", "") // still goes to the old file
		if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
			t.Fatalf("the file behind the link was written: %q", b)
		}
		if got := pgtest.JSONLines(t, path+".1"); len(got) != 1 {
			t.Fatalf("old file: %d lines, want 1", len(got))
		}
	})
}

var errSkip = errors.New("skip")
