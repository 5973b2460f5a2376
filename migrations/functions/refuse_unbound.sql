-- refuse_unbound: raises PLF10 naming the scope, the login and the roles it is
-- bound to.
CREATE OR REPLACE FUNCTION pgleader.refuse_unbound(p_scope text, p_login text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PLF10',
    MESSAGE = format('pgleader: role %s may not campaign for scope %L: it is bound to %s',
                     quote_ident(p_login), p_scope, array_to_string(pgleader.scope_roles(p_scope), ', ')),
    HINT = 'campaign for it with a login of one of those roles, or have the schema owner change the binding (pgleader scope bind; docs/security.md)';
END $function$;
