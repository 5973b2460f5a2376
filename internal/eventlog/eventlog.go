// Package eventlog writes the events file of `pgleader node --events FILE`
// (docs/design.md, "The CLI contract"): one JSON object per line, appended, flushed per line, so a
// checker can tail the files of several nodes on one host and order their lines
// by mono_ns (CLOCK_MONOTONIC, comparable across processes on one host).
//
// A line carries mono_ns, time (RFC 3339, nanoseconds, UTC), node, scope, event and
// epoch; trust_until_mono_ns, reason, error, latency_ns, holder and request_id
// appear when non-zero. The engine reports a heartbeat once per round trip for all
// the terms it confirmed; the file keeps one heartbeat_ok line per term (the
// contract: a reader follows each scope's trust from its own lines), and a
// heartbeat_failed line per term that ended with it, or one without a scope when
// the node led nothing. The events are the engine's (election.EventKind, turned
// into records by election/electionlog), the workload's action outcomes
// (ActionOK, ActionRejected, ActionUnknown) and a supervisor's child events.
//
// The package is a leaf: it knows the file, not the engine, so a reader of
// events files (the lab's checker) does not link the engine.
//
// The lines of one event are written with a single write(2) on a file opened with
// O_APPEND, so lines of concurrent writers never interleave and a crash loses at most the line
// being written. A Writer is safe for concurrent use.
//
// The file is the node's own: it is created with mode 0600, never through a
// symbolic link (O_NOFOLLOW), and an existing path is used only if it is a
// regular file of the current user, with one link, that neither group nor
// others may write (ErrUnsafeFile otherwise): a path another user prepared
// could otherwise make the node write where it did not mean to, or let that
// user rewrite the record a checker trusts.
package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
)

// ActionKind is the outcome of one workload action.
type ActionKind string

// Action outcomes (the `event` field of their lines).
const (
	// ActionOK: the fenced write committed.
	ActionOK ActionKind = "action_ok"
	// ActionRejected: the database refused the write because its epoch was no
	// longer current (election.ErrFenced); nothing was written.
	ActionRejected ActionKind = "action_rejected"
	// ActionUnknown: the write was sent but its outcome is unknown (commit
	// failed, connection lost); the row may or may not exist.
	ActionUnknown ActionKind = "action_unknown"
	// ActionPaused: a fault-test hook (workload PauseBeforeWrite) paused an action
	// between its gate check and its write; its outcome follows.
	ActionPaused ActionKind = "action_paused"
)

// eventHeartbeatOK is the event of a heartbeat line (election.EventHeartbeatOK),
// the one OmitHeartbeats leaves out.
const eventHeartbeatOK = "heartbeat_ok"

// Record is one line of the file; the field order is the order on disk.
type Record struct {
	MonoNS           int64  `json:"mono_ns"`
	Time             string `json:"time"`
	Node             string `json:"node"`
	Scope            string `json:"scope"`
	Event            string `json:"event"`
	Epoch            int64  `json:"epoch"`
	TrustUntilMonoNS int64  `json:"trust_until_mono_ns,omitempty"`
	Reason           string `json:"reason,omitempty"`
	Error            string `json:"error,omitempty"`
	LatencyNS        int64  `json:"latency_ns,omitempty"`
	Holder           string `json:"holder,omitempty"`
	RequestID        string `json:"request_id,omitempty"`
	PID              int    `json:"pid,omitempty"`            // child_started, child_exited: the child's pid (and process group)
	ExitCode         *int   `json:"exit_code,omitempty"`      // child_exited: exit status, or 128+signal
	ReapedMonoNS     int64  `json:"reaped_mono_ns,omitempty"` // child_exited: when the guard reaped it (its group killed)

	// Source names the file a record was read from (set by Tail, not written): it
	// tells two processes running under the same node id apart.
	Source string `json:"-"`
}

// Writer appends event lines to a file.
type Writer struct {
	node string
	path string

	// omitHeartbeats leaves heartbeat_ok lines out (--events-heartbeats=false):
	// a leader writes two a second, about 33 MB a day.
	omitHeartbeats atomic.Bool

	mu  sync.Mutex
	f   *os.File
	err error // the first write error, returned by Close
}

// Open opens (creating it, mode 0600, if needed) the events file at path for
// appending. node fills the node field of action lines. A path that is not
// safe to write (see the package doc) is an error wrapping ErrUnsafeFile that
// names the fix; the path is left as it is.
func Open(path, node string) (*Writer, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return &Writer{node: node, path: path, f: f}, nil
}

// ErrUnsafeFile reports an events file path that is not the node's own regular
// file: a symbolic link, a FIFO or another kind of file, a hard link, a file of
// another user, or one that group or others may write.
var ErrUnsafeFile = errors.New("unsafe events file")

// openFile opens path for appending as the package doc says. O_NONBLOCK keeps
// a FIFO from blocking the open (it is refused by its type just after); on a
// regular file it changes nothing, and it is cleared anyway.
func openFile(path string) (*os.File, error) {
	unsafe := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrUnsafeFile, path, fmt.Sprintf(format, args...))
	}
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, unsafe("is a symbolic link, which pgleader does not follow there; pass the path of a regular file")
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENXIO): // ENXIO: a FIFO without a reader, a socket
		return nil, unsafe("is not a regular file; pass the path of a regular file")
	case err != nil:
		return nil, fmt.Errorf("open events file: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("open events file: %w", &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	mode := os.FileMode(st.Mode & 0o777)
	switch uid := os.Geteuid(); {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		err = unsafe("is not a regular file; pass the path of a regular file")
	case int(st.Uid) != uid:
		err = unsafe("is owned by uid %d, not by this user (uid %d); remove it, or pass a path of your own", st.Uid, uid)
	case st.Nlink != 1:
		err = unsafe("is a hard link (%d names); remove it, or pass another path", st.Nlink)
	case mode&0o022 != 0:
		err = unsafe("may be written by group or others (mode %04o); chmod 600 %s", mode, path)
	}
	if err == nil {
		err = syscall.SetNonblock(fd, false)
	}
	if err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OmitHeartbeats leaves heartbeat_ok lines out of the file from now on.
func (w *Writer) OmitHeartbeats() { w.omitHeartbeats.Store(true) }

// Reopen closes the file and opens its path again, creating it if needed: after
// logrotate moved it away (SIGHUP), lines go to a new file at the same path.
// The path is checked as by Open. On failure the old file stays in use and the
// error is returned.
func (w *Writer) Reopen() error {
	f, err := openFile(w.path)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return f.Close()
	}
	old := w.f
	w.f = f
	return old.Close()
}

// Child writes what a supervisor (pgleader run) did with its child: event is
// child_started or child_exited; code, cause and reaped (when the guard reaped
// the child, 0 if unknown) are the exit's; mono is when it
// happened (CLOCK_MONOTONIC ns; for a child killed with SIGKILL, when the signal
// was sent), which may be before the line is written (a frozen supervisor records
// its child's death by the guard when it thaws).
func (w *Writer) Child(event, scope string, epoch int64, pid, code int, cause string, mono, reaped int64) {
	r := Record{
		MonoNS: mono,
		Time:   time.Now().Add(time.Duration(mono - monotime.Now())).UTC().Format(time.RFC3339Nano),
		Node:   w.node, Scope: scope, Event: event, Epoch: epoch, PID: pid,
	}
	if event != "child_started" {
		r.ExitCode, r.Reason, r.ReapedMonoNS = &code, cause, reaped
	}
	w.Append(r)
}

// Action writes the outcome of one workload action, stamped now.
func (w *Writer) Action(kind ActionKind, scope string, epoch int64, requestID, reason string) {
	w.Append(Record{
		MonoNS:    monotime.Now(),
		Time:      time.Now().UTC().Format(time.RFC3339Nano),
		Node:      w.node,
		Scope:     scope,
		Event:     string(kind),
		Epoch:     epoch,
		Reason:    reason,
		RequestID: requestID,
	})
}

// Append writes records as lines, all of them with a single write(2). With
// OmitHeartbeats, heartbeat_ok records are left out. Records appended after
// Close are dropped.
func (w *Writer) Append(lines ...Record) {
	omit := w.omitHeartbeats.Load()
	var b []byte
	for _, l := range lines {
		if omit && l.Event == eventHeartbeatOK {
			continue
		}
		line, err := json.Marshal(l)
		if err != nil { // cannot happen: strings and integers only
			panic(err)
		}
		b = append(append(b, line...), '\n')
	}
	if len(b) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return // closed
	}
	if _, err := w.f.Write(b); err != nil && w.err == nil {
		w.err = fmt.Errorf("write events file: %w", err)
	}
}

// Close closes the file. It returns the first error met while writing, if any:
// an events file that silently misses lines would mislead whoever checks it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	err := w.f.Close()
	w.f = nil
	if w.err != nil {
		return w.err
	}
	return err
}
