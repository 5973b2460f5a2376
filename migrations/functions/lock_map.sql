-- lock_map: every exclusive advisory lock of this database as a jsonb object whose
-- keys are 'pid:key', for lookups (?) in O(log n). pg_lock_status() is estimated at
-- one row, so a join against it becomes a nested loop over the whole lock table for
-- every probing row: at a thousand scopes that is a million comparisons per call.
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined (its SET clause)
-- is parsed and planned again by every statement that calls it; a PL/pgSQL
-- function's plan is kept for the session (the watch's re-read took 1.4 ms with
-- these helpers in SQL, 0.7 ms in PL/pgSQL: docs/design.md §4). The query is
-- advisory_locks' with the mode filter.
CREATE OR REPLACE FUNCTION pgleader.lock_map()
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RETURN (SELECT coalesce(jsonb_object_agg(l.pid::text || ':' || ((l.classid::bigint << 32) | l.objid::bigint)::text, true), '{}')
            FROM pg_catalog.pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.mode = 'ExclusiveLock'
             AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()));
END $function$;
