-- Every granted advisory lock (bigint keys) in this database: one read of pg_locks,
-- which snapshots the whole lock table (≈0.2 ms): the hot paths read it once.
CREATE OR REPLACE FUNCTION pgleader.advisory_locks()
 RETURNS TABLE(pid integer, key bigint, mode text)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint, l.mode
    FROM pg_catalog.pg_locks l
   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
$function$;
