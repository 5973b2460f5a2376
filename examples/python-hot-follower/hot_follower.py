#!/usr/bin/python3
"""A hot follower: every replica runs, warm; only the leader acts, fenced.

Each replica runs this service beside `pgleader node`, which listens on a Unix
socket of the host:

    pgleader node --scope ledger --id r1 --listen unix:/run/pgleader/ledger.sock
    python3 hot_follower.py --api unix:/run/pgleader/ledger.sock --scope ledger --replica r1

The service is always up (its state warm, its connections open), and follows its
node's leadership on the stream GET /v1/transitions?format=ndjson. It acts only
while the stream says this node leads, and only with trust to spare:

  * database work: one fenced transaction per unit, with the term's epoch:
        BEGIN; SELECT pgleader.fence(scope, epoch); ...; COMMIT;
    PostgreSQL refuses it (SQLSTATE PLF01) once a successor was elected: then the
    service stops acting under that epoch. Nothing else makes a late write safe;
  * an effect outside the database (an HTTP call, a payment, a message), which no
    fence can stop: right before it, the service asks GET /v1/leader/{scope}
    again, and starts the effect only if the answer is 200 and its
    trust_remaining_ms exceeds the effect's duration.

The stream carries a keepalive every 500 ms and a trust event per open gate: a
stream silent for more than 1 s comes from a node that is frozen, gone or cut
off, and the service takes it for not leading.

    --dsn URL            the database (default DATABASE_URL, else the PG* variables)
    --sink FILE          append one line per external effect: the test's record
    --interval 0.02      seconds between units of work

Debian: apt-get install python3-psycopg2. SIGTERM stops it.
"""

import argparse, http.client, json, os, signal, socket, sys, threading, time
import psycopg2

STREAM_SILENCE = 1.0     # s: no line for longer: the node is frozen or gone (docs/any-language.md)
EFFECT = 0.05            # s: how long one external effect takes


class UnixHTTP(http.client.HTTPConnection):
    """HTTP over the node's Unix socket (--listen unix:PATH); any Host is fine there."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path_)


class Leadership:
    """What the stream says about one scope, with the local time it was said."""

    def __init__(self, sock, scope):
        self.sock, self.scope = sock, scope
        self.mu = threading.Lock()
        self.epoch, self.trust_until, self.heard = 0, 0.0, 0.0    # monotonic seconds

    def may_act(self, duration):
        """The epoch to act under, if the stream is live and the trust it last
        reported, less its age, outlasts the action; else None."""
        now = time.monotonic()
        with self.mu:
            live = now - self.heard <= STREAM_SILENCE
            return self.epoch if live and self.trust_until - now > duration else None

    def follow(self, stopping):
        while not stopping.is_set():
            conn = UnixHTTP(self.sock, STREAM_SILENCE)
            try:
                conn.request("GET", "/v1/transitions?format=ndjson")
                resp = conn.getresponse()
                while not stopping.is_set():
                    line = resp.readline()      # times out after STREAM_SILENCE: not leading
                    if not line:
                        break
                    self.apply(json.loads(line), time.monotonic())
            except (OSError, ValueError, http.client.HTTPException):
                pass
            finally:
                conn.close()
                with self.mu:
                    self.trust_until = 0.0       # a stream that ended says nothing any more
            stopping.wait(0.1)

    def apply(self, ev, now):
        with self.mu:
            self.heard = now
            if ev.get("scope") != self.scope:
                return
            kind = ev.get("event")
            if kind in ("state", "trust"):
                leading = ev.get("role") == "leader" and ev.get("trust_remaining_ms", 0) > 0
                self.epoch = ev.get("epoch", 0) if leading else 0
                self.trust_until = now + ev.get("trust_remaining_ms", 0) / 1000 if leading else 0.0
            elif kind in ("ended", "draining"):
                self.trust_until = 0.0          # stop at once; wait for the next term's trust event

    def ask(self):
        """GET /v1/leader/{scope} now: (epoch, trust remaining in s) while it leads."""
        conn = UnixHTTP(self.sock, 0.2)
        try:
            conn.request("GET", "/v1/leader/" + self.scope)
            resp = conn.getresponse()
            body = json.loads(resp.read())
            return (body["epoch"], body["trust_remaining_ms"] / 1000) if resp.status == 200 else (0, 0.0)
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            return (0, 0.0)
        finally:
            conn.close()


def fenced_write(db, scope, epoch, replica, seq):
    """One unit of database work under epoch; False when PostgreSQL refused it."""
    try:
        with db, db.cursor() as cur:
            cur.execute("SELECT pgleader.fence(%s, %s)", (scope, epoch))
            cur.execute("INSERT INTO hot_writes (scope, epoch, replica, seq) VALUES (%s, %s, %s, %s)",
                        (scope, epoch, replica, seq))
        return True
    except psycopg2.Error as e:
        if e.pgcode != "PLF01":
            raise
        return False


def external_effect(sink, replica, epoch, seq):
    """Stands for a call outside the database: it takes EFFECT seconds."""
    start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    time.sleep(EFFECT)
    end = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if sink:
        line = json.dumps({"replica": replica, "epoch": epoch, "seq": seq, "start_ns": start, "end_ns": end})
        os.write(sink, (line + "\n").encode())


class Args(argparse.ArgumentParser):
    def error(self, message):      # bad input: one line, exit 2
        print("hot_follower: %s; see --help" % message, file=sys.stderr)
        sys.exit(2)


def main(argv):
    p = Args(description="a hot follower beside pgleader node --listen unix:…")
    p.add_argument("--api", required=True, help="the node's --listen address, unix:PATH")
    p.add_argument("--scope", required=True)
    p.add_argument("--replica", required=True)
    p.add_argument("--dsn", default=os.environ.get("DATABASE_URL", ""))
    p.add_argument("--sink", default="")
    p.add_argument("--interval", type=float, default=0.02)
    a = p.parse_args(argv)
    if not a.api.startswith("unix:"):
        print("hot_follower: --api %s: give the node's Unix socket, unix:PATH" % a.api, file=sys.stderr)
        return 2
    lead = Leadership(a.api[len("unix:"):], a.scope)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    threading.Thread(target=lead.follow, args=(stopping,), daemon=True).start()
    sink = os.open(a.sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if a.sink else None
    db = psycopg2.connect(a.dsn)        # warm: open on every replica, leader or not
    refused, seq = 0, 0
    while not stopping.wait(a.interval):
        epoch = lead.may_act(0)
        if not epoch or epoch == refused:
            continue
        seq += 1
        if not fenced_write(db, a.scope, epoch, a.replica, seq):
            refused = epoch               # a successor holds a newer term: never this epoch again
            print("hot_follower: epoch %d is stale (PLF01)" % epoch, file=sys.stderr, flush=True)
            continue
        # Before an effect no fence can stop: ask again, with trust to spare.
        now_epoch, remaining = lead.ask()
        if now_epoch == epoch and remaining > 2 * EFFECT and lead.may_act(EFFECT) == epoch:
            external_effect(sink, a.replica, epoch, seq)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
