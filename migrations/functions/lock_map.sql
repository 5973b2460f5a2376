-- lock_map: every exclusive advisory lock of this database as a jsonb object whose
-- keys are 'pid:key', for lookups (?) in O(log n). pg_lock_status() is estimated at
-- one row, so a join against it becomes a nested loop over the whole lock table for
-- every probing row: at a thousand scopes that is a million comparisons per call.
CREATE OR REPLACE FUNCTION pgleader.lock_map()
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT coalesce(jsonb_object_agg(l.pid::text || ':' || l.key::text, true), '{}')
    FROM pgleader.advisory_locks() l WHERE l.mode = 'ExclusiveLock'
$function$;
