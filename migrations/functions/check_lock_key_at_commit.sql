-- check_lock_key_at_commit (deferred constraint trigger): no row under a key
-- the database does not allow commits, a warm-up's scratch row included. It
-- runs as the owner (it fires at commit, outside the function that wrote).
CREATE OR REPLACE FUNCTION pgleader.check_lock_key_at_commit()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.leader_state s
              WHERE s.scope = NEW.scope AND s.lock_key IS DISTINCT FROM pgleader.expected_key(s.scope)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L: lock key %s is not the one the database allows (%s)',
                       NEW.scope, NEW.lock_key, pgleader.expected_key(NEW.scope));
  END IF;
  RETURN NULL;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.leader_state'::regclass AND tgname = 'leader_state_lock_key_commit') THEN
    CREATE CONSTRAINT TRIGGER leader_state_lock_key_commit
      AFTER INSERT ON pgleader.leader_state
      DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW
      WHEN ((new.scope ~~ 'pgleader-warmup-%'::text))
      EXECUTE FUNCTION pgleader.check_lock_key_at_commit();
  END IF;
END $$;
