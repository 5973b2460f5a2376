CREATE OR REPLACE FUNCTION pgleader.schema_version()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$ SELECT 17 $function$;
