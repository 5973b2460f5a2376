-- process_changed: a registration under a node id comes from another process
-- than the one registered before (its os pid or host differ): a restart, which
-- moves started_at and counts in restarts.
CREATE OR REPLACE FUNCTION pgleader.process_changed(p_old_pid integer, p_old_host text, p_pid integer, p_host text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT p_old_pid IS DISTINCT FROM p_pid OR p_old_host IS DISTINCT FROM p_host
$function$;
