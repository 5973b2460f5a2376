-- live_nodes: the nodes that are running now. A lease-mode node is live while
-- it heartbeats: seen within its trust window W, and never less than three of
-- its intervals I. W > I + T (check_timing), so a node whose heartbeats each
-- keep within their timeout T stays live (3·I alone would not, for T > 2·I).
-- A lock-mode node is live while its beacon is held (p_locks: lock_map()).
-- PL/pgSQL so that its plan is kept for the session (lock_map).
CREATE OR REPLACE FUNCTION pgleader.live_nodes(p_locks jsonb)
 RETURNS TABLE(node_id text, priority integer, scopes text[], heartbeat_interval_ms integer, last_seen timestamp with time zone)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RETURN QUERY
  SELECT n.node_id, n.priority, n.scopes, n.heartbeat_interval_ms, n.last_seen
    FROM pgleader.nodes n
   WHERE n.stopped_at IS NULL
     AND CASE WHEN n.mode = 'lease'
              THEN n.last_seen > clock_timestamp() - make_interval(secs =>
                     greatest(3 * coalesce(n.heartbeat_interval_ms, 500), coalesce(n.trust_window_ms, 0)) / 1000.0)
              ELSE n.beacon_key IS NOT NULL AND n.backend_pid IS NOT NULL
                   AND p_locks ? (n.backend_pid::text || ':' || n.beacon_key::text) END;
END $function$;
