-- expected_key: the lock key the database allows for p_scope: its override, else
-- the derived key.
CREATE OR REPLACE FUNCTION pgleader.expected_key(p_scope text)
 RETURNS bigint
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT coalesce((SELECT k.lock_key FROM pgleader.scope_keys k WHERE k.scope = p_scope),
                  pgleader.lock_key(p_scope))
$function$;
