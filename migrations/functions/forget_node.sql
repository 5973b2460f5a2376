-- forget_node: remove a node that is not running from pgleader.nodes (a
-- stopped node, or one whose process died), so that it leaves the views and
-- the metrics; audited (node_forgotten, with the row, the lease token left
-- out) with the caller's login. Its terms and audit rows stay. Returns false
-- when no such node is registered.
-- Proof: the caller is an operator or the owner (EXECUTE). Refused (PLF07)
-- while the node is live (its beacon held, or its lease renewed): a running
-- node is stopped, not forgotten. `pgleader node forget ID` calls it.
CREATE OR REPLACE FUNCTION pgleader.forget_node(p_node text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n pgleader.nodes;
BEGIN
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM pgleader.live_nodes(pgleader.lock_map()) ln WHERE ln.node_id = p_node) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: node %L is running (last seen %s): stop it first; a running node is not forgotten', p_node, n.last_seen);
  END IF;
  DELETE FROM pgleader.nodes x WHERE x.node_id = p_node;
  INSERT INTO pgleader.audit (node_id, kind, detail)
  VALUES (p_node, 'node_forgotten',
          (to_jsonb(n) - 'lease_token') || jsonb_build_object('by', session_user,
            'application_name', current_setting('application_name')));
  RETURN true;
END $function$;
