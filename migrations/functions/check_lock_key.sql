-- check_lock_key (trigger on leader_state): a row carries the key the database
-- allows for its scope (expected_key), whoever writes it. No exception: a
-- session warm-up's scratch scope ('pgleader-warmup-…') uses its derived key
-- like any scope (and never commits: check_lock_key_at_commit).
CREATE OR REPLACE FUNCTION pgleader.check_lock_key()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_want bigint := pgleader.expected_key(NEW.scope);
BEGIN
  IF NEW.lock_key IS DISTINCT FROM v_want THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L: lock key %s is not the one the database allows (%s)',
                       NEW.scope, NEW.lock_key, v_want),
      HINT = 'a node may not choose a scope''s key: remove the override from the node''s configuration (Config.LockKeys), or record it as the owner or an operator: pgleader scope key SCOPE KEY';
  END IF;
  RETURN NEW;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.leader_state'::regclass AND tgname = 'leader_state_lock_key') THEN
    CREATE TRIGGER leader_state_lock_key
      BEFORE INSERT OR UPDATE OF lock_key ON pgleader.leader_state
      FOR EACH ROW
      EXECUTE FUNCTION pgleader.check_lock_key();
  END IF;
END $$;
