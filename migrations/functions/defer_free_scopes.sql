-- defer_free_scopes: the deferral rule of both modes. Of the free scopes
-- p_scopes that node p_node (priority p_prio) has just locked, which it leaves
-- to another node, and to whom: every one when p_prio is 0 (the node never
-- leads: ''); else the handover target while a handover to a live candidate of
-- the scope is pending; else the live candidate of the highest priority above
-- p_prio (by node id), unless it is the scope's last holder in its resign
-- cooldown, and only for that candidate's trust window W, never less than three
-- of its heartbeat intervals I, from the scope's first deferral (a candidate that
-- does not claim in that time is passed over). The candidate learns of the free
-- scope by its doorbell, or else by its next heartbeat (within I + T < W), and
-- then claims: 3·I alone would pass over a live candidate whose heartbeats are
-- slow but within their timeout. Returns scope → node; marks when each scope was first deferred to a
-- node (deferred_since). p_locks: lock_map(), for live_nodes.
CREATE OR REPLACE FUNCTION pgleader.defer_free_scopes(p_node text, p_prio integer, p_scopes text[], p_locks jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_defer jsonb;
BEGIN
  SELECT coalesce(jsonb_object_agg(d.scope, d.node), '{}') INTO v_defer FROM (
    SELECT s.scope,
           CASE
             WHEN p_prio = 0 THEN ''
             WHEN s.handover_to IS NOT NULL AND s.handover_to <> p_node AND s.handover_deadline > clock_timestamp()
                  AND EXISTS (SELECT 1 FROM pgleader.live_nodes(p_locks) ln
                               WHERE ln.node_id = s.handover_to AND s.scope = ANY (ln.scopes))
               THEN s.handover_to
             ELSE (SELECT ln.node_id FROM pgleader.live_nodes(p_locks) ln
                      JOIN pgleader.nodes w ON w.node_id = ln.node_id
                    WHERE ln.priority > p_prio AND s.scope = ANY (ln.scopes) AND ln.node_id <> p_node
                      AND NOT coalesce(ln.node_id = s.last_holder AND s.cooldown_until > clock_timestamp(), false)
                      AND (s.deferred_since IS NULL OR s.deferred_since
                           + make_interval(secs => greatest(3 * coalesce(ln.heartbeat_interval_ms, 500),
                                                            coalesce(w.trust_window_ms, 0)) / 1000.0) > clock_timestamp())
                    ORDER BY ln.priority DESC, ln.node_id LIMIT 1)
           END AS node
      FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)) d
   WHERE d.node IS NOT NULL;
  IF v_defer <> '{}' THEN
    UPDATE pgleader.leader_state s SET deferred_since = coalesce(s.deferred_since, clock_timestamp())
     WHERE s.scope = ANY (p_scopes) AND v_defer ? s.scope AND v_defer->>s.scope <> '';
  END IF;
  RETURN v_defer;
END $function$;
