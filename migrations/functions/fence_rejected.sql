-- fence_rejected: audit (and notify) that a write of p_scope at p_epoch was
-- refused by the fence (PLF01), reported outside the rolled-back transaction.
-- Callers: any role granted EXECUTE. The row is attributed to the session's
-- login (audit.session_role), never to p_node, which is recorded as said.
-- Bounds: p_node and the scope at most 200 bytes, p_detail cut to 500 bytes;
-- only scopes that have a row in leader_state; at most 20 rows a second for one
-- scope and login, and 100 for one login: beyond that the call records nothing
-- (the rows already written raise the alert).
CREATE OR REPLACE FUNCTION pgleader.fence_rejected(p_scope text, p_epoch bigint, p_node text, p_detail text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_current bigint;
BEGIN
  IF octet_length(p_scope) > 200 OR octet_length(p_node) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: fence_rejected: the scope and node id are at most 200 bytes';
  END IF;
  SELECT s.epoch INTO v_current FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF NOT FOUND
     OR (SELECT count(*) FROM pgleader.audit a
          WHERE a.scope = p_scope AND a.at > clock_timestamp() - interval '1 second'
            AND a.kind = 'fence_rejected' AND a.session_role = session_user) >= 20
     OR (SELECT count(*) FROM pgleader.audit a
          WHERE a.at > clock_timestamp() - interval '1 second'
            AND a.kind = 'fence_rejected' AND a.session_role = session_user) >= 100 THEN
    RETURN;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_node, p_epoch, 'fence_rejected',
          jsonb_build_object('current_epoch', v_current, 'detail', left(p_detail, 500)));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', p_epoch, 'holder', p_node, 'event', 'fence_rejected')::text);
END $function$;
