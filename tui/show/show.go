// Package show is how the views print the collector's vocabulary: the glyph
// and the word of a verdict or a node state, an epoch, how a supervised
// command last ended. The dashboard and the text of `pgleader status` and
// `history` use it, so that a state reads the same in each; JSON output keeps
// the raw values and never goes through it.
//
// Every glyph is there to make a state readable without colour; a value this
// build does not know shows as "?" and its word, never as a known state.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package show

import (
	"fmt"
	"strconv"

	"github.com/pgleader/pgleader/collector"
)

// unknown is the glyph of a verdict or node state this build does not know.
const unknown = "?"

// verdictGlyphs are the marks of the known verdicts. UNREACHABLE is known not
// to be known: it is never the unknown glyph.
var verdictGlyphs = map[collector.Verdict]string{
	collector.VerdictSplitBrain:  "‼",
	collector.VerdictUnreachable: "✖",
	collector.VerdictNoLeader:    "✖",
	collector.VerdictDegraded:    "▲",
	collector.VerdictOK:          "✔",
	collector.VerdictIdle:        "·",
}

// Glyph is the one-character mark of the verdict ("‼", "✖", "▲", "✔", "·"),
// "?" when it is not known.
func Glyph(v collector.Verdict) string {
	if g, ok := verdictGlyphs[v]; ok {
		return g
	}
	return unknown
}

// Verdict is the glyph and the word of the verdict ("✔ OK", "‼ SPLIT
// BRAIN"); an unknown verdict shows as "? " and its word, the empty one as
// "? UNKNOWN".
func Verdict(v collector.Verdict) string {
	if v == "" {
		return unknown + " UNKNOWN"
	}
	return Glyph(v) + " " + string(v)
}

// NodeState is the glyph and the word of a node's state ("● live", "◐ late",
// "✖ down", "■ stopped"; "? " and the word otherwise).
func NodeState(s collector.NodeState) string {
	switch s {
	case collector.NodeLive:
		return "● live"
	case collector.NodeLate:
		return "◐ late"
	case collector.NodeDown:
		return "✖ down"
	case collector.NodeStopped:
		return "■ stopped"
	}
	return unknown + " " + string(s)
}

// Epoch is how the views print an epoch: as is on the first WAL timeline
// ("42"), and as timeline and term after a database failover ("t2·3" for
// (2−1)·2^40 + 3), where the raw value has thirteen digits that can only be
// read by counting them. JSON, TSV and the detail views keep the raw value.
func Epoch(e int64) string {
	if e < 1<<40 {
		return strconv.FormatInt(e, 10)
	}
	return "t" + strconv.FormatInt(e>>40+1, 10) + "·" + strconv.FormatInt(e&(1<<40-1), 10)
}

// LastExit says how the last child of a `pgleader run` node (its
// Node.Supervisor) ended: "exit 3", "signal 9 (SIGKILL)", or "stopped at term
// end (drained)" when it was stopped because its term ended ("" for none, or a
// nil s). The views print it after "last ".
func LastExit(s *collector.Supervised) string {
	switch {
	case s == nil || s.LastExit == nil:
		return ""
	case s.LastExitCause == "exit" || s.LastExitCause == "signal":
		return collector.TermChild{ExitCode: *s.LastExit, Cause: s.LastExitCause}.String()
	case s.LastExitCause == "":
		return fmt.Sprintf("exit %d", *s.LastExit) // recorded by a node before 1.0
	}
	return "stopped at term end (" + s.LastExitCause + ")"
}
