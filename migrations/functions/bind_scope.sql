-- bind_scope: bind a scope (p_kind 'scope') or every scope whose name starts with
-- p_name (p_kind 'prefix') to p_roles, the roles whose members may campaign for
-- it; an empty or NULL p_roles removes the binding. Only the schema owner runs it
-- (no role is granted it). Returns the running nodes that campaign for a scope of
-- the binding under a login it does not allow: their claims of it are refused
-- from now on, and they should be restarted without it. Audited.
CREATE OR REPLACE FUNCTION pgleader.bind_scope(p_kind text, p_name text, p_roles text[])
 RETURNS TABLE(node_id text, login_role text, scope text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_missing text;
BEGIN
  IF p_kind IS NULL OR p_kind NOT IN ('scope', 'prefix') THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: binding kind %L: must be scope or prefix', p_kind);
  END IF;
  IF p_name IS NULL OR p_name = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pgleader: a scope name or prefix is required';
  END IF;
  IF coalesce(cardinality(p_roles), 0) = 0 THEN
    DELETE FROM pgleader.scope_bindings b WHERE b.kind = p_kind AND b.name = p_name;
    INSERT INTO pgleader.audit (scope, kind, detail)
    VALUES (CASE WHEN p_kind = 'scope' THEN p_name END, 'scope_unbound',
            jsonb_build_object('kind', p_kind, 'name', p_name, 'by', session_user));
    RETURN;
  END IF;
  SELECT min(x) INTO v_missing FROM unnest(p_roles) x
   WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = x);
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('pgleader: role %s does not exist', quote_ident(v_missing));
  END IF;
  INSERT INTO pgleader.scope_bindings AS b (kind, name, roles)
  VALUES (p_kind, p_name, ARRAY(SELECT DISTINCT x FROM unnest(p_roles) x ORDER BY x))
  ON CONFLICT ON CONSTRAINT scope_bindings_pkey
  DO UPDATE SET roles = EXCLUDED.roles, bound_by = session_user, bound_at = clock_timestamp();
  INSERT INTO pgleader.audit (scope, kind, detail)
  VALUES (CASE WHEN p_kind = 'scope' THEN p_name END, 'scope_bound',
          jsonb_build_object('kind', p_kind, 'name', p_name, 'roles', to_jsonb(p_roles), 'by', session_user));
  RETURN QUERY
    SELECT n.node_id, n.login_role, x
      FROM pgleader.nodes n CROSS JOIN LATERAL unnest(n.scopes) x
     WHERE n.stopped_at IS NULL
       AND ((p_kind = 'scope' AND x = p_name) OR (p_kind = 'prefix' AND starts_with(x, p_name)))
       AND NOT pgleader.may_campaign(x, n.login_role)
     ORDER BY n.node_id, x;
END $function$;
