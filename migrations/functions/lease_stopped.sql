-- lease_stopped: record a clean shutdown of the lease-mode node with token.
CREATE OR REPLACE FUNCTION pgleader.lease_stopped(p_node text, p_token bigint)
 RETURNS boolean
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  UPDATE pgleader.nodes n SET stopped_at = now(), last_seen = now(), leads = '{}'
   WHERE n.node_id = p_node AND n.lease_token = p_token
  RETURNING true
$function$;
