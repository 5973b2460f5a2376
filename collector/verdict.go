package collector

// The verdict: the one word a view shows for a scope, judged from its
// snapshot, and the order the views sort, count and judge verdicts in.

// Verdict is the one-word state of a scope.
type Verdict string

// Verdicts, from worst to best.
const (
	VerdictSplitBrain Verdict = "SPLIT BRAIN"
	// VerdictUnreachable: the database could not be read: nothing is known of
	// its scopes now (a fleet's member, status over named targets). Worse than
	// NO LEADER, which it may hide; better than a known split brain.
	VerdictUnreachable Verdict = "UNREACHABLE"
	VerdictNoLeader    Verdict = "NO LEADER"
	VerdictDegraded    Verdict = "DEGRADED"
	VerdictOK          Verdict = "OK"
	// VerdictIdle: no leader, and nobody is meant to lead: every candidate of the
	// scope stopped cleanly (or dropped it from its configuration) and no term is
	// open. Not an incident; pgleader scope retire takes it out of the views.
	VerdictIdle Verdict = "IDLE"
)

// Troubled reports whether the verdict is a problem: anything but OK and IDLE (a
// scope nobody is meant to lead).
func (v Verdict) Troubled() bool { return v != VerdictOK && v != VerdictIdle }

// verdictTable is the one list of the known verdicts, worst first as the
// constants are declared, with each one's rank (see Rank). How the views print
// them is package tui/label's.
var verdictTable = [...]struct {
	v    Verdict
	rank int
}{
	{VerdictSplitBrain, 0},
	{VerdictUnreachable, 1},
	{VerdictNoLeader, 2},
	{VerdictDegraded, 3},
	// rank 4: any unknown verdict (unknownRank)
	{VerdictOK, 5},
	{VerdictIdle, 6},
}

// unknownRank stands for a verdict that is not one of the constants: it ranks
// after what is known to be wrong and before what is known to be fine (it is
// Troubled: something to look at).
const unknownRank = 4

// Known reports whether v is one of the Verdict constants.
func (v Verdict) Known() bool { return v.index() >= 0 }

// index is v's place in verdictTable, -1 when unknown.
func (v Verdict) index() int {
	for i, e := range verdictTable {
		if e.v == v {
			return i
		}
	}
	return -1
}

// Rank orders verdicts worst first (lower is worse), the order every view
// sorts, counts and judges them in: SPLIT BRAIN 0, UNREACHABLE 1, NO LEADER 2,
// DEGRADED 3, any unknown verdict 4, OK 5, IDLE 6. Known verdicts have
// distinct ranks; unknown ones share theirs.
func (v Verdict) Rank() int {
	if i := v.index(); i >= 0 {
		return verdictTable[i].rank
	}
	return unknownRank
}

// WorseOf returns the worse of v and w (Rank).
func (v Verdict) WorseOf(w Verdict) Verdict {
	if v.Rank() < w.Rank() {
		return v
	}
	return w
}

// verdict judges a scope from its alerts and its leader: SPLIT BRAIN with a
// split_brain alert, IDLE without a leader when nobody is meant to lead, NO
// LEADER without one otherwise, DEGRADED with any other alert or a late
// heartbeat, OK otherwise.
func verdict(sc *Scope, late, idle bool) Verdict {
	for _, a := range sc.Alerts {
		if a.Kind == AlertSplitBrain {
			return VerdictSplitBrain
		}
	}
	switch {
	case !sc.HasLeader() && idle:
		// Nobody is meant to lead (a cron scope between runs): its alerts
		// show, but it is not a scope without the leader it should have.
		return VerdictIdle
	case !sc.HasLeader():
		return VerdictNoLeader
	case len(sc.Alerts) > 0 || late:
		return VerdictDegraded
	}
	return VerdictOK
}
