-- unlock_held_many: give back every instance of the exclusive advisory locks on
-- p_keys that this session holds (locks stack); returns how many. Reconciles a
-- claim batch that failed in a way its own handler could not catch. One read of
-- pg_locks per round, a round per stacked level.
CREATE OR REPLACE FUNCTION pgleader.unlock_held_many(p_keys bigint[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n    int := 0;
  held bigint[];
BEGIN
  LOOP
    SELECT coalesce(array_agg(l.key), '{}') INTO held FROM pgleader.advisory_locks() l
     WHERE l.pid = pg_backend_pid() AND l.mode = 'ExclusiveLock' AND l.key = ANY (p_keys);
    EXIT WHEN cardinality(held) = 0;
    PERFORM pg_advisory_unlock(k) FROM unnest(held) k;
    n := n + cardinality(held);
  END LOOP;
  RETURN n;
END $function$;
