-- refuse_taken_node (registration, both modes): PLF06 when the node id n is
-- running (p_live: its beacon held, or its lease-mode heartbeat recent) under
-- another login role: node ids are not secrets, and a second login must not
-- take over a running node's row.
CREATE OR REPLACE FUNCTION pgleader.refuse_taken_node(n pgleader.nodes, p_live boolean)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF n.node_id IS NOT NULL AND n.login_role IS DISTINCT FROM session_user::text AND n.login_role IS NOT NULL
     AND n.stopped_at IS NULL AND p_live THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF06',
      MESSAGE = format('pgleader: node %L is running%s under login role %I; role %I may not register it',
                       n.node_id, CASE WHEN n.backend_pid IS NOT NULL THEN format(' (backend %s)', n.backend_pid) ELSE '' END,
                       n.login_role, session_user),
      HINT = 'give each process its own node id';
  END IF;
END $function$;
