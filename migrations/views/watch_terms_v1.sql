-- watch_terms_v1: the leadership history as the watching side reads it,
-- version 1 of that contract (columns only ever added at the end; see
-- watch_nodes_v1). handover_gap_us: acquired_at minus the predecessor's release
-- (or last heartbeat), in microseconds. last_sign (schema 17): when the holder
-- was last seen leading (its release, or its last heartbeat when a successor
-- closed the term); NULL while the term is open.
CREATE OR REPLACE VIEW pgleader.watch_terms_v1 AS
SELECT t.id, t.scope, t.epoch, t.holder, t.hostname, t.holder_pid, t.acquired_at, t.released_at,
       t.release_reason, (extract(epoch FROM t.handover_gap) * 1000000)::bigint AS handover_gap_us,
       t.handed_to, t.last_sign
  FROM pgleader.terms t;
