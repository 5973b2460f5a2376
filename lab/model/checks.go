package model

// The faults each model must take in an exhaustive run (its REACHED markers).
var (
	lockFaults  = []string{"crash", "freeze", "term_lead", "term_guard", "term_watch", "handover", "db_restart", "promotion"}
	leaseFaults = []string{"crash", "freeze", "term_lead", "handover", "db_restart", "db_crash_loses_renewal", "promotion"}
)

// Checks returns every check of the protocol, in the order docs/model.md
// presents them: the models as they ship, the mutations that must fail, what
// the model found, the residual risk design.md states, and the proposed fixes
// (slow: PGLEADER_MODEL_SLOW).
func Checks() []Check {
	return []Check{
		{Name: "lock/safety", Model: "lock.pml", Search: Exhaustive, Reach: lockFaults,
			About: "lock mode as it ships, every state with up to two faults: S1, S3, S5 hold"},
		{Name: "lock/liveness", Model: "lock.pml", Defines: []string{"MAXF=1"}, Search: Liveness,
			About: "lock mode, any one fault: once time passes, some gate is eventually open for good"},
		{Name: "lease/safety", Model: "lease.pml", Search: Exhaustive, Reach: leaseFaults,
			About: "lease mode as it ships, every state with up to two faults: S1, S3, S5 hold"},
		{Name: "lease/liveness", Model: "lease.pml", Defines: []string{"MAXF=1"}, Search: Liveness,
			About: "lease mode, any one fault: once time passes, some gate is eventually open for good"},

		{Name: "mutation/no-guard-wait", Model: "lock.pml", Defines: []string{"MAXF=1", "MUT_NO_GUARD_WAIT"},
			Search: Shortest, Want: "S5",
			About: "the successor does not wait for its predecessor's guard"},
		{Name: "mutation/trust-window-not-below-lease", Model: "lock.pml", Defines: []string{"MAXF=1", "W=4", "L=4"},
			Search: Shortest, Want: "S5",
			About: "trust window W = session lease L"},
		{Name: "mutation/heartbeat-ignores-lock", Model: "lock.pml", Defines: []string{"MUT_HB_NO_LOCK"},
			Search: Shortest, Want: "S5",
			About: "node_heartbeat confirms a term without checking that the calling backend holds the lock"},
		{Name: "mutation/fence-ignores-holder", Model: "lock.pml", Defines: []string{"MAXF=1", "MUT_FENCE_NO_HOLDER"},
			Search: Shortest, Want: "S3",
			About: "fence does not check that the epoch is the current holder's term"},
		{Name: "mutation/no-epoch-floor", Model: "lock.pml", Defines: []string{"MAXF=1", "MUT_NO_FLOOR"},
			Search: Shortest, Want: "S1",
			About: "the epoch floor is not raised after a promotion"},
		{Name: "mutation/lease-trust-window-not-below-lease", Model: "lease.pml", Defines: []string{"MAXF=1", "W=4", "L=4"},
			Search: Shortest, Want: "S5",
			About: "lease mode, trust window W = lease L"},

		{Name: "finding/short-outage-lock", Model: "lock.pml", Defines: []string{"MAXF=1", "DOWN=1"},
			Search: Shortest, Want: "S5",
			About: "lock mode: a promotion or restart that takes less than W; the successor finds no guard to wait for"},
		{Name: "finding/short-outage-lease", Model: "lease.pml", Defines: []string{"MAXF=1", "DOWN=1"},
			Search: Shortest, Want: "S5",
			About: "lease mode: a promotion that takes less than W; the standby never saw the lease"},
		{Name: "finding/lost-renewal-lease", Model: "lease.pml", Defines: []string{"DOWN=1", "NO_PROMOTE"},
			Search: Shortest, Want: "S5",
			About: "lease mode: a crash loses the newest renewal; a follower's watch predates it"},
		{Name: "finding/claim-keeps-stale-guard-lease", Model: "lock.pml",
			Defines: []string{"MAXF=3", "NO_CRASH", "NO_RESTART", "NO_PROMOTE"}, Search: FirstFound, Want: "S5",
			About: "a won claim does not renew a guard lease armed long before: the guard runs out while the gate is open"},
		{Name: "finding/stale-writers-starve-failover", Model: "lock.pml", Defines: []string{"MAXF=1", "STALE_WRITERS"},
			Search: Liveness, Want: "liveness",
			About: "an application that keeps fencing with a dead term's epoch keeps every claim busy"},
		{Name: "residual/both-sessions-terminated", Model: "lock.pml", Defines: []string{"RESIDUAL"},
			Search: Shortest, Want: "S5",
			About: "design.md §2's residual risk: both sessions of a live node terminated at once"},

		{Name: "fix/short-outage-lock", Model: "lock.pml", Defines: []string{"DOWN=1", "FIX_FAILOVER_WAIT"},
			Search: Exhaustive, Reach: lockFaults, Slow: true,
			About: "lock mode with the proposed wait after a restart or promotion: S1, S3, S5 hold with a 1-tick outage"},
		{Name: "fix/short-outage-lease", Model: "lease.pml", Defines: []string{"DOWN=1", "FIX_FAILOVER_WAIT"},
			Search: Exhaustive, Reach: leaseFaults, Slow: true,
			About: "lease mode with the proposed server-side wait: S1, S3, S5 hold with a 1-tick outage"},
		{Name: "fix/claim-pings-guard", Model: "lock.pml",
			Defines: []string{"MAXF=3", "NO_CRASH", "NO_RESTART", "NO_PROMOTE", "FIX_ARM_PINGS"},
			Search:  Exhaustive, Slow: true,
			About: "a claim that pings the guard: S1, S3, S5 hold with up to three freezes, terminations and handovers"},
	}
}
