-- pgleader schema, version 17: what the watchers show is what happened.
--
-- terms.last_sign: when the term's holder was last seen leading — its release
-- for a term it ended itself, its last heartbeat for a term its successor
-- closed. A term's length is last_sign − acquired_at: the time after the
-- holder's last sign of life (a crash, a database outage) is a gap, not time
-- held. released_at keeps when the term was closed. Rows of earlier schemas are
-- filled from their successor's handover gap.
--
-- nodes.restarts: how many times a node id was registered again by a new
-- process (a crash loop under a fixed id shows); started_at is now the start of
-- the process that registered last, first_registered_at when the id was first
-- registered (what started_at said before).

-- terms.child_exits, child_exit_code, child_exit_cause: the command `pgleader
-- run` supervised ended on its own while the term was led (term_child_exit):
-- how many times, and the last exit's code and cause (exit or signal). A term
-- that ended after its child crashed reads as such, not as a clean shutdown.

-- leader_state.fenced_off_epoch: the dead term whose fenced transactions
-- end_fenced ended; fence refuses that epoch from then on, so that a writer that
-- keeps fencing with it cannot hold the row forever (found by the protocol's
-- model: docs/model.md §8.3).

-- pgleader.doorbells: each lock-mode node's watch session, as it registered
-- itself (doorbell_register): its backend (pid, backend_start, login,
-- application_name), and whether the owner role may signal it (ringable, else
-- why_not). A function whose change concerns a node locks its row FOR KEY SHARE
-- and signals that backend (pg_cancel_backend); the woken session's re-read
-- (watch) locks the row FOR UPDATE first, so it reads after every ringer's
-- commit. Nodes no longer LISTEN (docs/design.md §4, the doorbell).

-- +goose Up
ALTER TABLE pgleader.terms ADD COLUMN IF NOT EXISTS last_sign timestamptz;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS fenced_off_epoch bigint;
ALTER TABLE pgleader.terms ADD COLUMN IF NOT EXISTS child_exits int NOT NULL DEFAULT 0;
ALTER TABLE pgleader.terms ADD COLUMN IF NOT EXISTS child_exit_code int;
ALTER TABLE pgleader.terms ADD COLUMN IF NOT EXISTS child_exit_cause text;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS restarts int NOT NULL DEFAULT 0;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS first_registered_at timestamptz;
UPDATE pgleader.nodes SET first_registered_at = started_at WHERE first_registered_at IS NULL;
ALTER TABLE pgleader.nodes ALTER COLUMN first_registered_at SET DEFAULT now();

UPDATE pgleader.terms t
   SET last_sign = CASE WHEN t.release_reason IN ('resigned', 'shutdown', 'handed_over') THEN t.released_at
                        ELSE coalesce((SELECT s.acquired_at - s.handover_gap FROM pgleader.terms s
                                        WHERE s.scope = t.scope AND s.epoch > t.epoch AND s.handover_gap IS NOT NULL
                                        ORDER BY s.epoch LIMIT 1), t.released_at) END
 WHERE t.released_at IS NOT NULL AND t.last_sign IS NULL;

CREATE TABLE IF NOT EXISTS pgleader.doorbells (
    node_id          text PRIMARY KEY REFERENCES pgleader.nodes (node_id) ON DELETE CASCADE,
    backend_pid      int NOT NULL,
    backend_start    timestamptz,
    login_role       name NOT NULL,
    application_name text NOT NULL,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    ringable         boolean NOT NULL,
    why_not          text
);
