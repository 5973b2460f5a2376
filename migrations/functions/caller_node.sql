-- caller_node: the node p_node as registered by the calling session, or PLF12.
-- Lock mode (p_token NULL): this backend registered it (nodes.backend_pid) under
-- this login, and it has not stopped. Lease mode: the node was registered with
-- p_token (a secret only the owner reads) under this login, and has not stopped.
-- A node id is a name, never a proof: every SECURITY DEFINER function that acts
-- for a node calls this first.
CREATE OR REPLACE FUNCTION pgleader.caller_node(p_node text, p_token bigint DEFAULT NULL::bigint)
 RETURNS pgleader.nodes
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n pgleader.nodes;
BEGIN
  IF p_token IS NULL THEN
    SELECT * INTO n FROM pgleader.nodes x
     WHERE x.node_id = p_node AND x.backend_pid = pg_backend_pid() AND x.mode = 'lock'
       AND x.login_role = session_user AND x.stopped_at IS NULL;
  ELSE
    SELECT * INTO n FROM pgleader.nodes x
     WHERE x.node_id = p_node AND x.lease_token = p_token AND x.mode = 'lease'
       AND x.login_role = session_user AND x.stopped_at IS NULL;
  END IF;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: this session (backend %s, role %s) is not the registered %s of node %L',
                       pg_backend_pid(), quote_ident(session_user),
                       CASE WHEN p_token IS NULL THEN 'leadership session' ELSE 'lease-mode session (node id and token)' END,
                       p_node),
      HINT = 'call it on the session that registered the node (register_node, lease_register), and register again after a reconnect';
  END IF;
  RETURN n;
END $function$;
