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
// the node led nothing. The events are the engine's (election.EventKind) and the
// workload's action outcomes (ActionOK, ActionRejected, ActionUnknown).
//
// The lines of one event are written with a single write(2) on a file opened with
// O_APPEND, so lines of concurrent writers never interleave and a crash loses at most the line
// being written. A Writer is safe for concurrent use.
package eventlog

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgleader/pgleader/election"
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

// Writer appends event lines to a file. It implements election.Observer.
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

// Open opens (creating it if needed) the events file at path for appending.
// node fills the node field of action lines.
func Open(path, node string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open events file: %w", err)
	}
	return &Writer{node: node, path: path, f: f}, nil
}

// OmitHeartbeats leaves heartbeat_ok lines out of the file from now on.
func (w *Writer) OmitHeartbeats() { w.omitHeartbeats.Store(true) }

// Reopen closes the file and opens its path again, creating it if needed: after
// logrotate moved it away (SIGHUP), lines go to a new file at the same path. On
// failure the old file stays in use and the error is returned.
func (w *Writer) Reopen() error {
	f, err := os.OpenFile(w.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("reopen events file: %w", err)
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
	w.write(r)
}

// Observe writes an engine event's lines. It is called synchronously from the
// engine's goroutines and costs one write(2).
func (w *Writer) Observe(ev election.Event) {
	if ev.Kind == election.EventHeartbeatOK && w.omitHeartbeats.Load() {
		return
	}
	w.write(FromEvent(ev)...)
}

// FromEvent converts an engine event to its lines: one, or for a heartbeat one per
// term of the round trip (a failed heartbeat of a node that led nothing: one line
// without a scope; a successful one: none).
func FromEvent(ev election.Event) []Record {
	r := Record{
		MonoNS:           ev.MonoNS,
		Time:             ev.Time.UTC().Format(time.RFC3339Nano),
		Node:             ev.Node,
		Scope:            ev.Scope,
		Event:            string(ev.Kind),
		Epoch:            ev.Epoch,
		TrustUntilMonoNS: ev.TrustUntilMonoNS,
		Reason:           string(ev.Reason),
		LatencyNS:        int64(ev.Latency),
		Holder:           ev.Holder,
	}
	if ev.Err != nil {
		r.Error = ev.Err.Error()
	}
	switch ev.Kind {
	case election.EventHeartbeatOK, election.EventHeartbeatFailed:
	default:
		return []Record{r}
	}
	if len(ev.Terms) == 0 {
		if ev.Kind == election.EventHeartbeatFailed {
			return []Record{r}
		}
		return nil
	}
	out := make([]Record, len(ev.Terms))
	for i, t := range ev.Terms {
		out[i] = r
		out[i].Scope, out[i].Epoch = t.Scope, t.Epoch
	}
	return out
}

// Action writes the outcome of one workload action, stamped now.
func (w *Writer) Action(kind ActionKind, scope string, epoch int64, requestID, reason string) {
	w.write(Record{
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

func (w *Writer) write(lines ...Record) {
	if len(lines) == 0 {
		return
	}
	var b []byte
	for _, l := range lines {
		line, err := json.Marshal(l)
		if err != nil { // cannot happen: strings and integers only
			panic(err)
		}
		b = append(append(b, line...), '\n')
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
// Events observed after Close are dropped.
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
