-- pgleader schema, version 14: terms end as database_failover.
--
-- A term whose holder's sessions ended with the database — the server restarted
-- since its last heartbeat, or a standby was promoted (the WAL timeline
-- changed) — was recorded as crashed, heartbeat_timeout or lost_connection,
-- whichever the successor's view matched, and sent the on-call engineer after
-- the node. The successor's claim now records database_failover
-- (functions/claim_scopes.sql, functions/lease_claim_scopes.sql).
--
-- Without a transaction, so that the new constraint is validated without
-- holding the table's exclusive lock (claims insert into terms meanwhile); a
-- run interrupted between the statements is completed by the next.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE pgleader.terms DROP CONSTRAINT IF EXISTS terms_release_reason_check;
ALTER TABLE pgleader.terms ADD CONSTRAINT terms_release_reason_check CHECK (release_reason IN
    ('resigned', 'shutdown', 'handed_over', 'lost_connection', 'heartbeat_timeout', 'evicted', 'crashed',
     'database_failover')) NOT VALID;
ALTER TABLE pgleader.terms VALIDATE CONSTRAINT terms_release_reason_check;
