-- campaign_refusals: the scopes of p_scopes the calling login may not campaign
-- for, with the roles each is bound to (a node's start-up check).
CREATE OR REPLACE FUNCTION pgleader.campaign_refusals(p_scopes text[])
 RETURNS TABLE(scope text, roles text[])
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT x, pgleader.scope_roles(x) FROM unnest(p_scopes) x
   WHERE NOT pgleader.may_campaign(x, session_user) ORDER BY x
$function$;
