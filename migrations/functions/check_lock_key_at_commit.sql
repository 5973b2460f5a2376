-- check_lock_key_at_commit (deferred constraint trigger on inserts of scratch
-- scopes, 'pgleader-warmup-…'): a session warm-up's scratch scope lives only in
-- a transaction that is rolled back; one about to commit is refused (PLF03), so
-- no claim can leave a scratch row (or, through it, a lock) behind. It runs as
-- the owner (it fires at commit, outside the function that wrote).
CREATE OR REPLACE FUNCTION pgleader.check_lock_key_at_commit()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PLF03',
    MESSAGE = format('pgleader: scope %L is a session warm-up''s scratch scope: it never commits', NEW.scope);
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
