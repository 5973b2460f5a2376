-- node_heartbeat: node p_node's leadership session renews the terms it holds
-- (p_scopes, p_epochs), asks for the failbacks due (request_failbacks), settles
-- the guards its new terms waited for (p_settled), and learns, for the scopes
-- it follows, of a new epoch or the absence of a live holder, and which peer to
-- watch (the ring).
-- Proof: a led scope is renewed only while this backend holds its lock and the
-- term names p_node; last_seen, leads and failback requests are written only
-- when this backend is the one node p_node registered (no PLF12 here: a
-- session whose registration another process of the same login took over
-- keeps renewing only the terms its backend holds, until it ends them).
-- Bounds: at most 10000 scopes led and 10000 followed (PLF11).
-- Schema 17: a row of kind 'reserved' (holder: the target) for each followed
-- scope that is free and reserved by a handover: what the release's doorbell
-- tells the target, for a node whose doorbell cannot ring (engines before
-- schema 17 ignore the kind).
CREATE OR REPLACE FUNCTION pgleader.node_heartbeat(p_node text, p_scopes text[], p_epochs bigint[], p_follow text[], p_known bigint[], p_settled text[] DEFAULT '{}'::text[])
 RETURNS TABLE(kind text, scope text, ok boolean, epoch bigint, holder text, resign boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_leads text[];
  v_locks jsonb := pgleader.lock_map(); -- one read of pg_locks, looked up by 'pid:key'
  v_me    text := pg_backend_pid()::text || ':';
  v_mine  boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  IF cardinality(p_scopes) > 10000 OR cardinality(p_follow) > 10000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: a heartbeat of more than 10000 scopes';
  END IF;
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid() AND n.login_role = session_user
  RETURNING true INTO v_mine;
  IF coalesce(v_mine, false) AND cardinality(p_scopes) > 0 THEN
    PERFORM pgleader.request_failbacks(p_node, p_scopes, p_epochs, v_locks);
  END IF;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(),
           unresolved_guards = CASE WHEN s.scope = ANY (p_settled) THEN '{}' ELSE s.unresolved_guards END,
           unresolved_trust_ms = CASE WHEN s.scope = ANY (p_settled) THEN 0 ELSE s.unresolved_trust_ms END
      FROM want
     WHERE s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL
       AND v_locks ? (v_me || s.lock_key::text)
    RETURNING s.scope,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
  ), follow AS (
    -- A scope without a row was never claimed (its lock may be squatted): it has
    -- no live holder either.
    SELECT f.scope, coalesce(s.epoch, 0) AS epoch, f.known,
           CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                 AND v_locks ? (s.holder_pid::text || ':' || s.lock_key::text)
                THEN s.holder END AS live
      FROM unnest(p_follow, p_known) AS f(scope, known)
      LEFT JOIN pgleader.leader_state s ON s.scope = f.scope
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, upd.handover, coalesce(upd.resign, false)
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, follow.scope, false, follow.epoch, follow.live, false
    FROM follow
   WHERE follow.live IS NULL OR follow.epoch IS DISTINCT FROM follow.known
  UNION ALL
  SELECT 'reserved'::text, s.scope, false, s.epoch, s.handover_to, false
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_follow) AND s.handover_to IS NOT NULL AND s.handover_deadline > now()
     AND (s.holder IS NULL OR s.released_at IS NOT NULL)
  UNION ALL
  (SELECT 'ring'::text, NULL::text, true, n.beacon_key, n.node_id, false
     FROM pgleader.nodes n
    WHERE n.node_id <> p_node AND n.stopped_at IS NULL AND n.beacon_key IS NOT NULL
      AND v_locks ? (n.backend_pid::text || ':' || n.beacon_key::text)
    ORDER BY n.node_id <= p_node, n.node_id
    LIMIT 1);
  SELECT coalesce(array_agg(s.scope ORDER BY s.scope), '{}') INTO v_leads
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
     AND s.last_heartbeat = now();
  UPDATE pgleader.nodes n SET leads = v_leads
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid() AND n.leads IS DISTINCT FROM v_leads;
END $function$;
