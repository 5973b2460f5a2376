package model

// The faults each model must take in an exhaustive run (its REACHED markers).
var (
	lockFaults  = []string{"crash", "freeze", "term_lead", "term_guard", "term_watch", "handover", "db_restart", "promotion"}
	leaseFaults = []string{"crash", "freeze", "term_lead", "handover", "db_restart", "db_crash_loses_renewal", "promotion"}
)

// Checks returns every check of the protocol, in the order docs/model.md
// presents them: the models as they ship (they must pass), the mutations that
// must fail (among them what shipped before the model's findings were fixed),
// what the model found in what ships, the residual risk design.md states, the
// fix proposed for the finding, and the slow checks (PGLEADER_MODEL_SLOW).
//
// The models' defaults are the shipped protocol: a restart or promotion keeps
// the database down for any time from one tick to W + 1 (DOWN, DOWNMAX), and a
// frozen process resumes within L (FMAX); the liveness checks let a freeze
// last L + W (FMAX=7), long enough for end_fenced to act while it lasts. Lock
// mode's liveness check has STALE_WRITERS, writers that fence with any epoch
// of their node's whatever its process does: every write FencedTx could make,
// and more (§8.3's fix).
func Checks() []Check {
	return []Check{
		{Name: "lock/safety", Model: "lock.pml", Search: Exhaustive, Reach: lockFaults,
			About: "lock mode as it ships, every state with up to two faults, outages of any length: S1, S3, S5 hold"},
		{Name: "lock/liveness", Model: "lock.pml", Defines: []string{"MAXF=1", "FMAX=7", "STALE_WRITERS"}, Search: Liveness,
			About: "lock mode, any one fault, writers that keep fencing with any epoch of theirs: once time passes, some node eventually leads for good"},
		{Name: "lease/safety", Model: "lease.pml", Search: Exhaustive, Reach: leaseFaults,
			About: "lease mode as it ships, every state with up to two faults, outages of any length: S1, S3, S5 hold"},
		{Name: "lease/liveness", Model: "lease.pml", Defines: []string{"MAXF=1", "FMAX=7"}, Search: Liveness,
			About: "lease mode, any one fault, FencedTx's writers: once time passes, some node eventually leads for good"},

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
		{Name: "mutation/no-failover-wait-lock", Model: "lock.pml", Defines: []string{"MAXF=1", "MUT_NO_FAILOVER_WAIT"},
			Search: Shortest, Want: "S5",
			About: "lock mode, claim_scopes as it was before §8.1's fix: after a short outage the successor finds no guard to wait for"},
		{Name: "mutation/blind-debt-not-carried", Model: "lock.pml", Defines: []string{"MUT_NO_BLIND_DEBT"},
			Search: Shortest, Want: "S5",
			About: "lock mode, a blind predecessor waited out, but the debt not carried in unresolved_guards: the next successor owes nothing"},
		{Name: "mutation/no-failover-wait-lease", Model: "lease.pml", Defines: []string{"MAXF=1", "MUT_NO_FAILOVER_WAIT"},
			Search: Shortest, Want: "S5",
			About: "lease mode, a lease counted as before §8.1's fix: the promoted standby never saw it"},
		{Name: "mutation/lease-counts-from-lost-renewal", Model: "lease.pml", Defines: []string{"NO_PROMOTE", "MUT_NO_FAILOVER_WAIT"},
			Search: Shortest, Want: "S5",
			About: "lease mode, a lease counted as before §8.1's fix: a crash loses the newest renewal, a follower's watch predates it"},
		{Name: "mutation/arm-without-ping", Model: "lock.pml",
			Defines: []string{"MAXF=3", "NO_CRASH", "NO_RESTART", "NO_PROMOTE", "MUT_ARM_NO_PING"}, Search: FirstFound, Want: "S5",
			About: "armGuard as it was before §8.2's fix: a won claim keeps a guard lease armed long before, which runs out while the gate is open"},
		{Name: "mutation/no-fence-off", Model: "lock.pml", Defines: []string{"MAXF=1", "STALE_WRITERS", "MUT_NO_FENCE_OFF"},
			Search: Liveness, Want: "liveness",
			About: "end_fenced as it was before §8.3's fix: writers that keep fencing with a dead term's epoch keep every claim busy"},

		{Name: "mutation/lease-renews-fenced-off", Model: "lease.pml", Defines: []string{"MAXF=1", "FMAX=7", "STALE_WRITERS", "MUT_RENEW_FENCED_OFF"},
			Search: Liveness, Want: "liveness",
			About: "lease_heartbeat as it was before §8.4's fix: end_fenced fences off the term of a frozen holder, which resumes and renews it: it leads for good, and fence refuses every write"},
		{Name: "mutation/arm-threshold-touches", Model: "lock.pml",
			Defines: []string{"MAXF=4", "NO_CRASH", "NO_RESTART", "NO_PROMOTE", "NO_HANDOVER", "MUT_ARM_TOUCHES"}, Search: FirstFound, Want: "S5",
			Slow:  true,
			About: "armGuard as it was before §8.5's fix: a lease armed by a statement up to L − W before the claim; the guard may end as the gate closes (they touch, as with W = L)"},
		{Name: "residual/both-sessions-terminated", Model: "lock.pml", Defines: []string{"RESIDUAL"},
			Search: Shortest, Want: "S5",
			About: "design.md §2's residual risk: both sessions of a live node terminated at once"},

		{Name: "lease/fenced-off-not-renewed", Model: "lease.pml",
			Defines: []string{"MAXF=1", "FMAX=7", "STALE_WRITERS"}, Search: Liveness, Slow: true,
			About: "lease mode as it ships, writers that keep fencing with a dead term's epoch, its holder frozen and back: some node eventually leads for good (§8.4's fix)"},

		{Name: "lock/safety-three-faults", Model: "lock.pml",
			Defines: []string{"MAXF=3", "NO_CRASH", "NO_RESTART", "NO_PROMOTE"}, Search: Exhaustive, Slow: true,
			About: "lock mode as it ships, every state with up to three freezes, terminations and handovers: S1, S3, S5 hold (§8.2's and §8.5's fixes)"},
	}
}
