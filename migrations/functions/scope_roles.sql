-- scope_roles: the roles p_scope is bound to (its own binding, else the longest
-- prefix binding), NULL when it is not bound.
CREATE OR REPLACE FUNCTION pgleader.scope_roles(p_scope text)
 RETURNS text[]
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT b.roles FROM pgleader.scope_bindings b
   WHERE (b.kind = 'scope' AND b.name = p_scope)
      OR (b.kind = 'prefix' AND starts_with(p_scope, b.name))
   ORDER BY b.kind = 'scope' DESC, length(b.name) DESC
   LIMIT 1
$function$;
