/*
 * pgleader, lock mode (the default), as a SPIN model: three nodes, one scope.
 *
 * Each node has a process (up, frozen or crashed), a leadership session (its
 * backend holds the scope's advisory lock while the node leads), a guard
 * session (the guard lock, with idle_session_timeout = L armed while the node
 * leads) and a watch session (the wait for predecessors' guards). The database
 * has the lock table, the scope's leader_state row and a standby. The SQL
 * functions are inlines named after them (correspondence.txt lists them with
 * their declarations); the engine's steps are the Node process's options.
 * Wake-ups (notifications, the ring) are hints: a follower may claim at any
 * moment, and its heartbeat makes it claim within I when the scope has no live
 * holder. docs/model.md explains what is abstracted and why that is sound.
 */

#include "common.pml"

/* The lock table and the lock-mode columns of leader_state. */
byte lockh = NOBODY;  /* whose leadership backend holds the scope's advisory lock */
byte rguard = NOBODY; /* holder_guard_key: a node (its current guard session), DEADKEY or NOBODY */
byte runres;          /* unresolved_guards: a bit per node, naming its current guard (BLINDBIT: a bound owed) */
bit  rstale;          /* the open term's last heartbeat is older than the server (a restart) */

byte lh[N];           /* leadership connection */
byte gh[N];           /* guard connection */
byte lidle[N];        /* ticks since the leadership backend's last statement ended */
byte gidle[N];        /* ticks since the guard backend's last statement ended */
bit  glease[N];       /* the guard's idle_session_timeout = L is armed */
byte wage[N];         /* pending: ticks since the claim returned */
byte wmask[N];        /* pending: the guards still to wait for (a bit per node) */
bit  wbound[N];       /* pending: wait out the bound whatever the guards do */
bit  bsy[N];          /* claims answer busy (fenced writers hold the row) ... */
byte bage[N];         /* ... since bage ticks */

#define HBCAP (I > T -> I : T)
#define HELD(g) (gh[g] == C_OK)
#define HELDMASK ((HELD(0) -> 1 : 0) | (HELD(1) -> 2 : 0) | (HELD(2) -> 4 : 0))
#define LIVE_HOLDER (rholder < N && ropen && lockh == rholder)

/* A session that was terminated while its process runs is seen before another
 * session of that process is terminated (RESIDUAL lifts it: design.md §2,
 * "Both sessions of a live node terminated at the same instant"). */
#ifdef RESIDUAL
#define ONE_AT_A_TIME(n) (1)
#else
#define ONE_AT_A_TIME(n) (lh[n] != C_CLOSED && gh[n] != C_CLOSED)
#endif

/* node_heartbeat confirms a led term only for the backend that holds its lock. */
#ifdef MUT_HB_NO_LOCK
#define HB_CONFIRMS(node, e, backend) (repoch == (e) && rholder == (node) && ropen)
#else
#define HB_CONFIRMS(node, e, backend) (repoch == (e) && rholder == (node) && ropen && lockh == (backend))
#endif

/* Scope.lockAwaitPredecessors: every guard free, or claim_returned + W + margin. */
#ifdef MUT_NO_GUARD_WAIT
#define WAIT_DONE(n) (1)
#else
#define WAIT_DONE(n) (wage[n] >= W + M || (!wbound[n] && wmask[n] == 0))
#endif

/* A node's guard session ends: its key is free for good (keys are per session). */
inline guard_ends(g) {
	if
	:: rguard == g -> rguard = DEADKEY
	:: else -> skip
	fi;
	runres = runres & ~(1 << g);
	wmask[0] = wmask[0] & ~(1 << g);
	wmask[1] = wmask[1] & ~(1 << g);
	wmask[2] = wmask[2] & ~(1 << g);
	glease[g] = 0; gidle[g] = 0
}

/* A node's leadership backend ends: the server frees its locks. */
inline lead_ends(n) {
	lidle[n] = 0;
	if
	:: lockh == n -> lockh = NOBODY
	:: else -> skip
	fi
}

inline print_guards(m) {
	if
	:: m == 0 -> printf(" none")
	:: else ->
		if
		:: m & 1 -> printf(" A's")
		:: else -> skip
		fi;
		if
		:: m & 2 -> printf(" B's")
		:: else -> skip
		fi;
		if
		:: m & 4 -> printf(" C's")
		:: else -> skip
		fi
	fi
}

inline end_term(n) {
	role[n] = R_FOLLOW; tep[n] = 0; tage[n] = 0; gate[n] = 0;
	wage[n] = 0; wmask[n] = 0; wbound[n] = 0
}

/* session.lose: every term ends (gates closed), then both connections close. */
inline lose(n) {
	end_term(n);
	if
	:: lh[n] == C_OK -> lead_ends(n)
	:: else -> skip
	fi;
	if
	:: gh[n] == C_OK -> guard_ends(n)
	:: else -> skip
	fi;
	lh[n] = C_NONE; gh[n] = C_NONE; lidle[n] = 0; gidle[n] = 0; glease[n] = 0;
	hang[n] = 0; want[n] = 0; hbage[n] = 0; bsy[n] = 0; bage[n] = 0
}

/* §6.1: guard session (session_lock), leadership session with its beacon
 * (session_lock, register_node), then a claim of every scope. */
inline register_node(n) {
	lh[n] = C_OK; gh[n] = C_OK; lidle[n] = 0; gidle[n] = 0; glease[n] = 0;
	hbage[n] = 0; want[n] = 1;
	printf("%c opens its sessions: session_lock(guard), session_lock(beacon), register_node\n", NAME(n))
}

/* lockMode.beforeClaim, Scope.lead: armGuard(since) arms the guard's lease;
 * one armed already is pinged unless the guard's last statement started at or
 * after since − (L − W). In ticks the model takes the riskier reading: no ping
 * while the last statement is at most L − W ticks old (it may have started up
 * to a tick more than L − W before since). beforeClaim's call (since = now)
 * and lead's after a won claim (since = the claim's start) fall in the same
 * tick: the second has nothing left to do. MUT_ARM_NO_PING: nothing is sent
 * when the lease is armed (what shipped before, docs/model.md §8.2).
 * The code pings unless the statement started at or after since − (L − W)/2:
 * at the model's resolution, a statement of the claim's own tick.
 * MUT_ARM_TOUCHES: the threshold that shipped before §8.5's fix, since −
 * (L − W), whose guard may end as the gate closes. */
#ifdef MUT_ARM_TOUCHES
#define ARM_STALE(n) (gidle[n] > L - W)
#else
#define ARM_STALE(n) (gidle[n] >= L - W)
#endif
inline arm_guard(n) {
	if
	:: gh[n] == C_OK && !glease[n] ->
		glease[n] = 1; gidle[n] = 0;
		printf("%c guard: idle_session_timeout = L armed, alongside the claim\n", NAME(n))
#ifndef MUT_ARM_NO_PING
	:: gh[n] == C_OK && glease[n] && ARM_STALE(n) ->
		printf("%c guard: pinged alongside the claim (its lease was armed by a statement %d ticks ago)\n", NAME(n), gidle[n]);
		gidle[n] = 0
#endif
	:: else -> skip
	fi
}

/* pgleader.claim_scopes, for one scope: pg_try_advisory_lock on the calling
 * backend; the row FOR UPDATE SKIP LOCKED (busy when fenced writers hold it);
 * wait_guards = the open term's guard and the unresolved ones, those still held;
 * epoch = greatest(epoch, epoch_floor()) + 1, synchronous_commit = on. */
inline claim_scopes(n) {
	lidle[n] = 0;
	arm_guard(n);
	if
	:: lockh != NOBODY && lockh != n ->
		if
		:: want[n] -> printf("%c claim_scopes: lock held by %c, follows\n", NAME(n), NAME(lockh))
		:: else -> skip
		fi;
		want[n] = 0; bsy[n] = 0; bage[n] = 0    /* not busy: endStaleFenced forgets */
	:: else ->
		lockh = n;
		if
		:: FENCED_ANY ->
			lockh = NOBODY; want[n] = 0;
			if
			:: !bsy[n] -> bsy[n] = 1; bage[n] = 0
			:: else -> skip
			fi;
			printf("%c claim_scopes: busy (fenced writers of epoch %d hold the row), lock given back\n", NAME(n), repoch)
		:: else -> grant(n)
		fi
	fi
}

/* claim_scopes's blind predecessor, whose guard proves nothing: an open term
 * the server restarted under (pg_postmaster_start_time() > last_heartbeat),
 * any scope whose epoch is at or below the timeline's floor (the first claim
 * after a promotion, whatever the standby has), or a debt carried in
 * unresolved_guards (a NULL element: BLINDBIT). It is answered prev_closed =
 * false, prev_guard_key NULL (lockAwaitPredecessors waits out max(W,
 * prev_trust_ms) + margin, and the guards in wait_guards meanwhile), and the
 * debt is stored again, until node_heartbeat's p_settled clears it.
 * MUT_NO_FAILOVER_WAIT: none of it (what shipped before, docs/model.md §8.1);
 * MUT_NO_BLIND_DEBT: blind, but the debt is not carried to the next claim. */
#define BLINDBIT 8
#ifdef MUT_NO_FAILOVER_WAIT
#define BLIND 0
#else
#define BLIND ((ropen && rstale) || (floor > 0 && repoch <= floor) || (runres & BLINDBIT))
#endif
#if defined(MUT_NO_FAILOVER_WAIT) || defined(MUT_NO_BLIND_DEBT)
#define BLIND_CARRIED 0
#else
#define BLIND_CARRIED 1
#endif

inline grant(n) {
	k = (BLIND -> 1 : 0);
	wmask[n] = (runres | (ropen && rguard < N -> (1 << rguard) : 0)) & HELDMASK;
	wbound[n] = ((ropen && rguard == NOBODY) || k -> 1 : 0);
	runres = wmask[n] | (BLIND_CARRIED && k -> BLINDBIT : 0);
	k = 0;
	wmask[n] = wmask[n] & ~(1 << n);         /* this session's own guard is skipped */
	e = (repoch > floor -> repoch : floor) + 1;
	printf("%c claim_scopes: acquired epoch %d (previous term %d ", NAME(n), e, repoch);
	if
	:: ropen -> printf("open")
	:: else -> printf("closed")
	fi;
	printf("; guards to wait for:");
	print_guards(wmask[n]);
	if
	:: wbound[n] -> printf("; blind: waits out W + margin")
	:: else -> skip
	fi;
	printf(")\n");
	CHECK_S1(e);
	repoch = e; rholder = n; ropen = 1; rstale = 0; rfoff = 0;
	rguard = (HELD(n) -> n : DEADKEY);      /* p_guard_key: the caller's guard, dead if its session is */
	role[n] = R_PEND; tep[n] = e; tage[n] = 0; wage[n] = 0;
	want[n] = 0; BUSY_FORGOTTEN;
	s3_writes()
}

/* pgleader.node_heartbeat, the led row: ok only if the row still has this
 * epoch, holder and an open term, and the calling backend holds the lock;
 * p_settled clears unresolved_guards. synchronous_commit = off. */
inline node_heartbeat_led(n) {
	if
	:: HB_CONFIRMS(n, tep[n], n) ->
		rstale = 0;
		if
		:: role[n] == R_LEAD -> runres = 0
		:: else -> skip
		fi;
		tage[n] = 0;
		printf("%c node_heartbeat: epoch %d ok, trust until {t+%d}\n", NAME(n), tep[n], W);
		if
		:: role[n] == R_LEAD && !gate[n] -> gate_opens(n)
		:: else -> skip
		fi
	:: else ->
		printf("%c node_heartbeat: epoch %d not ok: gate closed, term ended, release_batch gives the lock back\n",
			NAME(n), tep[n]);
		end_term(n);
		if
		:: lockh == n -> lockh = NOBODY
		:: else -> skip
		fi
	fi
}

/* pgleader.node_heartbeat, the follow row: a scope without a live holder is
 * claimed now (the fallback for every lost wake-up). */
inline node_heartbeat_follow(n) {
	if
	:: !LIVE_HOLDER ->
		want[n] = 1
	:: else -> skip
	fi
}

/* session.lockHeartbeat: one round trip on the leadership session and, while
 * the node leads, a ping of the leased guard (guardBeat); it fails, closing
 * every gate, if either connection is gone, and hangs on a vanished server
 * until T has passed. */
inline heartbeat(n) {
	hbage[n] = 0;
	if
	:: lh[n] == C_CLOSED || gh[n] == C_CLOSED ->
		printf("%c heartbeat fails: a connection is closed\n", NAME(n));
		lose(n)
	:: else ->
		if
		:: lh[n] == C_SILENT || gh[n] == C_SILENT ->
			hang[n] = 1
		:: else ->
			lidle[n] = 0;
			if
			:: role[n] != R_FOLLOW -> glease[n] = 1; gidle[n] = 0
			:: else -> glease[n] = 0; gidle[n] = 0
			fi;
			if
			:: role[n] != R_FOLLOW -> node_heartbeat_led(n)
			:: else -> node_heartbeat_follow(n)
			fi
		fi
	fi
}

inline gate_opens(n) {
	gate[n] = 1;
	printf("%c gate opens (epoch %d)\n", NAME(n), tep[n]);
	CHECK_S5(n);
	issue_token(n);
	s3_writes()
}

/* term.open after lockAwaitPredecessors: the gate opens if the last
 * confirmation is within the trust window. */
inline open_gate(n) {
	role[n] = R_LEAD;
	if
	:: wage[n] >= W + M -> printf("%c predecessors safe: W + margin waited out\n", NAME(n))
	:: !wbound[n] && wmask[n] == 0 -> printf("%c predecessors safe: their guards are free\n", NAME(n))
	:: else -> printf("%c does not wait for its predecessors (mutation)\n", NAME(n))
	fi;
	wage[n] = 0; wmask[n] = 0; wbound[n] = 0;
	if
	:: tage[n] < W -> gate_opens(n)
	:: else -> skip
	fi
}

/* pgleader.release_batch (handed_over): after the gate closed and the work
 * drained, the term is closed and the lock given back, in one transaction. */
inline release_batch(n) {
	end_term(n); lidle[n] = 0;
	if
	:: repoch == e && rholder == n && ropen && lockh == n ->
		ropen = 0; rholder = NOBODY; rguard = NOBODY; runres = 0; lockh = NOBODY;
		printf("%c handover: gate closed, release_batch: term %d closed, lock given back\n", NAME(n), e);
		s3_writes()
	:: else ->
		if
		:: lockh == n -> lockh = NOBODY
		:: else -> skip
		fi
	fi
}

/* pgleader.end_fenced, after claims were busy for W: only while no session
 * holds the scope's lock (it takes the lock itself, without waiting), it
 * fences the term off (fenced_off_epoch = epoch: FENCED_OFF), then ends every
 * fenced transaction. Its two calls (one audits what it found, the next ends
 * it) are one step: no fence passes between them (the term is fenced off). */
inline end_fenced(n) {
	FENCED_OFF;
	fxown = NOBODY;
	bage[n] = 0; lidle[n] = 0;
#ifdef MUT_NO_FENCE_OFF
	printf("%c end_fenced: the scope is led by no session, its fenced transactions are ended\n", NAME(n))
#else
	printf("%c end_fenced: the scope is led by no session: term %d fenced off, its fenced transactions ended\n", NAME(n), repoch)
#endif
}

/* A follower whose sessions are fine heartbeats at the tick (tick_heartbeats):
 * it only keeps its session busy and learns whether to claim, and a claim may
 * come at any moment anyway (hints). */
#define FOLLOWS(n) (LIVE(n) && role[n] == R_FOLLOW && lh[n] == C_OK && gh[n] == C_OK && !hang[n])

#define NODE_URGENT(n) ( \
	(LIVE(n) && ( \
		(lh[n] == C_NONE && dbup) || \
		lh[n] == C_CLOSED || gh[n] == C_CLOSED || \
		(lh[n] != C_NONE && !hang[n] && hbage[n] >= I && !FOLLOWS(n)) || \
		(hang[n] && hbage[n] >= T) || \
		(want[n] && lh[n] == C_OK && role[n] == R_FOLLOW && cool[n] == 0) || \
		(role[n] == R_PEND && glease[n] && WAIT_DONE(n)) || \
		(bsy[n] && bage[n] >= W && lockh == NOBODY && dbup && lh[n] == C_OK))) || \
	(gate[n] && tage[n] >= W) || \
	(lh[n] == C_OK && lidle[n] >= L) || \
	(gh[n] == C_OK && glease[n] && gidle[n] >= L) || \
	(WRITER_FREEZES && fxown == n && proc[n] == P_FROZEN && fage[n] >= L) || \
	(proc[n] == P_FROZEN && fage[n] >= FMAX))

#define URGENT (NODE_URGENT(0) || NODE_URGENT(1) || NODE_URGENT(2) || (!dbup && dage >= DOWNMAX))

proctype Node(byte n) {
	byte e;
	do
	/* The node's process: the engine, and the application's long writes. */
	:: d_step { LIVE(n) && lh[n] == C_NONE && dbup -> register_node(n) }
	:: d_step { LIVE(n) && (lh[n] == C_CLOSED || gh[n] == C_CLOSED) ->
		printf("%c sees a session closed: gates closed, sessions dropped\n", NAME(n));
		lose(n) }
	:: d_step { LIVE(n) && lh[n] != C_NONE && !hang[n] && hbage[n] >= I && !FOLLOWS(n) -> heartbeat(n) }
	:: d_step { LIVE(n) && hang[n] && hbage[n] >= T ->
		printf("%c heartbeat timed out: gates closed, sessions dropped\n", NAME(n));
		lose(n) }
	:: d_step { LIVE(n) && lh[n] == C_OK && role[n] == R_FOLLOW && cool[n] == 0 -> claim_scopes(n) }
	:: d_step { LIVE(n) && role[n] == R_PEND && glease[n] && WAIT_DONE(n) -> open_gate(n) }
	:: d_step { LIVE(n) && bsy[n] && bage[n] >= W && lockh == NOBODY && dbup && lh[n] == C_OK -> end_fenced(n) }
	:: d_step { WRITER_RUNS(n) && dbup && fxown == NOBODY && MAY_WRITE(n) ->
		writer_begins(n) }
	:: d_step { WRITER_RUNS(n) && fxown == n ->
		writer_commits(n) }

	/* The clock and the server. */
	:: d_step { gate[n] && tage[n] >= W ->
		gate[n] = 0;
		printf("%c gate closes: trust expired\n", NAME(n)) }
	:: d_step { lh[n] == C_OK && lidle[n] >= L ->
		lh[n] = C_CLOSED; lead_ends(n);
		printf("server ends %c's idle leadership session (idle_session_timeout): its locks are free\n", NAME(n)) }
	:: d_step { gh[n] == C_OK && glease[n] && gidle[n] >= L ->
		gh[n] = C_CLOSED; guard_ends(n);
		printf("server ends %c's idle guard session (idle_session_timeout): its guard is free\n", NAME(n)) }
	:: d_step { WRITER_FREEZES && fxown == n && proc[n] == P_FROZEN && fage[n] >= L ->
		fxown = NOBODY;
		printf("server ends %c's idle fenced transaction (idle_in_transaction_session_timeout)\n", NAME(n)) }
	:: d_step { proc[n] == P_FROZEN ->
		proc[n] = P_UP; fage[n] = 0;
		printf("%c resumes\n", NAME(n)) }
	:: d_step { proc[n] == P_DOWN ->
		proc[n] = P_UP;
		printf("%c starts again\n", NAME(n)) }

	/* Faults. */
	:: d_step { F_CRASH && faults < MAXF && proc[n] != P_DOWN ->
		end_term(n);
		if
		:: lh[n] == C_OK -> lead_ends(n)
		:: else -> skip
		fi;
		if
		:: gh[n] == C_OK -> guard_ends(n)
		:: else -> skip
		fi;
		if
		:: WRITER_FREEZES && fxown == n -> fxown = NOBODY
		:: else -> skip
		fi;
		lh[n] = C_NONE; gh[n] = C_NONE; lidle[n] = 0; gidle[n] = 0; glease[n] = 0;
		hang[n] = 0; want[n] = 0; hbage[n] = 0; bsy[n] = 0; bage[n] = 0;
		if
		:: WRITER_FREEZES -> toks[n] = 0
		:: else -> skip
		fi;
		proc[n] = P_DOWN; fage[n] = 0; cool[n] = 0;
		printf("FAULT crash: %c is killed (kill -9): its sessions close, the server frees its locks\n", NAME(n));
		FAULT;
		REACHED(crash) }
	:: d_step { F_FREEZE && faults < MAXF && LIVE(n) ->
		proc[n] = P_FROZEN; fage[n] = 0;
		printf("FAULT freeze: %c stops (SIGSTOP); its sessions stay open\n", NAME(n));
		FAULT;
		REACHED(freeze) }
	:: d_step { F_TERMINATE && faults < MAXF && lh[n] == C_OK && ONE_AT_A_TIME(n) ->
		lh[n] = C_CLOSED; lead_ends(n);
		printf("FAULT pg_terminate_backend(%c's leadership session): its locks are free, %c runs on\n", NAME(n), NAME(n));
		FAULT;
		REACHED(term_lead) }
	:: d_step { F_TERMINATE && faults < MAXF && gh[n] == C_OK && ONE_AT_A_TIME(n) ->
		gh[n] = C_CLOSED; guard_ends(n);
		printf("FAULT pg_terminate_backend(%c's guard session): its guard is free, %c runs on\n", NAME(n), NAME(n));
		FAULT;
		REACHED(term_guard) }
	:: d_step { F_TERMINATE && faults < MAXF && role[n] == R_PEND && wmask[n] != 0 && !wbound[n] ->
		wbound[n] = 1;
		printf("FAULT pg_terminate_backend(%c's watch session): it cannot see the guards, waits out the bound\n", NAME(n));
		FAULT;
		REACHED(term_watch) }
	:: d_step { F_HANDOVER && faults < MAXF && LIVE(n) && role[n] == R_LEAD && lh[n] == C_OK && !FENCED_ANY ->
		e = tep[n];
		release_batch(n);
		e = 0; cool[n] = 2 * I;
		FAULT;
		REACHED(handover) }
	od
}

/* The followers' heartbeats, at the tick (see FOLLOWS). */
inline tick_heartbeats() {
	for (i : 0 .. N - 1) {
		if
		:: FOLLOWS(i) && hbage[i] >= I ->
			hbage[i] = 0; lidle[i] = 0; glease[i] = 0; gidle[i] = 0;
			node_heartbeat_follow(i)
		:: else -> skip
		fi
	}
}

/* The database and time. */
proctype Env() {
	byte i;
	do
	:: d_step { !URGENT ->
		printf("@tick\n");
#ifdef LIVENESS
		tkp = !tkp;
#endif
		for (i : 0 .. N - 1) {
			if
			:: lh[i] != C_NONE -> SAT(hbage[i], HBCAP)
			:: else -> skip
			fi;
			if
			:: role[i] != R_FOLLOW -> SAT(tage[i], W)
			:: else -> skip
			fi;
			if
			:: role[i] == R_PEND -> SAT(wage[i], W + M)
			:: else -> skip
			fi;
			if
			:: lh[i] == C_OK -> SAT(lidle[i], L)
			:: else -> skip
			fi;
			if
			:: gh[i] == C_OK && glease[i] -> SAT(gidle[i], L)
			:: else -> skip
			fi;
			if
			:: proc[i] == P_FROZEN -> SAT(fage[i], FMAX)
			:: else -> skip
			fi;
			if
			:: cool[i] > 0 -> cool[i]--
			:: else -> skip
			fi;
			if
			:: bsy[i] -> SAT(bage[i], W)
			:: else -> skip
			fi
		}
		if
		:: !dbup -> SAT(dage, DOWNMAX)
		:: else -> skip
		fi;
		tick_heartbeats();
		settle_check();
		i = 0 }
	:: d_step { !dbup && dage >= DOWN ->
		dbup = 1; dage = 0;
		printf("the database accepts sessions again\n");
		s3_writes() }
	:: d_step { STANDBY_BEHIND ->
		replicate() }
	/* Another login's backend calls node_heartbeat naming the holder, its epoch
	 * and p_settled (every argument attacker-chosen): the lock check refuses it. */
	:: d_step { dbup && ropen && runres != 0 && HB_CONFIRMS(rholder, repoch, FOREIGN) ->
		runres = 0; rstale = 0;
		printf("another backend calls node_heartbeat(%c, epoch %d, settled): accepted, unresolved_guards cleared\n",
			NAME(rholder), repoch) }

	/* Faults of the database. */
	:: d_step { F_RESTART && faults < MAXF && dbup ->
		dbup = 0; dage = 0; rstale = ropen; lockh = NOBODY; fxown = NOBODY;
		for (i : 0 .. N - 1) {
			if
			:: lh[i] == C_OK -> lh[i] = C_CLOSED; lidle[i] = 0
			:: else -> skip
			fi;
			if
			:: gh[i] == C_OK -> gh[i] = C_CLOSED; guard_ends(i)
			:: else -> skip
			fi
		}
		i = 0;
		printf("FAULT database restart: every session ends, the rows stay\n");
		FAULT;
		REACHED(db_restart) }
	:: d_step { F_PROMOTE && faults < MAXF && dbup && !promoted ->
		dbup = 0; dage = 0; promoted = 1; lockh = NOBODY; fxown = NOBODY;
		for (i : 0 .. N - 1) {
			if
			:: lh[i] == C_OK -> lh[i] = C_SILENT; lidle[i] = 0
			:: else -> skip
			fi;
			if
			:: gh[i] == C_OK -> gh[i] = C_SILENT; guard_ends(i)
			:: else -> skip
			fi
		}
		i = 0;
		printf("FAULT the primary's host dies; the standby, at epoch %d, is promoted\n", sepoch);
		repoch = sepoch; rholder = sholder; ropen = sopen; rfoff = sfoff; runres = 0; rstale = 0;
		rguard = (sopen -> DEADKEY : NOBODY);
#ifndef MUT_NO_FLOOR
		floor = maxg;
#endif
		FAULT;
		forget_standby();
		REACHED(promotion) }
	od
}

init {
	atomic {
		run Node(0); run Node(1); run Node(2); run Env()
	}
}

#ifdef LIVENESS
/* A node that stays up and campaigns eventually leads for good: once time
 * passes and the faults (a finite budget) are over, some gate stays open, with
 * an epoch the fence admits. */
ltl live { ([]<> tkp && []<> !tkp) -> <>[] SOME_LEADER }
#endif
