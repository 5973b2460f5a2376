-- check_claim_binding (trigger on leader_state): an epoch is granted only to a
-- session whose login may campaign for the scope.
CREATE OR REPLACE FUNCTION pgleader.check_claim_binding()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.scope_bindings) AND NOT pgleader.may_campaign(NEW.scope, session_user) THEN
    PERFORM pgleader.refuse_unbound(NEW.scope, session_user);
  END IF;
  RETURN NEW;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.leader_state'::regclass AND tgname = 'leader_state_scope_bindings') THEN
    CREATE TRIGGER leader_state_scope_bindings
      BEFORE UPDATE OF epoch ON pgleader.leader_state
      FOR EACH ROW
      WHEN (((new.epoch IS DISTINCT FROM old.epoch) AND (new.holder IS NOT NULL)))
      EXECUTE FUNCTION pgleader.check_claim_binding();
  END IF;
END $$;
