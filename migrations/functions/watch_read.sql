-- watch_read: what node n should act on, as one row of arrays (watch's READ;
-- the kinds are described there). One read of pg_locks (lock_map) serves the
-- liveness of holders, handover targets and the ring peer.
-- PL/pgSQL so that its plan is kept for the session (lock_map).
CREATE OR REPLACE FUNCTION pgleader.watch_read(n pgleader.nodes)
 RETURNS TABLE(kinds text[], scopes text[], epochs bigint[], nodes text[], keys bigint[], hashes integer[])
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RETURN QUERY
  WITH locks AS MATERIALIZED (SELECT pgleader.lock_map() AS m),
  mine AS MATERIALIZED (
    SELECT s.scope, s.epoch, s.holder, s.last_holder, s.released_at, s.retired_at,
           s.resign_requested_epoch, s.handover_epoch,
           CASE WHEN s.handover_deadline > clock_timestamp() THEN s.handover_to END AS reserved_for,
           (s.holder IS NOT NULL AND s.released_at IS NULL AND s.holder_pid IS NOT NULL
            AND (SELECT l.m FROM locks l) ? (s.holder_pid::text || ':' || s.lock_key::text)) AS live
      FROM pgleader.leader_state s
     WHERE s.scope = ANY (n.scopes) AND s.retired_at IS NULL
  ),
  live AS MATERIALIZED (
    SELECT ln.node_id FROM pgleader.live_nodes((SELECT l.m FROM locks l)) ln
  ),
  rows AS (
    SELECT 'claim'::text AS kind, m.scope, m.epoch, coalesce(m.holder, m.last_holder) AS node, NULL::bigint AS key
      FROM mine m
     WHERE NOT m.live AND coalesce(m.holder, '') <> n.node_id
       AND (m.reserved_for IS NULL OR (m.reserved_for <> n.node_id AND m.reserved_for NOT IN (SELECT node_id FROM live)))
    UNION ALL
    SELECT 'reserved', m.scope, m.epoch, n.node_id, NULL
      FROM mine m
     WHERE NOT m.live AND m.reserved_for = n.node_id
    UNION ALL
    SELECT 'request', m.scope, m.epoch, CASE WHEN m.handover_epoch = m.epoch THEN m.reserved_for END, NULL
      FROM mine m
     WHERE m.live AND m.holder = n.node_id
       AND (m.resign_requested_epoch = m.epoch OR (m.handover_epoch = m.epoch AND m.reserved_for IS NOT NULL))
    UNION ALL
    (SELECT 'peer', NULL, NULL, p.node_id, p.beacon_key
       FROM pgleader.nodes p
      WHERE p.node_id <> n.node_id AND p.stopped_at IS NULL AND p.mode = 'lock' AND p.beacon_key IS NOT NULL
        AND (SELECT l.m FROM locks l) ? (p.backend_pid::text || ':' || p.beacon_key::text)
      ORDER BY p.node_id <= n.node_id, p.node_id
      LIMIT 1)
  )
  SELECT coalesce(array_agg(r.kind), '{}'), coalesce(array_agg(r.scope), '{}'), coalesce(array_agg(r.epoch), '{}'),
         coalesce(array_agg(r.node), '{}'), coalesce(array_agg(r.key), '{}'),
         coalesce(array_agg(hashtext(concat_ws('|', r.kind, r.scope, r.epoch, r.node, r.key))), '{}')
    FROM rows r;
END $function$;
