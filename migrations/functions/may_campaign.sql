-- may_campaign: whether login p_login may campaign for p_scope: the scope is not
-- bound, or p_login is a member of one of its roles (superusers are members of
-- every role).
CREATE OR REPLACE FUNCTION pgleader.may_campaign(p_scope text, p_login text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT CASE WHEN r IS NULL THEN true
              WHEN p_login IS NULL THEN false
              ELSE EXISTS (SELECT 1 FROM unnest(r) x JOIN pg_catalog.pg_roles g ON g.rolname = x
                            JOIN pg_catalog.pg_roles u ON u.rolname = p_login
                           WHERE pg_catalog.pg_has_role(u.oid, g.oid, 'MEMBER')) END
    FROM pgleader.scope_roles(p_scope) r
$function$;
