-- The floor, enforced on every write of an epoch (heartbeats do not set it, so they
-- do not fire this).
CREATE OR REPLACE FUNCTION pgleader.check_epoch_floor()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_floor bigint := pgleader.epoch_floor();
BEGIN
  IF NEW.epoch <= v_floor AND NEW.epoch > 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF04',
      MESSAGE = format('pgleader: epoch %s of scope %L is at or below the floor %s of timeline %s (a failover happened; claims must bump from the floor: upgrade the engine to schema version 6)',
                       NEW.epoch, NEW.scope, v_floor, pgleader.wal_timeline());
  END IF;
  RETURN NEW;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.leader_state'::regclass AND tgname = 'epoch_floor') THEN
    CREATE TRIGGER epoch_floor
      BEFORE UPDATE OF epoch ON pgleader.leader_state
      FOR EACH ROW
      WHEN ((new.epoch IS DISTINCT FROM old.epoch))
      EXECUTE FUNCTION pgleader.check_epoch_floor();
  END IF;
END $$;
