-- retire_scope: take a scope that no live node campaigns for out of the views and
-- alerts (its history stays). Refused with PLF08 while a running node campaigns
-- for it. A node that campaigns for it again revives it (register_node, claim).
CREATE OR REPLACE FUNCTION pgleader.retire_scope(p_scope text, p_via text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_locks jsonb := pgleader.lock_map();
  v_nodes text;
  v_epoch bigint;
BEGIN
  SELECT string_agg(ln.node_id, ', ' ORDER BY ln.node_id) INTO v_nodes
    FROM pgleader.live_nodes(v_locks) ln WHERE p_scope = ANY (ln.scopes);
  IF v_nodes IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF08',
      MESSAGE = format('pgleader: scope %L cannot be retired: running nodes campaign for it (%s); stop them or remove the scope from their configuration first', p_scope, v_nodes);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scope)
     AND NOT EXISTS (SELECT 1 FROM pgleader.nodes x WHERE p_scope = ANY (x.scopes)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF08', MESSAGE = format('pgleader: scope %L is unknown: no node campaigns for it and none ever led it', p_scope);
  END IF;
  INSERT INTO pgleader.leader_state (scope, lock_key) VALUES (p_scope, pgleader.lock_key(p_scope))
  ON CONFLICT (scope) DO NOTHING;
  UPDATE pgleader.leader_state s SET retired_at = clock_timestamp(), retired_by = session_user,
         handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL
   WHERE s.scope = p_scope AND s.retired_at IS NULL
  RETURNING s.epoch INTO v_epoch;
  IF NOT FOUND THEN
    RETURN false; -- retired already
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, NULL, v_epoch, 'scope_retired',
          jsonb_build_object('by', session_user, 'via', left(p_via, 200), 'application_name', current_setting('application_name')));
  PERFORM pg_notify('leader_change', json_build_object('scope', p_scope, 'event', 'retired')::text);
  RETURN true;
END $function$;
