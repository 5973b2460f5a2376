-- lease_heartbeat: node_heartbeat for lease mode. Node p_node (its secret token
-- p_token) renews the leases of the terms it names, and learns of each followed
-- scope that has no live holder; a followed scope's row carries, in handover,
-- the node a handover reserves the free scope for (NULL otherwise), so that the
-- target, which gets no notifications in lease mode, ends its resign cooldown at
-- once.
-- A term end_fenced fenced off (leader_state.fenced_off_epoch) is not renewed:
-- its holder, frozen while its lease ran out and back since, loses it instead
-- of leading on with an epoch fence refuses (found by the protocol's model:
-- docs/model.md §8.4).
-- Proof: every write is for the node registered with p_token (a secret) under
-- this login; a led scope is renewed only when its term names p_node. Bounds:
-- at most 10000 scopes led and 10000 followed (PLF11).
CREATE OR REPLACE FUNCTION pgleader.lease_heartbeat(p_node text, p_token bigint, p_scopes text[], p_epochs bigint[], p_follow text[])
 RETURNS TABLE(kind text, scope text, ok boolean, epoch bigint, holder text, seq bigint, resign boolean, handover text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_mine boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  IF cardinality(p_scopes) > 10000 OR cardinality(p_follow) > 10000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: a heartbeat of more than 10000 scopes';
  END IF;
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease' AND n.login_role = session_user
  RETURNING true INTO v_mine;
  IF coalesce(v_mine, false) AND cardinality(p_scopes) > 0 THEN
    PERFORM pgleader.request_failbacks(p_node, p_scopes, p_epochs, NULL);
  END IF;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(), lease_seq = s.lease_seq + 1
      FROM want
     WHERE coalesce(v_mine, false) AND s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL AND s.mode = 'lease' AND s.fenced_off_epoch IS DISTINCT FROM s.epoch
    RETURNING s.scope, s.lease_seq,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, p_node, upd.lease_seq,
         coalesce(upd.resign, false), upd.handover
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, f.scope, false, coalesce(s.epoch, 0),
         CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL THEN s.holder END,
         coalesce(s.lease_seq, 0), false,
         CASE WHEN (s.holder IS NULL OR s.released_at IS NOT NULL) AND s.handover_deadline > now() THEN s.handover_to END
    FROM unnest(p_follow) AS f(scope) LEFT JOIN pgleader.leader_state s ON s.scope = f.scope;
  UPDATE pgleader.nodes n SET leads = coalesce(
           (SELECT array_agg(s.scope ORDER BY s.scope) FROM pgleader.leader_state s
             WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL AND s.last_heartbeat = now()), '{}')
   WHERE n.node_id = p_node AND n.lease_token = p_token;
END $function$;
