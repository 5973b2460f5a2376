-- Whether a session holds an advisory lock on key (in this database). With p_pid NULL:
-- any session; otherwise that backend. A bigint key appears in pg_locks split into
-- classid (high 32 bits) and objid (low 32 bits) with objsubid = 1.
CREATE OR REPLACE FUNCTION pgleader.lock_held(p_key bigint, p_pid integer, p_mode text DEFAULT 'ExclusiveLock'::text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.mode = p_mode
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
      AND ((l.classid::bigint << 32) | l.objid::bigint) = p_key
      AND (p_pid IS NULL OR l.pid = p_pid))
$function$;
