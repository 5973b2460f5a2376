-- session_lock: take a session-level advisory lock on p_key for the calling session
-- (a node's guard or beacon: random keys the engine draws per session). Refuses
-- the key of a scope, so it cannot be used to squat one.
CREATE OR REPLACE FUNCTION pgleader.session_lock(p_key bigint)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = p_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF05',
      MESSAGE = format('pgleader: key %s is the lock key of a scope: session_lock takes guard and beacon keys only', p_key);
  END IF;
  PERFORM pg_advisory_lock(p_key);
END $function$;
