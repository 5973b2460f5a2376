#!/usr/bin/python3
"""A worker that acts only while its node leads, every write fenced.

Run it under pgleader run on every host:

    pgleader run --scope ledger-worker -- /usr/bin/python3 worker.py

pgleader run starts it only while this node leads the scope, with the term in
its environment (PGLEADER_SCOPE, PGLEADER_EPOCH, PGLEADER_NODE_ID), and stops it
when the term ends. That bound can fail (a frozen host, a write already on the
wire), so each write also carries the epoch, in its own transaction:

    BEGIN; SELECT pgleader.fence(scope, epoch); INSERT ...; COMMIT;

PostgreSQL refuses the transaction with SQLSTATE PLF01 once the epoch is stale
(a successor holds a newer term). The worker then stops writing: it reports the
refusal (pgleader.fence_rejected, outside the refused transaction, for the
collector's alert) and exits 3. It never retries a fenced write with the same
epoch: that term is over for good.

    python3 worker.py          work until stopped (SIGTERM: finish the write, exit 0)
    python3 worker.py once     one fenced write; exit 0, or 3 when fenced

Connection: DATABASE_URL, or the PG* variables when it is unset. Debian:
apt-get install python3-psycopg2.
"""

import os
import signal
import sys
import time

import psycopg2

FENCED_EXIT = 3
INTERVAL = float(os.environ.get("WORKER_INTERVAL", "0.05"))  # seconds between writes


class Fenced(Exception):
    """The write's epoch is no longer the scope's current term (PLF01)."""


def connect():
    conn = psycopg2.connect(os.environ.get("DATABASE_URL", ""))
    conn.autocommit = False  # every write in a transaction of its own
    return conn


def write(conn, scope, epoch, node, seq):
    """One unit of work: a fenced transaction that commits only under epoch.

    Raises Fenced when PostgreSQL refuses the epoch; the transaction is rolled
    back and nothing of it is written.
    """
    try:
        with conn:  # COMMIT on success, ROLLBACK on an exception
            with conn.cursor() as cur:
                cur.execute("SELECT pgleader.fence(%s, %s)", (scope, epoch))
                cur.execute(
                    "INSERT INTO worker_writes (scope, epoch, node, pid, seq) VALUES (%s, %s, %s, %s, %s)",
                    (scope, epoch, node, os.getpid(), seq),
                )
    except psycopg2.Error as e:
        if e.pgcode != "PLF01":
            raise
        # Report it outside the refused transaction (its rollback would take
        # the audit row along); a failure to report must not hide the fence.
        try:
            with conn:
                with conn.cursor() as cur:
                    cur.execute("SELECT pgleader.fence_rejected(%s, %s, %s, %s)",
                                (scope, epoch, node, "worker.py seq %d" % seq))
        except psycopg2.Error as report_err:
            print("worker: could not report the fenced write: %s" % report_err, file=sys.stderr)
        raise Fenced(e.pgerror.strip() if e.pgerror else str(e)) from e


def main(argv):
    scope = os.environ["PGLEADER_SCOPE"]
    epoch = int(os.environ["PGLEADER_EPOCH"])
    node = os.environ.get("PGLEADER_NODE_ID", "")
    conn = connect()
    try:
        if argv[1:] == ["once"]:
            write(conn, scope, epoch, node, 0)
            print("worker: wrote under epoch %d" % epoch)
            return 0

        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        print("worker: pid %d leads %s under epoch %d" % (os.getpid(), scope, epoch), flush=True)
        seq = 0
        while not stopping:
            seq += 1
            write(conn, scope, epoch, node, seq)
            time.sleep(INTERVAL)
        print("worker: stopped after %d writes" % seq, flush=True)
        return 0
    except Fenced as e:
        print("worker: fenced (PLF01), epoch %d is stale; not writing again: %s" % (epoch, e), file=sys.stderr)
        return FENCED_EXIT
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
