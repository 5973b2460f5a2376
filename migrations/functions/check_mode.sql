-- check_mode: a claim (an epoch bump) decides the scope's mode — lock when it
-- records a leadership backend (holder_pid), lease otherwise — and may switch it
-- only while no live candidate of the other mode campaigns for the scope.
CREATE OR REPLACE FUNCTION pgleader.check_mode()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_mode  text := CASE WHEN NEW.holder_pid IS NOT NULL THEN 'lock' ELSE 'lease' END;
  v_nodes text;
BEGIN
  IF NEW.holder IS NULL THEN
    RETURN NEW; -- not a claim
  END IF;
  IF v_mode <> OLD.mode THEN
    SELECT string_agg(n.node_id, ', ' ORDER BY n.node_id) INTO v_nodes
      FROM pgleader.nodes n JOIN pgleader.live_nodes(pgleader.lock_map()) ln ON ln.node_id = n.node_id
     WHERE n.mode = OLD.mode AND NEW.scope = ANY (n.scopes);
    IF v_nodes IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF09',
        MESSAGE = format('pgleader: scope %L runs in %s mode (live candidates: %s); a %s-mode node may not claim it: every candidate of a scope must use the same mode',
                         NEW.scope, OLD.mode, v_nodes, v_mode);
    END IF;
  END IF;
  NEW.mode := v_mode;
  RETURN NEW;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.leader_state'::regclass AND tgname = 'check_mode') THEN
    CREATE TRIGGER check_mode
      BEFORE UPDATE OF epoch ON pgleader.leader_state
      FOR EACH ROW
      WHEN ((new.epoch IS DISTINCT FROM old.epoch))
      EXECUTE FUNCTION pgleader.check_mode();
  END IF;
END $$;
