-- wal_timeline: the timeline this primary inserts WAL on. Fails during recovery
-- (SQLSTATE 55000, "recovery is in progress").
CREATE OR REPLACE FUNCTION pgleader.wal_timeline()
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
$function$;
