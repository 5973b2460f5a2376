-- await_release: wait up to p_timeout_ms (0: without limit) until no session holds key
-- exclusively. Returns true when it is free, false on timeout. Waiting followers use it
-- on a connection of their own: the wait costs the server nothing and ends within a
-- millisecond of the holder's release or death. A lock_timeout can fire at the very
-- moment the lock is granted (55P03 with the lock held): reconcile through pg_locks.
CREATE OR REPLACE FUNCTION pgleader.await_release(p_key bigint, p_timeout_ms integer)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_timeout_ms, 0)::text, true);
  BEGIN
    PERFORM pg_advisory_lock_shared(p_key);
  EXCEPTION WHEN lock_not_available THEN
    IF NOT pgleader.lock_held(p_key, pg_backend_pid(), 'ShareLock') THEN
      RETURN false;
    END IF;
  END;
  PERFORM pg_advisory_unlock_shared(p_key);
  RETURN true;
END $function$;
