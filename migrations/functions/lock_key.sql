-- The advisory-lock key of a scope: the first 8 bytes of sha256(scope) as a signed
-- bigint. A DBA can reproduce it: SELECT pgleader.lock_key('billing');
CREATE OR REPLACE FUNCTION pgleader.lock_key(p_scope text)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE STRICT
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT ('x' || substr(encode(sha256(convert_to(p_scope, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint
$function$;
