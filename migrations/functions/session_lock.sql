-- session_lock: take a session-level advisory lock on p_key for the calling
-- session: a node's guard or beacon, random keys the engine draws per session.
-- Bounds, since with the advisory-lock functions revoked from PUBLIC (the
-- hardening) this is a node login's only way to take an advisory lock:
--   * the key of a known scope is refused (PLF05): a scope with a row, an
--     override (scope_keys), a binding of its own, or a node that registered it;
--   * a session holds at most two keys taken here beside the scope locks it
--     leads (PLF14): the guard session one, the leadership session one (the
--     beacon); more would let one login fill the server's lock table, which
--     every database of the server shares.
CREATE OR REPLACE FUNCTION pgleader.session_lock(p_key bigint)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_held int;
BEGIN
  IF p_key IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: session_lock needs a key';
  END IF;
  IF EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = p_key)
     OR EXISTS (SELECT 1 FROM pgleader.scope_keys k WHERE k.lock_key = p_key)
     OR EXISTS (SELECT 1 FROM pgleader.scope_bindings b WHERE b.kind = 'scope' AND pgleader.lock_key(b.name) = p_key)
     OR EXISTS (SELECT 1 FROM (SELECT DISTINCT unnest(n.scopes) AS scope FROM pgleader.nodes n) c
                 WHERE pgleader.lock_key(c.scope) = p_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF05',
      MESSAGE = format('pgleader: key %s is the lock key of a scope: session_lock takes guard and beacon keys only', p_key);
  END IF;
  SELECT count(*) INTO v_held FROM pgleader.advisory_locks() l
   WHERE l.pid = pg_backend_pid() AND l.mode = 'ExclusiveLock'
     AND NOT EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = l.key);
  IF v_held >= 2 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF14',
      MESSAGE = format('pgleader: this session (backend %s) holds %s advisory locks already: session_lock takes a guard or a beacon, one a session',
                       pg_backend_pid(), v_held),
      HINT = 'a node takes its guard on the guard session and its beacon on the leadership session (docs/protocol.md, Open a session)';
  END IF;
  PERFORM pg_advisory_lock(p_key);
END $function$;
