-- epoch_floor: every epoch granted on this timeline is above it.
CREATE OR REPLACE FUNCTION pgleader.epoch_floor()
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$ SELECT (pgleader.wal_timeline() - 1) << 40 $function$;
