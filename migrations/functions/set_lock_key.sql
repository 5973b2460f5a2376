-- set_lock_key: record p_key as p_scope's lock key (NULL: back to the derived
-- key). Refused while a session holds the scope's current key, which would let
-- two sessions lead it under two keys. Audited with the caller's login.
CREATE OR REPLACE FUNCTION pgleader.set_lock_key(p_scope text, p_key bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_old  bigint := pgleader.expected_key(p_scope);
  v_new  bigint := coalesce(p_key, pgleader.lock_key(p_scope));
  v_row  bigint;
  v_user text;
BEGIN
  IF p_scope IS NULL OR p_scope = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pgleader: a scope name is required';
  END IF;
  SELECT k.scope INTO v_user FROM pgleader.scope_keys k WHERE k.lock_key = v_new AND k.scope <> p_scope;
  IF FOUND OR EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = v_new AND s.scope <> p_scope) THEN
    RAISE EXCEPTION USING ERRCODE = '23505',
      MESSAGE = format('pgleader: lock key %s is already the key of scope %L', v_new,
                       coalesce(v_user, (SELECT s.scope FROM pgleader.leader_state s WHERE s.lock_key = v_new)));
  END IF;
  SELECT s.lock_key INTO v_row FROM pgleader.leader_state s WHERE s.scope = p_scope FOR UPDATE;
  IF FOUND AND v_row <> v_new AND pgleader.lock_held(v_row, NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: scope %L is held under key %s: its key may change only while no session holds it (stop its nodes first)',
                       p_scope, v_row);
  END IF;
  DELETE FROM pgleader.scope_keys k WHERE k.scope = p_scope;
  IF p_key IS NOT NULL AND p_key <> pgleader.lock_key(p_scope) THEN
    INSERT INTO pgleader.scope_keys (scope, lock_key) VALUES (p_scope, p_key);
  END IF;
  IF v_row IS NOT NULL AND v_row <> v_new THEN
    UPDATE pgleader.leader_state s SET lock_key = v_new WHERE s.scope = p_scope;
  END IF;
  INSERT INTO pgleader.audit (scope, kind, detail)
  VALUES (p_scope, 'lock_key_set', jsonb_build_object('lock_key', v_new, 'previous', v_old,
          'derived', pgleader.lock_key(p_scope), 'by', session_user));
  RETURN v_new;
END $function$;
