-- watch_terms_v1: the leadership history as the watching side reads it,
-- version 1 of that contract (columns only ever added at the end; see
-- watch_nodes_v1). handover_gap_us: acquired_at minus the predecessor's release
-- (or last heartbeat), in microseconds. last_sign (schema 17): when the holder
-- was last seen leading (its release, or its last heartbeat when a successor
-- closed the term); NULL while the term is open. child_exits, child_exit_code,
-- child_exit_cause (schema 17): the command `pgleader run` supervised ended on
-- its own while the term was led (term_child_exit).
CREATE OR REPLACE VIEW pgleader.watch_terms_v1 AS
SELECT t.id, t.scope, t.epoch, t.holder, t.hostname, t.holder_pid, t.acquired_at, t.released_at,
       t.release_reason, (extract(epoch FROM t.handover_gap) * 1000000)::bigint AS handover_gap_us,
       t.handed_to, t.last_sign, t.child_exits, t.child_exit_code, t.child_exit_cause
  FROM pgleader.terms t;
