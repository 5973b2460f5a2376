CREATE OR REPLACE FUNCTION pgleader.fence_rejected(p_scope text, p_epoch bigint, p_node text, p_detail text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_current bigint;
BEGIN
  SELECT s.epoch INTO v_current FROM pgleader.leader_state s WHERE s.scope = p_scope;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_node, p_epoch, 'fence_rejected',
          jsonb_build_object('current_epoch', v_current, 'detail', p_detail));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', p_epoch, 'holder', p_node, 'event', 'fence_rejected')::text);
END $function$;
