package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgleader/pgleader/internal/eventlog"
	"github.com/pgleader/pgleader/lab/child"
)

// supervisedScenarios run with Options.Supervised: the process and database
// faults a supervised command must ride out (kill -9, SIGTERM, resign, handover, SIGSTOP, terminate,
// PostgreSQL restart and failover).
var supervisedScenarios = []string{"kill9", "sigterm", "resign", "handover", "stop-long", "terminate",
	"pg-immediate", "pg-fast", "pg-failover-sync"}

// withoutFlag drops flag and its value from args.
func withoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		if strings.HasPrefix(args[i], flag+"=") {
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// childSpan is one child's life as its node's events file records it.
type childSpan struct {
	node       string
	epoch      int64
	pid        int
	start, end int64 // mono ns; end 0: no exit recorded
	cause      string
	source     string
}

// ChildFigures describe the children of a supervised run.
type ChildFigures struct {
	Started int `json:"started"`
	// AfterDeathOverlapMS: where a supervisor was killed and a successor's
	// child started before the dead supervisor's guard had killed its child, by
	// how much (the guard's reaction against the successor's failover).
	AfterDeathOverlapMS []float64 `json:"after_death_overlap_ms,omitempty"`
}

// deathOverlapBound is how long a dead supervisor's child may overlap a
// successor's: the guard's target for gate closed → group killed.
const deathOverlapBound = 50 * time.Millisecond

// childChecks holds a supervised run to the supervisor's promises: every child's
// exit is recorded (by its supervisor, or by the guard when the supervisor
// died); no two nodes' children of a scope ran at once while both supervisors
// lived (a stop drains before the release, a loss holds the guard until the
// child is gone); a dead supervisor's child was killed within deathOverlapBound
// of a successor's child starting; and no child is alive after the run.
func childChecks(events []eventlog.Record) ([]string, *ChildFigures) {
	// The nodes were just SIGKILLed: their guards kill the children (and record
	// it) within milliseconds. Give them a second before calling one an orphan.
	deadline := time.Now().Add(time.Second)
	for _, r := range events {
		if r.Event == "child_started" {
			for child.Alive(r.PID) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	var spans []*childSpan
	open := map[string]*childSpan{} // source + pid
	for _, r := range events {
		key := r.Source + "/" + strconv.Itoa(r.PID)
		switch r.Event {
		case "child_started":
			sp := &childSpan{node: r.Node, epoch: r.Epoch, pid: r.PID, start: r.MonoNS, source: r.Source}
			spans = append(spans, sp)
			open[key] = sp
		case "child_exited":
			if sp := open[key]; sp != nil {
				sp.end, sp.cause = r.MonoNS, r.Reason
				delete(open, key)
			}
		}
	}
	var out []string
	figs := &ChildFigures{Started: len(spans)}
	if len(spans) == 0 {
		return []string{"supervised run: no child ever started (vacuous)"}, figs
	}
	for _, sp := range spans {
		if sp.end == 0 {
			out = append(out, fmt.Sprintf("child %d of %s (epoch %d) has no recorded exit", sp.pid, sp.node, sp.epoch))
		}
		if child.Alive(sp.pid) {
			out = append(out, fmt.Sprintf("child %d of %s (epoch %d) is alive after the run: an orphan", sp.pid, sp.node, sp.epoch))
		}
	}
	slices.SortFunc(spans, func(a, b *childSpan) int { return int(a.start - b.start) })
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.node == b.node || a.end == 0 {
				continue
			}
			if b.start >= a.end {
				continue
			}
			ov := time.Duration(a.end - b.start)
			if a.cause == "supervisor_gone" {
				figs.AfterDeathOverlapMS = append(figs.AfterDeathOverlapMS, float64(ov.Microseconds())/1000)
			}
			if a.cause != "supervisor_gone" || ov > deathOverlapBound {
				out = append(out, fmt.Sprintf("children ran at once for %.2f ms: %s's (epoch %d, pid %d, ended %s) and %s's (epoch %d, pid %d)",
					float64(a.end-b.start)/1e6, a.node, a.epoch, a.pid, a.cause, b.node, b.epoch, b.pid))
			}
		}
	}
	return out, figs
}
