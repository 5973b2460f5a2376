/*
 * pgleader, lease mode (Config.Mode = ModeLease), as a SPIN model: three nodes,
 * one scope, one connection per node (docs/design.md §4b).
 *
 * The scope's row is the lease: holder, epoch, lease_seq and last_heartbeat
 * (server time). The holder renews it with every heartbeat (lease_seq + 1,
 * synchronous_commit = off: a crash may lose the newest renewal). A follower
 * remembers the lease_seq a heartbeat first showed it and when (its watch),
 * and claims once it has watched it unchanged for L, expecting that lease_seq;
 * the claim tests and locks the row in one statement. lease_seq is not stored:
 * each follower counts the changes since its watch began (wchg), which is all
 * the claim's comparison needs. The SQL functions are inlines named after them
 * (correspondence.txt); docs/model.md explains what is abstracted.
 */

#include "common.pml"

byte lc[N];           /* the node's connection */
byte rage;            /* server time since last_heartbeat (saturated at L) */
byte sage = L;        /* server time since lease_claimable's p_since: the server's start, or the
                       * timeline's first claim (saturated at L; see SERVER_STARTS) */
bit  runfl;           /* the newest renewal is not flushed yet */
byte rprev;           /* rage before that renewal (what a crash brings back) */
bit  wq[N];           /* the follower watches a held lease ... */
byte wage[N];         /* ... first seen wage ticks ago (saturated at L) */
byte wchg[N];         /* changes of lease_seq since (0, 1, 2 = two or more) */
bit  wafter[N];       /* the watch began after the unflushed renewal */
bit  wsame[N];        /* the standby's copy has the lease_seq watched */
byte scnt;            /* changes of the row not yet on the standby (0, 1, 2+) */
bit  bsy[N];
byte bage[N];

#define HBCAP (I > T -> I : T)
#define FREE (rholder == NOBODY || !ropen)
#define EXPIRED (rage >= L)   /* last_heartbeat + session_lease_ms < clock_timestamp() */
#define OLD_TIMELINE (floor > 0 && repoch <= floor)

/* pgleader.lease_claimable(s, q, lease_ms, since, floor), the test of
 * lease_claim_scopes's one statement (test and lock): a free row, but one of
 * an older timeline only once a lease has passed since p_since; a held row
 * once its lease_seq is the one watched (q) and a lease has passed since the
 * later of its last renewal and p_since. p_since is the later of
 * pg_postmaster_start_time() and the timeline's first claim: the model counts
 * it from the restart or the promotion itself (SERVER_STARTS), which is no
 * later, so it lets a claim through no later than the SQL does.
 * MUT_NO_FAILOVER_WAIT: free, or watched and expired (what shipped before,
 * docs/model.md §8.1). */
#ifdef MUT_NO_FAILOVER_WAIT
#define CLAIMABLE(n) (FREE || (wq[n] && wchg[n] == 0 && EXPIRED))
#define SERVER_STARTS skip
#else
#define CLAIMABLE(n) ((FREE && (!OLD_TIMELINE || sage >= L)) || \
	(!FREE && wq[n] && wchg[n] == 0 && EXPIRED && sage >= L))
#define SERVER_STARTS sage = 0
#endif

/* Every change of lease_seq (claim, renewal, release). */
inline seq_changes() {
	for (k : 0 .. N - 1) {
		if
		:: wq[k] && wchg[k] < 2 -> wchg[k]++
		:: else -> skip
		fi
	}
	k = 0;
	if
	:: scnt < 2 -> scnt++
	:: else -> skip
	fi
}

inline end_term(n) {
	role[n] = R_FOLLOW; tep[n] = 0; tage[n] = 0; gate[n] = 0
}

inline forget_watch(n) {
	wq[n] = 0; wage[n] = 0; wchg[n] = 0; wafter[n] = 0; wsame[n] = 0
}

/* session.lose: the terms end (gates closed), the connection closes. The
 * watch belongs to the scope, not the session: it survives (leaseWatch). */
inline lose(n) {
	end_term(n);
	lc[n] = C_NONE; hang[n] = 0; want[n] = 0; hbage[n] = 0; bsy[n] = 0; bage[n] = 0
}

/* pgleader.lease_register: one connection, a fresh token. */
inline lease_register(n) {
	lc[n] = C_OK; hbage[n] = 0; want[n] = 0;
	printf("%c connects: lease_register (a new token)\n", NAME(n))
}

inline gate_opens(n) {
	gate[n] = 1;
	printf("%c gate opens (epoch %d)\n", NAME(n), tep[n]);
	CHECK_S5(n);
	issue_token(n);
	s3_writes()
}

/* pgleader.lease_claim_scopes: test and FOR UPDATE SKIP LOCKED in one
 * statement; epoch from the floor, lease_seq + 1, synchronous_commit = on. */
inline lease_claim_scopes(n) {
	want[n] = 0;
	if
	:: !CLAIMABLE(n) ->
		bsy[n] = 0; bage[n] = 0    /* not busy: endStaleFenced forgets */
	:: else ->
		if
		:: FENCED_ANY ->
			if
			:: !bsy[n] -> bsy[n] = 1; bage[n] = 0
			:: else -> skip
			fi;
			printf("%c lease_claim_scopes: busy (fenced writers of epoch %d hold the row)\n", NAME(n), repoch)
		:: else ->
			e = (repoch > floor -> repoch : floor) + 1;
			printf("%c lease_claim_scopes: acquired epoch %d (", NAME(n), e);
			if
			:: FREE -> printf("the lease was free)\n")
			:: else -> printf("lease %d watched unchanged for L, expired in server time)\n", repoch)
			fi;
			CHECK_S1(e);
			repoch = e; rholder = n; ropen = 1; rfoff = 0; rage = 0; runfl = 0; rprev = 0;
			seq_changes();
			forget_watch(n);
			role[n] = R_LEAD; tep[n] = e; tage[n] = 0; BUSY_FORGOTTEN;
			gate_opens(n)
		fi
	fi
}

/* pgleader.lease_heartbeat, led row: renews if holder, epoch and token are the
 * caller's (lease_seq + 1, last_heartbeat = now(), synchronous_commit = off),
 * not a term end_fenced fenced off (docs/model.md §8.4). MUT_RENEW_FENCED_OFF:
 * a fenced-off term renewed too, as before that fix. */
#ifdef MUT_RENEW_FENCED_OFF
#define RENEWABLE (1)
#else
#define RENEWABLE (!rfoff)
#endif
inline lease_heartbeat_led(n) {
	if
	:: rholder == n && repoch == tep[n] && ropen && RENEWABLE ->
		rprev = rage; rage = 0; runfl = 1;
		seq_changes();
		tage[n] = 0;
		printf("%c lease_heartbeat: epoch %d renewed, trust until {t+%d}\n", NAME(n), tep[n], W);
		if
		:: !gate[n] -> gate_opens(n)
		:: else -> skip
		fi
	:: else ->
		printf("%c lease_heartbeat: epoch %d not ok: gate closed, term ended\n", NAME(n), tep[n]);
		end_term(n)
	fi
}

/* pgleader.lease_heartbeat, follow row, and leaseWatch.observe: free, claim
 * now; a new lease_seq starts the watch (o = when the reply came); one watched
 * for L is claimed. */
inline lease_heartbeat_follow(n) {
	if
	:: FREE -> want[n] = 1; forget_watch(n)
	:: else ->
		if
		:: !wq[n] || wchg[n] > 0 ->
			wq[n] = 1; wage[n] = 0; wchg[n] = 0; wafter[n] = runfl; wsame[n] = (scnt == 0 -> 1 : 0);
			printf("%c lease_heartbeat: %c holds epoch %d, watch starts\n", NAME(n), NAME(rholder), repoch)
		:: else -> skip
		fi
	fi
}

inline heartbeat(n) {
	hbage[n] = 0;
	if
	:: lc[n] == C_SILENT -> hang[n] = 1
	:: lc[n] == C_CLOSED ->
		printf("%c heartbeat fails: the connection is closed\n", NAME(n));
		lose(n)
	:: lc[n] == C_OK && !dbup ->
		printf("%c heartbeat fails: the database is down\n", NAME(n));
		lose(n)
	:: lc[n] == C_OK && dbup ->
		if
		:: role[n] == R_LEAD -> lease_heartbeat_led(n)
		:: else -> lease_heartbeat_follow(n)
		fi
	fi
}

/* pgleader.lease_release_batch (handed_over): gate closed and drained first. */
inline lease_release_batch(n) {
	end_term(n);
	if
	:: rholder == n && repoch == e && ropen ->
		ropen = 0; rholder = NOBODY; runfl = 0; rprev = 0;
		seq_changes();
		printf("%c handover: gate closed, lease_release_batch: term %d closed\n", NAME(n), e);
		s3_writes()
	:: else -> skip
	fi
}

/* pgleader.end_fenced, lease mode, after claims were busy for W: only once
 * the lease on record has run out (last_heartbeat + L, whatever p_since) or
 * was released, it fences the term off (fenced_off_epoch = epoch), then ends
 * every fenced transaction (its two calls as one step, as in lock.pml). */
inline end_fenced(n) {
	FENCED_OFF;
	fxown = NOBODY; bage[n] = 0;
#ifdef MUT_NO_FENCE_OFF
	printf("%c end_fenced: the lease ran out, its fenced transactions are ended\n", NAME(n))
#else
	printf("%c end_fenced: the lease ran out: term %d fenced off, its fenced transactions ended\n", NAME(n), repoch)
#endif
}

/* A follower whose connection is fine heartbeats at the end of each tick
 * (tick_heartbeats), after everything else that happened in it: its reply
 * comes after every renewal it shows (o >= u >= s), and a claim may come at any
 * moment anyway (hints). */
#define FOLLOWS(n) (LIVE(n) && role[n] == R_FOLLOW && lc[n] == C_OK && dbup && !hang[n])

#define NODE_URGENT(n) ( \
	(LIVE(n) && ( \
		(lc[n] == C_NONE && dbup) || \
		lc[n] == C_CLOSED || \
		(lc[n] != C_NONE && !hang[n] && hbage[n] >= I && !FOLLOWS(n)) || \
		(hang[n] && hbage[n] >= T) || \
		(lc[n] == C_OK && dbup && role[n] == R_FOLLOW && cool[n] == 0 && (want[n] || (wq[n] && wage[n] >= L)) && CLAIMABLE(n) && !(FENCED_ANY && bsy[n])) || \
		(bsy[n] && bage[n] >= W && lc[n] == C_OK && dbup && (FREE || EXPIRED)))) || \
	(gate[n] && tage[n] >= W) || \
	(WRITER_FREEZES && fxown == n && proc[n] == P_FROZEN && fage[n] >= L) || \
	(proc[n] == P_FROZEN && fage[n] >= FMAX))

#define URGENT (NODE_URGENT(0) || NODE_URGENT(1) || NODE_URGENT(2) || (!dbup && dage >= DOWNMAX))

proctype Node(byte n) {
	byte e;
	do
	/* The node's process. */
	:: d_step { LIVE(n) && lc[n] == C_NONE && dbup -> lease_register(n) }
	:: d_step { LIVE(n) && lc[n] == C_CLOSED ->
		printf("%c sees its connection closed: gates closed, reconnects\n", NAME(n));
		lose(n) }
	:: d_step { LIVE(n) && lc[n] != C_NONE && !hang[n] && hbage[n] >= I && !FOLLOWS(n) -> heartbeat(n) }
	:: d_step { LIVE(n) && hang[n] && hbage[n] >= T ->
		printf("%c heartbeat timed out: gates closed, reconnects\n", NAME(n));
		lose(n) }
	/* A claim: at a heartbeat that saw the lease free, at the lease timer
	 * (armLeaseTimer), or on any hint. */
	:: d_step { LIVE(n) && lc[n] == C_OK && dbup && role[n] == R_FOLLOW && cool[n] == 0 && (want[n] || (CLAIMABLE(n) && !(FENCED_ANY && bsy[n]))) ->
		lease_claim_scopes(n) }
	:: d_step { LIVE(n) && bsy[n] && bage[n] >= W && lc[n] == C_OK && dbup && (FREE || EXPIRED) -> end_fenced(n) }
	:: d_step { WRITER_RUNS(n) && dbup && fxown == NOBODY && MAY_WRITE(n) ->
		writer_begins(n) }
	:: d_step { WRITER_RUNS(n) && fxown == n ->
		writer_commits(n) }

	/* The clock and the server. */
	:: d_step { gate[n] && tage[n] >= W ->
		gate[n] = 0;
		printf("%c gate closes: trust expired\n", NAME(n)) }
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
		end_term(n); forget_watch(n);
		if
		:: WRITER_FREEZES && fxown == n -> fxown = NOBODY
		:: else -> skip
		fi;
		lc[n] = C_NONE; hang[n] = 0; want[n] = 0; hbage[n] = 0; bsy[n] = 0; bage[n] = 0;
		if
		:: WRITER_FREEZES -> toks[n] = 0
		:: else -> skip
		fi;
		proc[n] = P_DOWN; fage[n] = 0; cool[n] = 0;
		printf("FAULT crash: %c is killed (kill -9); its lease stays until it runs out\n", NAME(n));
		FAULT;
		REACHED(crash) }
	:: d_step { F_FREEZE && faults < MAXF && LIVE(n) ->
		proc[n] = P_FROZEN; fage[n] = 0;
		printf("FAULT freeze: %c stops (SIGSTOP)\n", NAME(n));
		FAULT;
		REACHED(freeze) }
	:: d_step { F_TERMINATE && faults < MAXF && lc[n] == C_OK ->
		lc[n] = C_CLOSED;
		printf("FAULT pg_terminate_backend(%c's connection)\n", NAME(n));
		FAULT;
		REACHED(term_lead) }
	:: d_step { F_HANDOVER && faults < MAXF && LIVE(n) && role[n] == R_LEAD && lc[n] == C_OK && dbup && !FENCED_ANY ->
		e = tep[n];
		lease_release_batch(n);
		e = 0; cool[n] = 2 * I;
		FAULT;
		REACHED(handover) }
	od
}

inline tick_heartbeats() {
	for (i : 0 .. N - 1) {
		if
		:: FOLLOWS(i) && hbage[i] + 1 >= I ->
			hbage[i] = 0;
			lease_heartbeat_follow(i)
		:: else -> skip
		fi
	}
}

/* The database and time. */
proctype Env() {
	byte i;
	do
	:: d_step { !URGENT ->
		tick_heartbeats();
		printf("@tick\n");
#ifdef LIVENESS
		tkp = !tkp;
#endif
		runfl = 0; rprev = 0;   /* the WAL writer flushes within a tick */
		SAT(rage, L); SAT(sage, L);
		for (i : 0 .. N - 1) {
			if
			:: lc[i] != C_NONE -> SAT(hbage[i], HBCAP)
			:: else -> skip
			fi;
			if
			:: role[i] != R_FOLLOW -> SAT(tage[i], W)
			:: else -> skip
			fi;
			if
			:: wq[i] -> SAT(wage[i], L); wafter[i] = 0
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
		settle_check();
		i = 0 }
	:: d_step { !dbup && dage >= DOWN ->
		dbup = 1; dage = 0;
		printf("the database accepts connections again\n");
		s3_writes() }
	:: d_step { STANDBY_BEHIND ->
		replicate(); scnt = 0;
		for (i : 0 .. N - 1) {
			wsame[i] = (wq[i] && wchg[i] == 0 -> 1 : 0)
		}
		i = 0 }

	/* Faults of the database. A crash may lose the newest renewal (its commit
	 * was asynchronous): lease_seq and last_heartbeat go back. */
	:: d_step { F_RESTART && faults < MAXF && dbup ->
		dbup = 0; dage = 0; fxown = NOBODY;
		for (i : 0 .. N - 1) {
			if
			:: lc[i] == C_OK -> lc[i] = C_CLOSED
			:: else -> skip
			fi
		}
		i = 0;
		printf("FAULT database restart: every connection ends, the rows stay\n");
		SERVER_STARTS;
		FAULT;
		REACHED(db_restart) }
	:: d_step { F_RESTART && faults < MAXF && dbup && runfl ->
		dbup = 0; dage = 0; fxown = NOBODY;
		rage = rprev; runfl = 0; rprev = 0;
		SERVER_STARTS;
		for (i : 0 .. N - 1) {
			if
			:: lc[i] == C_OK -> lc[i] = C_CLOSED
			:: else -> skip
			fi;
			if
			:: wq[i] && wafter[i] -> wchg[i] = 1
			:: wq[i] && !wafter[i] && wchg[i] > 0 -> wchg[i]--
			:: else -> skip
			fi;
			wafter[i] = 0
		}
		i = 0;
		printf("FAULT database crash and restart: every connection ends; the newest renewal, not yet flushed, is lost (lease_seq goes back)\n");
		FAULT;
		REACHED(db_crash_loses_renewal) }
	:: d_step { F_PROMOTE && faults < MAXF && dbup && !promoted ->
		dbup = 0; dage = 0; promoted = 1; fxown = NOBODY;
		for (i : 0 .. N - 1) {
			if
			:: lc[i] == C_OK -> lc[i] = C_SILENT
			:: else -> skip
			fi;
			if
			:: wq[i] -> wchg[i] = (wsame[i] -> 0 : 1)
			:: else -> skip
			fi;
			wafter[i] = 0; wsame[i] = 0
		}
		i = 0;
		printf("FAULT the primary's host dies; the standby, at epoch %d, is promoted\n", sepoch);
		repoch = sepoch; rholder = sholder; ropen = sopen; rfoff = sfoff; rage = L; runfl = 0; rprev = 0; scnt = 0;
		SERVER_STARTS;
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
ltl live { ([]<> tkp && []<> !tkp) -> <>[] SOME_LEADER }
#endif
