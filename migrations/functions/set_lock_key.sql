-- set_lock_key: record p_key as p_scope's lock key (NULL: back to the derived
-- key). Refused while a session holds the scope's current key, which would let
-- two sessions lead it under two keys. Audited with the caller's login.
-- Proof: the caller is an operator or the owner (EXECUTE); a bound scope's key
-- is changed only by the owner or a login of its roles (PLF10). Refused while
-- running nodes campaign for the scope (PLF07): they would be locked out.
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
  PERFORM pgleader.check_name('scope name', p_scope);
  -- A bound scope's key is its service's (or the owner's) to change.
  IF pgleader.scope_roles(p_scope) IS NOT NULL
     AND NOT pg_catalog.pg_has_role(session_user, (SELECT r.role_name FROM pgleader.roles r WHERE r.kind = 'owner'), 'MEMBER')
     AND NOT pgleader.may_campaign(p_scope, session_user) THEN
    PERFORM pgleader.refuse_unbound(p_scope, session_user);
  END IF;
  -- Running candidates would be locked out (their claims pass the key they
  -- computed at start: PLF03 until they restart).
  SELECT string_agg(ln.node_id, ', ' ORDER BY ln.node_id) INTO v_user
    FROM pgleader.live_nodes(pgleader.lock_map()) ln WHERE p_scope = ANY (ln.scopes);
  IF v_user IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: scope %L: running nodes campaign for it (%s): its key may change only while none does (stop them, change the key, start them with the same override)',
                       p_scope, v_user);
  END IF;
  v_user := NULL;
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
