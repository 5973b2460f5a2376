-- key_free: whether no session holds the advisory lock k exclusively (bigint key,
-- this database), by taking it shared without waiting and giving it back.
CREATE OR REPLACE FUNCTION pgleader.key_free(k bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF pg_try_advisory_lock_shared(k) THEN
    PERFORM pg_advisory_unlock_shared(k);
    RETURN true;
  END IF;
  RETURN false;
END $function$;
