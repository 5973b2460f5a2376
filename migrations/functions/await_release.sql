-- await_release: wait up to p_timeout_ms until no session holds key p_key
-- exclusively. Returns true when it is free, false on timeout. Waiting followers
-- use it on a connection of their own: the wait costs the server nothing and ends
-- within a millisecond of the holder's release or death. A lock_timeout can fire
-- at the very moment the lock is granted (55P03 with the lock held): reconcile
-- through pg_locks. The shared lock is given back before returning.
-- Proof: the caller's login is the login of a registered node that has not
-- stopped (PLF12): only a candidate waits on pgleader's keys. Bounds:
-- 1 ≤ p_timeout_ms ≤ 60000 (PLF11); a wait longer than a minute is several calls.
CREATE OR REPLACE FUNCTION pgleader.await_release(p_key bigint, p_timeout_ms integer)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF p_timeout_ms IS NULL OR p_timeout_ms < 1 OR p_timeout_ms > 60000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: await_release timeout %s ms: must be 1 to 60000', p_timeout_ms);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pgleader.nodes n WHERE n.login_role = session_user AND n.stopped_at IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: role %s has no registered node: await_release is a candidate''s wait', quote_ident(session_user));
  END IF;
  PERFORM set_config('lock_timeout', p_timeout_ms::text, true);
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
