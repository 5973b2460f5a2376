-- node_stopped: record a clean shutdown of the node registered on this backend.
CREATE OR REPLACE FUNCTION pgleader.node_stopped(p_node text)
 RETURNS boolean
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  UPDATE pgleader.nodes n SET stopped_at = now(), last_seen = now(), leads = '{}'
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid()
  RETURNING true
$function$;
