/*
 * What the lock-mode and lease-mode models share: the parameters, model time,
 * the nodes' processes and fenced transactions, the epoch and the properties.
 * docs/model.md explains the model; lock.pml and lease.pml include this file.
 *
 * Time is discrete: one tick stands for 500 ms, and the defaults below are the
 * engine's (I = 500 ms, T = 500 ms, W = 1.5 s, L = 2 s). Every timer is an age in
 * ticks, counted up by the tick and saturated where no comparison looks beyond,
 * so the state space is finite and runs may be infinite (liveness). Events within
 * one tick are interleaved freely: they are ordered, not simultaneous.
 */

#ifndef I
#define I 1           /* heartbeat interval */
#endif
#ifndef T
#define T 1           /* heartbeat timeout: a heartbeat that takes T or longer fails */
#endif
#ifndef W
#define W 3           /* trust window */
#endif
#ifndef L
#define L 4           /* session lease: idle_session_timeout, the lease a follower waits out */
#endif
#ifndef M
#define M 1           /* the successor's margin past the predecessors' trust (one tick: see docs/model.md) */
#endif
#ifndef DOWN
#define DOWN 1        /* a restarted or promoted database refuses sessions for at least DOWN ticks ... */
#endif
#ifndef DOWNMAX       /* ... and at most DOWNMAX: any outage in between (see docs/model.md §2) */
#define DOWNMAX (DOWN > W + 1 -> DOWN : W + 1)
#endif
#ifndef MAXF
#define MAXF 2        /* faults per run (crash, freeze, termination, restart, promotion, handover) */
#endif
#ifndef FMAX
#define FMAX L        /* a frozen process resumes within FMAX ticks */
#endif

/* Fault kinds can be left out of a run (-DNO_CRASH, ...) to search deeper. */
#ifdef NO_CRASH
#define F_CRASH 0
#else
#define F_CRASH 1
#endif
#ifdef NO_FREEZE
#define F_FREEZE 0
#else
#define F_FREEZE 1
#endif
#ifdef NO_TERMINATE
#define F_TERMINATE 0
#else
#define F_TERMINATE 1
#endif
#ifdef NO_HANDOVER
#define F_HANDOVER 0
#else
#define F_HANDOVER 1
#endif
#ifdef NO_RESTART
#define F_RESTART 0
#else
#define F_RESTART 1
#endif
#ifdef NO_PROMOTE
#define F_PROMOTE 0
#else
#define F_PROMOTE 1
#endif

#define N 3           /* nodes A, B, C */
#define NOBODY 3      /* no node */
#define DEADKEY 4     /* a guard key whose session has ended: free forever (keys are random per session) */
#define FOREIGN 5     /* a backend of no node: another login calling a node function */

/* Sanity: pan prints "REACHED name" the first time a run takes a marked
 * transition (TestModel requires every fault to be reached). The replay
 * ignores it. */
#define REACHED(name) c_code { if (!reached_##name) { reached_##name = 1; printf("REACHED %s\n", #name); } };
c_decl {
	int reached_crash, reached_freeze, reached_term_lead, reached_term_guard, reached_term_watch;
	int reached_handover, reached_db_restart, reached_db_crash_loses_renewal, reached_promotion;
}

#define SAT(x, cap) if :: (x) < (cap) -> x++ :: else -> skip fi
#define NAME(n) ('A' + (n))

/* A node's process. */
#define P_DOWN 0      /* crashed (or not started) */
#define P_UP 1
#define P_FROZEN 2    /* SIGSTOP, a long pause: runs nothing, its sockets stay open */

/* A connection as its client sees it; the server's backend lives only in C_OK. */
#define C_NONE 0
#define C_OK 1
#define C_CLOSED 2    /* the backend ended and the socket says so (the next read fails) */
#define C_SILENT 3    /* the server is gone without a word (host died): reads wait */

/* A node's part in the scope (election/doc.go, "States of a scope"). */
#define R_FOLLOW 0
#define R_PEND 1      /* holds the epoch, gate closed until the predecessors are safe */
#define R_LEAD 2      /* the gate follows the trust window */

byte proc[N] = P_UP;
byte fage[N];         /* ticks frozen */
byte role[N];
byte tep[N];          /* epoch of the node's term */
byte tage[N];         /* ticks since the start of the last confirmation (claim or heartbeat) */
bit  gate[N];         /* the gate: open until tage reaches W, or the term ends */
byte hbage[N];        /* ticks since the last heartbeat started */
bit  hang[N];         /* a heartbeat waits on a server that is gone */
byte cool[N];         /* ticks left of the resign cooldown (ResignCooldown = 2 I) after a handover */
bit  want[N];         /* a heartbeat saw the scope without a live holder: claim now */
byte toks[N];         /* the application's tokens: bit e-1 set for every epoch whose gate opened here */

bit  dbup = 1;
byte dage;            /* ticks the database has been down */
bit  promoted;        /* one promotion per run */
byte faults;
byte floor;           /* epoch_floor(): (timeline − 1) << 40, as the largest epoch below it */

/* pgleader.leader_state, the scope's row (the columns both modes read). */
byte repoch;          /* epoch */
byte rholder = NOBODY;/* holder */
bit  ropen;           /* holder IS NOT NULL AND released_at IS NULL: the term is open */
bit  rfoff;           /* fenced_off_epoch = epoch: end_fenced fenced the current term off */

/* The standby's copy of the row (asynchronous replication: it may lag). */
byte sepoch;
byte sholder = NOBODY;
bit  sopen;
bit  sfoff;

/* Ghosts: what the nodes were told, kept across a promotion. */
byte maxg;            /* the largest epoch ever granted */
byte wmax;            /* the largest epoch a fenced write may have been accepted with so far */
byte fxown = NOBODY;  /* whose fenced transaction holds the row FOR KEY SHARE (a long write) */

byte k, lo, hi;       /* scratch within one step, zero between steps */

#ifdef SETTLE         /* bounded liveness: a node leads SETTLE ticks after the last fault */
byte quiet;           /* ticks since the last fault (saturated at SETTLE) */
#define QUIET quiet = 0;
#else
#define QUIET
#endif

#ifdef LIVENESS
bit tkp;              /* flips at every tick: the liveness property assumes time passes */
#endif

#define LIVE(n) (proc[n] == P_UP)
#define FENCED_ANY (fxown != NOBODY)
#define TOKS (toks[0] | toks[1] | toks[2])
#define HAS(m, e) (((m) >> ((e) - 1)) & 1)
#define SOME_GATE (gate[0] || gate[1] || gate[2])
/* Leadership worth the name: a gate open whose epoch the fence admits. */
#define LEADS(n) (gate[n] && FENCE_OK(tep[n]))
#define SOME_LEADER (LEADS(0) || LEADS(1) || LEADS(2))

/* A fault: counted, and once the budget is spent the standby's copy is of no use. */
#define FAULT faults++; QUIET if :: faults >= MAXF -> forget_standby() :: else -> skip fi

/* S5: no two gates open at once. Checked wherever a gate opens. */
#define CHECK_S5(n) \
	if \
	:: gate[((n) + 1) % N] || gate[((n) + 2) % N] -> \
		printf("VIOLATION S5: gates of %c and %c open at once\n", NAME(n), \
			(gate[((n) + 1) % N] -> NAME(((n) + 1) % N) : NAME(((n) + 2) % N))); \
		assert(false) \
	:: else -> skip \
	fi

/* S1: every grant is above every earlier one (so each epoch is granted once). */
#define CHECK_S1(e) \
	if \
	:: (e) <= maxg -> \
		printf("VIOLATION S1: epoch %d granted, but %d was granted before\n", e, maxg); \
		assert(false) \
	:: else -> maxg = (e) \
	fi

/* Asynchronous replication: the standby catches up with the primary's row. */
inline replicate() {
	sepoch = repoch; sholder = rholder; sopen = ropen; sfoff = rfoff
}

/* No promotion can come any more: the copy is dropped from the state. */
inline forget_standby() {
	sepoch = 0; sholder = NOBODY; sopen = 0; sfoff = 0
}

#define STANDBY_BEHIND (F_PROMOTE && !promoted && faults < MAXF && \
	(sepoch != repoch || sholder != rholder || sopen != ropen || sfoff != rfoff))

/*
 * The application (FencedTx, pgleader.fence). A token is issued when a gate
 * opens; the application may call fence with it at any later moment (a pause
 * between its gate check and its fence is Kleppmann's window), for as long as
 * its process lives. A write that passed the fence commits before the row can
 * change (the claim's FOR UPDATE waits for the fence's FOR KEY SHARE), so a
 * write is accepted at its fence, and which writes could be accepted depends
 * only on the row, the floor and the tokens: s3_writes() accepts, at every
 * change of these, every write the fence would let through. docs/model.md.
 */

/* pgleader.fence(p_scope, p_epoch): PLF01 unless p_epoch is the current open
 * term, above the timeline's floor, and not fenced off (fenced_off_epoch). */
#ifdef MUT_FENCE_NO_HOLDER
#define FENCE_OK(e) ((e) > floor)   /* mutation: the current holder's epoch is not checked */
#else
#define FENCE_OK(e) ((e) > floor && repoch == (e) && ropen && rholder != NOBODY && !rfoff)
#endif

/* pgleader.end_fenced fences the dead term off before it ends its fenced
 * transactions (fenced_off_epoch = epoch): fence refuses that epoch from then
 * on. MUT_NO_FENCE_OFF: it only ends them (what shipped before). */
#ifdef MUT_NO_FENCE_OFF
#define FENCED_OFF skip
#else
#define FENCED_OFF rfoff = 1
#endif

#define MAXE 8        /* epochs 1..MAXE fit the token masks */
#define OWNER(e) (HAS(toks[0], e) -> 0 : (HAS(toks[1], e) -> 1 : 2))

/* S3: no fenced write of an epoch is accepted after a write of a later one.
 * Every write the fence lets through now is accepted, the largest first. */
inline s3_writes() {
	if
	:: dbup && TOKS != 0 ->
		lo = 0; hi = 0;
		for (k : 1 .. MAXE) {
			if
			:: HAS(TOKS, k) && FENCE_OK(k) ->
				if
				:: lo == 0 -> lo = k
				:: else -> skip
				fi;
				hi = k
			:: else -> skip
			fi
		}
		k = 0;
		if
		:: hi > wmax ->
			printf("%c's application: a write with epoch %d passes fence and commits\n", NAME(OWNER(hi)), hi);
			wmax = hi
		:: else -> skip
		fi;
		if
		:: lo != 0 && lo < wmax ->
			printf("VIOLATION S3: %c's write with epoch %d (begun while its gate was open) passes fence after a write with epoch %d was accepted\n",
				NAME(OWNER(lo)), lo, wmax);
			assert(false)
		:: else -> skip
		fi;
		lo = 0; hi = 0
	:: else -> skip
	fi
}

/*
 * Long writes: FencedTx begins one while the gate is open (Token.Valid); its
 * fence passes and it holds the row FOR KEY SHARE until it commits, which may
 * be long after the term ended; the server ends it once it has been idle for
 * L in a frozen process. STALE_WRITERS: a writer that calls pgleader.fence
 * (or Fence) with the epoch of any term whose gate opened on node n, as often
 * as it likes and whatever n's process does (a worker of its own, not frozen
 * or killed with n).
 */
#ifdef STALE_WRITERS
#define MAY_WRITE(n) (repoch >= 1 && repoch <= MAXE && HAS(toks[n], repoch) && FENCE_OK(repoch))
#define WRITER_RUNS(n) (1)
#define WRITER_FREEZES 0
#else
#define MAY_WRITE(n) (gate[n] && FENCE_OK(tep[n]))
#define WRITER_RUNS(n) LIVE(n)
#define WRITER_FREEZES 1
#endif

inline writer_begins(n) {
	fxown = n;
#ifdef STALE_WRITERS
	printf("%c's writer: a fenced write with epoch %d holds the row FOR KEY SHARE\n", NAME(n), repoch)
#else
	printf("%c application: a fenced write holds the row FOR KEY SHARE\n", NAME(n))
#endif
}

inline writer_commits(n) {
	fxown = NOBODY;
#ifdef STALE_WRITERS
	printf("%c's writer: the fenced write commits\n", NAME(n))
#else
	printf("%c application: the fenced write commits\n", NAME(n))
#endif
}

/* A grant changes the epoch: end_fenced's proof (fence_waits, the first claim
 * found busy for this very term, W ago) starts again for every node. */
#define BUSY_FORGOTTEN bsy[0] = 0; bsy[1] = 0; bsy[2] = 0; bage[0] = 0; bage[1] = 0; bage[2] = 0

/* A gate opens: the application holds the term's token from now on. */
inline issue_token(n) {
	if
	:: tep[n] > MAXE ->
		printf("model bound: epoch %d above MAXE\n", tep[n]);
		assert(false)
	:: else -> toks[n] = toks[n] | (1 << (tep[n] - 1))
	fi
}

/* Bounded liveness, checked at every tick: SETTLE ticks after the last fault
 * (or the start) some gate is open, with an epoch the fence admits. */
inline settle_check() {
	skip;
#ifdef SETTLE
	if
	:: quiet < SETTLE -> quiet++
	:: else -> skip
	fi;
	if
	:: quiet >= SETTLE && !SOME_LEADER ->
		printf("VIOLATION liveness: no node leads (a gate open, its epoch admitted by fence) %d ticks after the last fault\n", SETTLE);
		assert(false)
	:: else -> skip
	fi
#endif
}
