-- request_failbacks: from the leader's heartbeat, ask for the handover of each
-- scope it leads to a preferred node (failback_after_ms) of higher priority
-- that has been live long enough. Only nodes whose login may campaign for the
-- scope are preferred; the request is attributed to the login of the preferred
-- node (recorded at its registration), the one that caused it; recorded_by is
-- the leader's login, whose heartbeat wrote it.
CREATE OR REPLACE FUNCTION pgleader.request_failbacks(p_node text, p_scopes text[], p_epochs bigint[], p_locks jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_prio int;
  r      record;
BEGIN
  -- The common case (every leader heartbeat) is this one statement on the small
  -- nodes table, and a return: nobody preferred outranks this node.
  SELECT me.priority INTO v_prio FROM pgleader.nodes me
   WHERE me.node_id = p_node
     AND EXISTS (SELECT 1 FROM pgleader.nodes n
                  WHERE n.failback_after_ms IS NOT NULL AND n.stopped_at IS NULL
                    AND n.priority > me.priority AND n.scopes && p_scopes);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOR r IN
    WITH cand AS (
      SELECT ln.node_id, ln.priority, ln.scopes, n.failback_after_ms AS after_ms, n.login_role
        FROM pgleader.live_nodes(coalesce(p_locks, pgleader.lock_map())) ln
        JOIN pgleader.nodes n ON n.node_id = ln.node_id
       WHERE n.failback_after_ms IS NOT NULL AND ln.priority > v_prio
         AND n.registered_at <= now() - make_interval(secs => n.failback_after_ms / 1000.0)
    )
    SELECT s.scope, s.epoch, c.node_id AS target, c.priority, c.after_ms, c.login_role
      FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
      JOIN pgleader.leader_state s ON s.scope = w.scope AND s.epoch = w.epoch
      CROSS JOIN LATERAL (
        SELECT cand.node_id, cand.priority, cand.after_ms, cand.login_role FROM cand
         WHERE s.scope = ANY (cand.scopes)
           AND s.acquired_at <= now() - make_interval(secs => cand.after_ms / 1000.0)
           AND NOT coalesce(cand.node_id = s.last_holder AND s.cooldown_until > now(), false)
           AND pgleader.may_campaign(s.scope, cand.login_role)
         ORDER BY cand.priority DESC, cand.node_id LIMIT 1) c
     WHERE s.holder = p_node AND s.released_at IS NULL
       AND (s.handover_deadline IS NULL OR s.handover_deadline <= now())
       AND s.resign_requested_epoch IS DISTINCT FROM s.epoch
       AND coalesce(s.failback_not_before <= now(), true)
       -- failback undoes failovers, not an operator's choice: a term that began
       -- with a handover to its holder other than a failback stays
       AND NOT EXISTS (
         SELECT 1 FROM (SELECT t.epoch, t.handed_to, t.acquired_at FROM pgleader.terms t
                         WHERE t.scope = s.scope AND t.epoch < s.epoch ORDER BY t.epoch DESC LIMIT 1) p
          WHERE p.handed_to = s.holder
            AND NOT EXISTS (SELECT 1 FROM pgleader.audit a
                             WHERE a.scope = s.scope AND a.at >= p.acquired_at AND a.kind = 'handover_requested'
                               AND a.epoch = p.epoch AND a.detail->>'via' = 'failback'))
     FOR NO KEY UPDATE OF s SKIP LOCKED
  LOOP
    UPDATE pgleader.leader_state s SET handover_to = r.target, handover_epoch = r.epoch,
           handover_deadline = now() + interval '30 seconds', handover_by = coalesce(r.login_role, r.target),
           failback_not_before = now() + make_interval(secs => r.after_ms / 1000.0)
     WHERE s.scope = r.scope;
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    VALUES (r.scope, p_node, r.epoch, 'handover_requested',
            jsonb_build_object('to', r.target, 'by', r.login_role, 'recorded_by', session_user,
                               'via', 'failback', 'timeout_ms', 30000,
                               'priority', r.priority, 'holder_priority', v_prio));
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', r.scope, 'epoch', r.epoch, 'holder', p_node, 'event', 'handover_requested', 'to', r.target)::text);
  END LOOP;
END $function$;
