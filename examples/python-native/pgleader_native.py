#!/usr/bin/python3
"""pgleader_native: a pgleader node in Python, written from docs/protocol.md.

A reference native client of pgleader's SQL protocol, lock mode: no sidecar, no
Go. It campaigns for one or more scopes, holds what it wins with heartbeats,
opens a scope's gate only within the trust window of its last heartbeat, watches
its ring peer so that a crash is taken over in milliseconds, honours resign and
handover requests, and writes the events file of `pgleader node --events`.
Section numbers (§) are docs/protocol.md's.

    python3 pgleader_native.py --id n1 --scope billing [--scope …] \\
        [--dsn URL] [--events FILE] [--work-interval 20ms] [timing flags]

As a library: node = Node(Config(...)); threading.Thread(target=node.run).start();
then node.do(scope, fn) runs fn(epoch) only while the gate is open, and every
write of fn carries SELECT pgleader.fence(scope, epoch) in its own transaction;
node.stop() drains and releases.

Needs Python 3.8+ and psycopg2 (Debian: python3-psycopg2). SIGTERM drains,
releases every scope (reason shutdown) and exits 0; bad input exits 2.
"""

import argparse, datetime, hashlib, json, os, queue, random, select, signal, socket, sys, threading, time
import psycopg2
from psycopg2 import extensions as ext

SCHEMA = 17                       # §1: the schema this client was written for
SEARCH_PATH = "-c search_path=pg_catalog,pgleader,pg_temp"


def mono():
    """CLOCK_MONOTONIC in ns: every deadline, and mono_ns in the events file."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def duration(s):
    """'100ms', '1.5s' or '2' (seconds) → ns."""
    try:
        for unit, ns in (("ms", 10**6), ("s", 10**9), ("", 10**9)):
            if s.endswith(unit):
                return int(float(s[:len(s) - len(unit)]) * ns)
    except ValueError:
        raise ValueError("%r is not a duration" % s) from None


def lock_key(scope):
    """§4: the first 8 bytes of sha256(scope), a big-endian signed bigint."""
    return int.from_bytes(hashlib.sha256(scope.encode()).digest()[:8], "big", signed=True)


class Lost(Exception):
    """The session is gone or too slow: every gate closes, then both sessions."""


class Conn:
    """One asynchronous connection, owned by one thread: every statement has a
    deadline, and a wait can be cut by the owner (cancel request, §6.3)."""

    def __init__(self, dsn, name, lease_ns=0, keepalive_s=1):
        opts = [SEARCH_PATH, "-c client_connection_check_interval=1000"]
        if lease_ns:  # §3: the server-side lease of the leadership session
            opts += ["-c idle_session_timeout=%d" % (lease_ns // 10**6), "-c tcp_keepalives_idle=%d" % keepalive_s,
                     "-c tcp_keepalives_interval=1", "-c tcp_keepalives_count=3"]
        self.c = psycopg2.connect(dsn, async_=1, application_name=name[:63], options=" ".join(opts),
                                  keepalives=1, keepalives_idle=keepalive_s, keepalives_interval=1,
                                  keepalives_count=3, connect_timeout=10)
        self.wait(mono() + 10 * 10**9)

    def wait(self, deadline, wake=None):
        """Polls until the statement completes; past deadline (mono ns) raises
        Lost. A byte on the pipe wake cancels the statement (57014)."""
        while True:
            state = self.c.poll()
            if state == ext.POLL_OK:
                return
            rd = ([self.c.fileno()] if state == ext.POLL_READ else []) + ([wake] if wake is not None else [])
            wr = [self.c.fileno()] if state == ext.POLL_WRITE else []
            r, w, _ = select.select(rd, wr, [], None if deadline is None else max(0, deadline - mono()) / 1e9)
            if wake is not None and wake in r:
                os.read(wake, 64)
                self.c.cancel()
                wake = None
            elif not r and not w:
                raise Lost("no reply within its deadline")

    def q(self, sql, args=(), timeout_ns=None, wake=None):
        cur = self.c.cursor()
        cur.execute(sql, args)
        self.wait(mono() + timeout_ns if timeout_ns else None, wake)
        return cur.fetchall() if cur.description else []

    def close(self):
        try:
            self.c.close()
        except psycopg2.Error:
            pass


class Events:
    """The events file of `pgleader node --events` (DESIGN §5, protocol.md §16):
    one JSON object per line, one write(2) each, O_APPEND."""

    def __init__(self, path, node):
        self.node = node
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600) if path else None

    def __call__(self, event, scope, epoch=0, at=None, **extra):
        rec = {"mono_ns": at or mono(), "time": datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z"),
               "node": self.node, "scope": scope, "event": event, "epoch": epoch}
        rec.update({k: v for k, v in extra.items() if v})
        if event in ("gate_open", "gate_closed", "lost", "resigned"):    # one log line per transition
            print("pgleader_native: %s %s epoch %d %s" % (scope, event, epoch, extra.get("reason") or ""), file=sys.stderr, flush=True)
        if self.fd is not None:
            os.write(self.fd, (json.dumps(rec) + "\n").encode())


class Term:
    def __init__(self, scope, epoch, start):
        self.scope, self.epoch = scope, epoch
        self.trust_until = start      # mono ns; the gate is open only before it
        self.open = False             # the predecessors' wait is over (§6.3)
        self.waited = False
        self.draining = None          # the release reason once a drain began
        self.drain_deadline = 0
        self.inflight = 0


class Config:
    def __init__(self, node_id, scopes, dsn="", events="", interval="500ms", timeout="500ms", trust="1.5s",
                 lease="2s", drain="5s", cooldown=None, priority=1, listen=True, ring=True):
        self.node_id, self.scopes, self.dsn, self.events = node_id, list(dict.fromkeys(scopes)), dsn, events
        self.I, self.T, self.W, self.L, self.drain = map(duration, (interval, timeout, trust, lease, drain))
        # §8: a client must pass the cooldown it honours; the engine's default is 2·I.
        self.cooldown = duration(cooldown) if cooldown else 2 * self.I
        self.priority, self.listen, self.ring = priority, listen, ring

    def check(self):
        """§5, at start: I + T < W < L, L − W ≥ 100 ms, L whole ms ≤ 10 min."""
        ms = lambda ns: "%gms" % (ns / 1e6)
        if not self.node_id or not self.scopes:
            return "give --id NODE and at least one --scope NAME"
        if self.I < 10**7 or self.T < 10**7:
            return "heartbeat interval (%s) and timeout (%s) must be at least 10ms" % (ms(self.I), ms(self.T))
        if self.I + self.T >= self.W:
            return "heartbeat interval + timeout (%s) must be shorter than the trust window (%s)" % (ms(self.I + self.T), ms(self.W))
        if self.L - self.W < 10**8:
            return "session lease (%s) must exceed the trust window (%s) by at least 100ms" % (ms(self.L), ms(self.W))
        if self.L % 10**6 or self.L > 600 * 10**9:
            return "session lease (%s) must be whole milliseconds, at most 10 minutes" % ms(self.L)
        return None


class Node:
    def __init__(self, cfg):
        self.cfg, self.id = cfg, cfg.node_id
        self.ev = Events(cfg.events, cfg.node_id)
        self.mu = threading.Lock()         # terms, seen, cooldown; a session's peer
        self.terms = {}                    # scope → Term (held: pending or open)
        self.seen = {s: (None, 0) for s in cfg.scopes}   # scope → (holder, epoch) last seen
        self.cooldown = {}                 # scope → mono ns until which it is not claimed
        self.wake = threading.Event()      # wakes the main loop: a claim, a heartbeat, a stop
        self.want_claim, self.announce = False, None
        self.stopping = False
        self.started = datetime.datetime.now(datetime.timezone.utc)

    def do(self, scope, fn):
        """Runs fn(epoch) if this node's gate for scope is open now (§5: evaluated
        at the check, not by a timer); a drain waits for it. Returns fn's result,
        or None when not leading. fn fences its writes: a pause between this check
        and a write is only safe through the fence (S5)."""
        with self.mu:
            t = self.terms.get(scope)
            if not (t and t.open and not t.draining and mono() < t.trust_until):
                return None
            t.inflight += 1
        try:
            return fn(t.epoch)
        finally:
            with self.mu:
                t.inflight -= 1
            if t.draining:
                self.wake.set()

    def run(self):
        """Sessions one after the other until a stop: a lost one is never reused."""
        while not self.stopping:
            s = Session(self)
            try:
                s.open()
                return s.serve()
            except (Lost, psycopg2.Error, OSError) as e:
                self.lose_all((str(e).strip() or type(e).__name__).splitlines()[0])
            finally:
                s.close()
            time.sleep(min(self.cfg.I, 10**9) / 1e9 * (0.5 + random.random()))

    def lose_all(self, detail):
        """Every gate closes first; the session's connections close after (§6.1)."""
        with self.mu:
            terms, self.terms = self.terms, {}
        for t in terms.values():
            if t.open and not t.draining:
                self.ev("gate_closed", t.scope, t.epoch, reason="lost_connection", error=detail)
            self.ev("lost", t.scope, t.epoch, reason="lost_connection", error=detail)

    def stop(self):
        """Drains and releases every scope (reason shutdown); run() then returns."""
        self.stopping = True
        self.wake.set()

    def kick(self, claim=False, announce=None):
        with self.mu:
            self.want_claim = self.want_claim or claim
            self.announce = announce or self.announce
        self.wake.set()


class Session:
    """One lock-mode session (§3): leadership and guard (the main thread's),
    watch (the ring thread's), listen (the notification thread's)."""

    def __init__(self, n):
        self.n = n
        self.guard_key = int.from_bytes(os.urandom(8), "big", signed=True)
        self.beacon_key = int.from_bytes(os.urandom(8), "big", signed=True)
        self.alive, self.broken = True, None
        self.lead = self.guard = None
        self.guard_armed = False
        self.waits = queue.Queue()          # predecessor waits for the ring thread (§6.3)
        self.ring_r, self.ring_w = os.pipe()     # wakes the ring thread; closed by it
        self.pipe_mu, self.ring_thread = threading.Lock(), None
        self.peer, self.peer_gen, self.reread = None, 0, True   # the ring's peer (§6.6)
        self.busy_since = {}

    def open(self):
        """§6.1, in its order."""
        n, cfg = self.n, self.n.cfg
        ka = max(1, cfg.L // 10**9)
        self.lead = Conn(cfg.dsn, "pgleader leadership " + n.id, cfg.L, -(-cfg.L // 10**9))
        if self.lead.q("SELECT pg_catalog.pg_is_in_recovery()", (), 10**10)[0][0]:
            raise Lost("the server is a standby: point the DSN at the primary")
        self.guard = Conn(cfg.dsn, "pgleader guard " + n.id, keepalive_s=ka)
        self.guard.q("SELECT pgleader.session_lock(%s)", (self.guard_key,), 10**10)
        listen = None
        if cfg.listen:   # before registering: nothing announced from here on is missed
            listen = Conn(cfg.dsn, "pgleader listen " + n.id, keepalive_s=ka)
            listen.q("LISTEN leader_change", (), 10**10)
            threading.Thread(target=self.notifications, args=(listen,), daemon=True).start()
        self.lead.q("SELECT pgleader.session_lock(%s)", (self.beacon_key,), 10**10)
        self.lead.q("SELECT pgleader.register_node(%s, %s, %s, %s, %s::text[], %s, %s, %s, %s, %s, %s, %s, NULL, %s)",
                    (n.id, socket.gethostname(), os.getpid(), "python-native", cfg.scopes, cfg.I // 10**6,
                     cfg.W // 10**6, cfg.L // 10**6, self.beacon_key, self.guard_key, cfg.priority,
                     cfg.cooldown // 10**6, n.started), 10**10)
        watch = Conn(cfg.dsn, "pgleader watch " + n.id, keepalive_s=ka)
        self.ring_thread = threading.Thread(target=self.ring, args=(watch,), daemon=True)
        self.ring_thread.start()
        n.kick(claim=True)

    def poke(self, why):
        """Wakes the ring thread (and cuts its peer wait) while the session lives."""
        with self.pipe_mu:
            if self.alive:
                os.write(self.ring_w, why)

    def close(self):
        with self.pipe_mu:
            self.alive = False
            os.write(self.ring_w, b"x")
            os.close(self.ring_w)
            if self.ring_thread is None:
                os.close(self.ring_r)
        for c in (self.guard, self.lead):   # after the gates closed (lose_all)
            if c:
                c.close()

    def serve(self):
        n, cfg = self.n, self.n.cfg
        next_beat, stopping = mono(), False
        while True:
            draining = any(t.draining for t in list(n.terms.values()))
            n.wake.wait(0.005 if draining else max(0, next_beat - mono()) / 1e9)
            n.wake.clear()
            if self.broken:
                raise Lost(self.broken)
            if n.stopping and not stopping:     # SIGTERM: drain and release everything
                stopping = True
                for t in list(n.terms.values()):
                    if not t.draining:
                        self.begin_drain(t, "shutdown")
            with n.mu:
                claim, announce, n.want_claim, n.announce = n.want_claim, n.announce, False, None
            if claim and not stopping:
                self.claim(announce)
            if mono() >= next_beat:
                next_beat = mono() + cfg.I
                self.heartbeat(claims=not stopping)
            self.drains()
            if stopping and not n.terms:
                self.lead.q("SELECT pgleader.node_stopped(%s)", (n.id,), 4 * cfg.T)
                return

    # ---- claim (§6.2) and the gate's opening (§6.3) ----

    def claim(self, announce=None):
        n, cfg = self.n, self.n.cfg
        now = mono()
        with n.mu:
            scopes = [s for s in cfg.scopes if s not in n.terms and n.cooldown.get(s, 0) <= now]
        if not scopes or cfg.priority == 0:
            return
        start = mono()
        rows = self.lead.q("""SELECT scope, acquired, busy, epoch, holder, prev_closed, prev_guard_key, prev_trust_ms,
                                     wait_guards, deferred_to
                                FROM pgleader.claim_scopes(%s, %s, %s, %s, %s, %s, %s, %s::text[], %s::bigint[], %s)""",
                           (n.id, socket.gethostname(), self.guard_key, cfg.I // 10**6, cfg.T // 10**6, cfg.W // 10**6,
                            cfg.L // 10**6, scopes, [lock_key(s) for s in scopes], announce), 4 * cfg.T)
        returned, retry = mono(), False
        if any(r[1] for r in rows):
            self.arm_guard()     # before any gate may open (§6.3 step 1)
        for scope, acquired, busy, epoch, holder, prev_closed, prev_guard, prev_trust, waits, deferred in rows:
            if busy:   # fenced transactions of the last term hold its row: after W, end them
                since = self.busy_since.setdefault(scope, [returned, 0])
                if returned - since[0] >= cfg.W and returned - since[1] >= cfg.W:
                    since[1] = returned
                    self.lead.q("SELECT state FROM pgleader.end_fenced(%s, NULL, %s)", (n.id, scope), 4 * cfg.T)
            else:
                self.busy_since.pop(scope, None)
            if not acquired:
                with n.mu:
                    n.seen[scope] = (holder, epoch or n.seen[scope][1])
                # no holder, not deferred: a claim in flight, a squatter, a dying backend's lock
                retry = retry or busy or (holder is None and deferred is None)
                continue
            t = Term(scope, epoch, start + cfg.W)
            with n.mu:
                n.terms[scope], n.seen[scope] = t, (n.id, epoch)
            n.ev("acquired", scope, epoch)
            guards = [g for g in (waits or []) if g != self.guard_key]
            if not guards and not (prev_closed is False and prev_guard is None):
                self.open_gate(t)
            else:     # §6.3 step 3, on the watch session, by its owner
                self.waits.put((t, guards, returned + max(cfg.W, (prev_trust or 0) * 10**6) + max(cfg.W // 50, 10**7)))
                self.poke(b"w")
        if retry:
            timer = threading.Timer(cfg.I / 5e9, n.kick, kwargs={"claim": True})
            timer.daemon = True
            timer.start()

    def arm_guard(self):
        """The guard's lease (§3): idle_session_timeout = L while the node leads;
        the statement restarts its idle timer."""
        self.guard.q("SELECT pg_catalog.set_config('idle_session_timeout', %s, false)",
                     (str(self.n.cfg.L // 10**6),), self.n.cfg.W)
        self.guard_armed = True

    def open_gate(self, t):
        n = self.n
        with n.mu:
            if n.terms.get(t.scope) is not t or t.draining:
                return
            t.waited = True
            if mono() >= t.trust_until:
                return     # its trust ran out while waiting: the next heartbeat opens it
            t.open = True
        n.ev("gate_open", t.scope, t.epoch, trust_until_mono_ns=t.trust_until)

    # ---- heartbeat (§6.4) ----

    def heartbeat(self, claims=True):
        n, cfg = self.n, self.n.cfg
        with n.mu:
            led = list(n.terms.values())
            follow = [s for s in cfg.scopes if s not in n.terms]
            known = [n.seen[s][1] or 0 for s in follow]
        start = mono()
        rows = self.lead.q("""SELECT kind, scope, ok, epoch, holder, resign
                                FROM pgleader.node_heartbeat(%s, %s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::text[])""",
                           (n.id, [t.scope for t in led], [t.epoch for t in led], follow, known,
                            [t.scope for t in led if t.open]), cfg.T)
        if led:          # the guard's lease follows leadership; pinged after the heartbeat started
            self.guard.q("SELECT 1", (), max(1, start + cfg.T - mono()))
        elif self.guard_armed:   # it leads nothing any more: turn the lease off (§3)
            self.guard.q("SELECT pg_catalog.set_config('idle_session_timeout', '0', false)", (), cfg.T)
            self.guard_armed = False
        if mono() - start >= cfg.T:
            raise Lost("heartbeat round trip of %d ms; the timeout is %d ms" % ((mono() - start) // 10**6, cfg.T // 10**6))
        by_scope, claim = {t.scope: t for t in led}, False
        for kind, scope, ok, epoch, holder, resign in rows:
            if kind == "ring":
                self.aim((holder, epoch))
            elif kind == "follow":
                with n.mu:
                    n.seen[scope] = (holder, epoch)
                claim = claim or holder is None
            elif not ok:         # no longer this node's term: close the gate, give the lock back
                self.end(by_scope[scope], "evicted", lost=True)
            else:
                t = by_scope[scope]
                with n.mu:
                    if n.terms.get(scope) is not t:
                        continue
                    t.trust_until = start + cfg.W
                    opening = t.waited and not t.open and not t.draining
                    t.open = t.open or opening
                if t.open and not t.draining:
                    n.ev("gate_open" if opening else "heartbeat_ok", scope, t.epoch, trust_until_mono_ns=t.trust_until)
                if resign and not t.draining:     # §8: resign, or hand over to holder
                    self.begin_drain(t, "handed_over" if holder else "resigned")
        if claim and claims:
            self.claim()

    # ---- resign, handover, shutdown: close the gate, drain, release (§6.5, §8) ----

    def begin_drain(self, t, reason):
        with self.n.mu:
            t.draining, t.drain_deadline = reason, mono() + self.n.cfg.drain
        if t.open:
            self.n.ev("gate_closed", t.scope, t.epoch, reason=reason)

    def drains(self):
        with self.n.mu:
            due = [t for t in self.n.terms.values() if t.draining and (t.inflight == 0 or mono() >= t.drain_deadline)]
        for t in due:
            self.end(t, t.draining)

    def end(self, t, reason, lost=False):
        """Releases one term whose gate is closed and work drained. After a loss
        the reason is evicted: release_batch records nothing for a term that is
        not this backend's, and only gives the lock back (§11)."""
        n = self.n
        with n.mu:
            n.terms.pop(t.scope, None)
            if reason in ("resigned", "handed_over"):
                n.cooldown[t.scope] = mono() + n.cfg.cooldown
        if lost and t.open:
            n.ev("gate_closed", t.scope, t.epoch, reason=reason)
        give_up = mono() + n.cfg.drain + 2 * n.cfg.L
        while True:     # busy: this term's own fenced transactions still hold the row
            rows = self.lead.q("SELECT ok, busy FROM pgleader.release_batch(%s, %s::text[], %s::bigint[], %s::text[])",
                               (n.id, [t.scope], [t.epoch], [reason]), 4 * n.cfg.T)
            if not rows[0][1]:
                break
            if mono() > give_up:
                raise Lost("release of %s still busy: dropping the session frees the lock" % t.scope)
            time.sleep(n.cfg.T / 5e9)
        n.ev("lost" if lost else "resigned", t.scope, t.epoch, reason=reason)

    # ---- the ring (§6.6) and the predecessor waits (§6.3): the watch session ----

    def aim(self, peer):
        if not self.n.cfg.ring:    # a minimal client: crashes are found by heartbeats (§16)
            return
        with self.n.mu:
            if peer == self.peer:
                return
            self.peer, self.peer_gen = peer, self.peer_gen + 1
        self.poke(b"p")

    def ring(self, watch):
        """Owns the watch session. One statement at a time runs on it: a
        predecessor wait interrupts the peer wait (a cancel request) and the
        peer wait resumes after it."""
        n, cfg = self.n, self.n.cfg
        try:
            while self.alive:
                while not self.waits.empty():
                    t, guards, deadline = self.waits.get()
                    for g in guards:
                        while self.alive and mono() < deadline:
                            ms = max(1, min(60000, (deadline - mono()) // 10**6))
                            try:
                                if watch.q("SELECT pgleader.await_release(%s, %s)", (g, ms), ms * 10**6 + cfg.L)[0][0]:
                                    break
                            except psycopg2.errors.QueryCanceled:
                                pass     # a late cancel of the peer wait
                    self.open_gate(t)
                if self.reread and cfg.ring:
                    self.reread = False
                    row = watch.q("SELECT node_id, beacon_key FROM pgleader.ring_next(%s)", (n.id,), 10**10)
                    self.aim(tuple(row[0]) if row else None)
                with n.mu:
                    peer, gen = self.peer, self.peer_gen
                if peer is None:
                    if select.select([self.ring_r], [], [], 2)[0]:
                        os.read(self.ring_r, 64)
                    continue
                try:
                    free = watch.q("SELECT pgleader.await_release(%s, 2000)", (peer[1],), 2 * 10**9 + cfg.L, self.ring_r)[0][0]
                except psycopg2.errors.QueryCanceled:
                    continue     # a predecessor wait, a new peer, a stop
                if free and gen == self.peer_gen:    # the peer's leadership session ended
                    self.reread = True
                    n.kick(claim=True, announce=peer[0])
        except (Lost, psycopg2.Error, OSError) as e:
            if self.alive:
                self.broken = "watch session: %s" % e    # the main loop drops the session
                n.wake.set()
        finally:
            watch.close()
            os.close(self.ring_r)

    # ---- notifications (§12): hints to claim or heartbeat now, never facts ----

    def notifications(self, listen):
        n, c = self.n, listen.c
        try:
            while self.alive:
                select.select([c.fileno()], [], [], 0.5)
                c.poll()
                while c.notifies:
                    try:
                        m = json.loads(c.notifies.pop(0).payload)
                        event, scope = m.get("event"), m.get("scope")
                    except (ValueError, AttributeError):
                        continue
                    if event == "released" and scope in n.seen:
                        if m.get("to") == n.id:
                            with n.mu:
                                n.cooldown.pop(scope, None)   # reserved for this node (§8)
                        n.kick(claim=True)
                    elif event == "node_lost":
                        n.kick(claim=True)
                    elif event in ("resign_requested", "handover_requested") and scope in n.terms:
                        n.kick()       # the heartbeat brings the request
                    elif event == "node_joined" and m.get("holder") != n.id:
                        self.reread = True
                        self.poke(b"r")
        except (psycopg2.Error, OSError):
            pass    # losing it ends nothing: heartbeats find what hints would have said
        finally:
            listen.close()


# ---- the demo workload (protocol.md §16): one fenced write every interval while leading ----

def workload(node, dsn, interval_ns):
    run = "%06x" % random.getrandbits(24)
    conn, seq = None, 0
    while not node.stopping:
        time.sleep(interval_ns / 1e9)
        for scope in node.cfg.scopes:
            seq += 1
            rid = "%s:%s:%s-%d" % (node.id, scope, run, seq)
            try:
                if conn is None or conn.closed:
                    conn = psycopg2.connect(dsn, application_name=("pgleader workload " + node.id)[:63], options=SEARCH_PATH)
                node.do(scope, lambda epoch: write(node, conn, scope, epoch, rid))
            except psycopg2.Error:
                conn = None if conn is None or conn.closed else conn


def write(node, conn, scope, epoch, rid):
    sent = False
    try:
        with conn, conn.cursor() as cur:        # BEGIN … COMMIT, or ROLLBACK on an exception
            cur.execute("SELECT pgleader.fence(%s, %s)", (scope, epoch))
            sent = True
            cur.execute("INSERT INTO pgleader.demo_actions (scope, epoch, node_id, request_id) VALUES (%s, %s, %s, %s)",
                        (scope, epoch, node.id, rid))
        node.ev("action_ok", scope, epoch, request_id=rid)
    except psycopg2.Error as e:
        if e.pgcode == "PLF01":     # stale: report it outside the refused transaction (§9)
            node.ev("action_rejected", scope, epoch, request_id=rid, reason="PLF01")
            with conn, conn.cursor() as cur:
                cur.execute("SELECT pgleader.fence_rejected(%s, %s, %s, %s)", (scope, epoch, node.id, rid))
        elif sent:
            node.ev("action_unknown", scope, epoch, request_id=rid, error=str(e).strip()[:200])
        raise


# ---- start-up checks (§3) and the command line ----

class BadInput(Exception):
    """Exit 2: one line naming the problem and the fix."""


def checks(cfg):
    """§3's start-up checks on a short-lived connection. Raises BadInput, or
    psycopg2.Error when the database cannot be read (exit 1)."""
    conn = psycopg2.connect(cfg.dsn, options=SEARCH_PATH, connect_timeout=10)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT pg_catalog.current_setting('server_version_num')::int, "
                        "pg_catalog.to_regprocedure('pgleader.schema_version()') IS NOT NULL")
            version, schema = cur.fetchone()
            if version < 140000:
                raise BadInput("PostgreSQL %d is too old: pgleader needs 14 or later (idle_session_timeout)" % version)
            cur.execute("SELECT pgleader.schema_version()" if schema else "SELECT 0")
            if cur.fetchone()[0] < SCHEMA:
                raise BadInput("no pgleader schema of version %d or later in this database: run pgleader migrate" % SCHEMA)
            cur.execute("SELECT scope, roles FROM pgleader.campaign_refusals(%s::text[])", (cfg.scopes,))
            for scope, roles in cur.fetchall():
                raise BadInput("this login may not campaign for %s (bound to %s): grant it one of those roles" % (scope, ", ".join(roles)))
            cur.execute("SELECT scope, mode, nodes FROM pgleader.mode_conflict(%s, 'lock', %s::text[])", (cfg.node_id, cfg.scopes))
            for scope, mode, nodes in cur.fetchall():
                raise BadInput("%s has candidates in %s mode (%s): every candidate of a scope uses one mode" % (scope, mode, nodes))
    finally:
        conn.close()


class Args(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message + "; see --help")


def main(argv):
    p = Args(description="a pgleader node in Python (lock mode), from docs/protocol.md")
    p.add_argument("--id", required=True, help="node id, unique among live candidates")
    p.add_argument("--scope", action="append", required=True, help="a scope to campaign for; repeat for several")
    p.add_argument("--dsn", default=os.environ.get("DATABASE_URL", ""), help="default DATABASE_URL, else the PG* variables")
    p.add_argument("--events", default="", help="append the events of pgleader node --events to FILE")
    p.add_argument("--work-interval", default="0", help="a fenced demo write every D while leading (0: none)")
    p.add_argument("--priority", type=int, default=1)
    p.add_argument("--no-listen", action="store_true", help="no listen session: releases are seen by heartbeats")
    p.add_argument("--no-ring", action="store_true", help="no ring watch: crashes are seen by heartbeats")
    for flag, default in (("heartbeat-interval", "500ms"), ("heartbeat-timeout", "500ms"), ("trust-window", "1.5s"),
                          ("session-lease", "2s"), ("drain-timeout", "5s"), ("resign-cooldown", None)):
        p.add_argument("--" + flag, default=default)
    try:
        a = p.parse_args(argv)
        try:
            cfg = Config(a.id, a.scope, a.dsn, a.events, a.heartbeat_interval, a.heartbeat_timeout, a.trust_window,
                         a.session_lease, a.drain_timeout, a.resign_cooldown, a.priority, not a.no_listen, not a.no_ring)
            work = duration(a.work_interval)
        except ValueError as e:
            raise BadInput("%s; write e.g. 100ms or 1.5s" % e)
        problem = cfg.check()
        if problem:
            raise BadInput(problem)
        try:
            node = Node(cfg)
        except OSError as e:
            raise BadInput("cannot append to --events %s: %s; pass a writable file path" % (a.events, e.strerror))
        checks(cfg)
    except BadInput as e:
        print("pgleader_native: %s" % e, file=sys.stderr)
        return 2
    except (psycopg2.Error, OSError) as e:
        print("pgleader_native: cannot use the database: %s" % str(e).strip().splitlines()[0], file=sys.stderr)
        return 1

    def on_signal(*_):
        if node.stopping:
            os._exit(1)         # a second signal: at once, without the drain
        node.stop()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if work:
        threading.Thread(target=workload, args=(node, cfg.dsn, work), daemon=True).start()
    runner = threading.Thread(target=node.run)
    runner.start()
    while runner.is_alive():
        runner.join(0.2)      # the main thread stays free for signals
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
