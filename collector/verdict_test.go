package collector

import "testing"

// TestVerdictRanks: the known verdicts rank strictly from worst to best in the
// table's order; an unknown verdict ranks between what is known wrong and
// what is known fine, and is troubled. (That the table follows the declared
// constants is tui/show's TestVerdicts, which reads this package's source.)
func TestVerdictRanks(t *testing.T) {
	for i, e := range verdictTable {
		if v := e.v; v.Rank() == unknownRank || !v.Known() {
			t.Errorf("%q ranks as an unknown verdict (rank %d, known %v)", v, v.Rank(), v.Known())
		}
		if i > 0 && e.rank <= verdictTable[i-1].rank {
			t.Errorf("rank of %q (%d) not above %q's (%d)", e.v, e.rank, verdictTable[i-1].v, verdictTable[i-1].rank)
		}
	}
	for _, v := range []Verdict{"FUTURE THING", ""} {
		if r := v.Rank(); r <= VerdictDegraded.Rank() || r >= VerdictOK.Rank() {
			t.Errorf("unknown %q ranks %d: not between DEGRADED and OK", v, r)
		}
		if !v.Troubled() || v.Known() {
			t.Errorf("unknown %q: Troubled %v, Known %v", v, v.Troubled(), v.Known())
		}
	}
}
