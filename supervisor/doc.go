// Package supervisor runs a command only while this node leads a scope: the
// engine behind `pgleader run`, for programs in any language.
//
// # States
//
//	waiting ──elected──▶ starting ──started──▶ running ──child exits──▶ (restart policy)
//	   ▲                                        │  │
//	   │                 gate closes: SIGKILL ◀─┘  └─▶ draining: SIGTERM, then SIGKILL
//	   └──────────── child group gone, term released or lost ◀──────────┘
//
// The child starts in a process group of its own with PGLEADER_SCOPE,
// PGLEADER_EPOCH and PGLEADER_NODE_ID in its environment, and is reached only
// as a group: what it starts stops with it.
//
// # Invariants
//
//   - No child runs without an open gate, as far as the supervisor's own host
//     can enforce it. When the gate closes suddenly (heartbeat failure, session
//     terminated, trust window over) the group is SIGKILLed at once; a stop
//     (SIGTERM, resign, handover, failback) sends SIGTERM and allows
//     DrainTimeout before SIGKILL, and the term is released only after the group
//     is gone, so a successor's child never overlaps this one.
//   - The child never outlives the supervisor: a guard process (guard.go) holds
//     the child, learns of the supervisor's death from a pipe the kernel closes,
//     and kills the group. A frozen supervisor cannot renew the guard's deadline,
//     which is the gate's own (the trust window, on CLOCK_MONOTONIC): the guard
//     kills the group when the gate would have closed, before the session lease
//     frees the lock for a successor (T < L). A frozen host freezes the guard as
//     well; its child's writes stay safe only through the fence.
//   - Bad input (no command, a command that cannot be executed) is refused
//     before campaigning: a node never wins and then fails to exec.
//
// The child's database writes are fenced by the child itself, inside its own
// transactions, with SELECT pgleader.fence($PGLEADER_SCOPE, $PGLEADER_EPOCH)
// (docs/protocol.md): the supervisor bounds the child's life; the fence makes
// a stale write impossible even when that bound fails.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package supervisor
