-- check_node_scopes (trigger on nodes): a node registers only scopes its login
-- may campaign for.
CREATE OR REPLACE FUNCTION pgleader.check_node_scopes()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_bad text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pgleader.scope_bindings) THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.scopes IS NOT DISTINCT FROM OLD.scopes THEN
    RETURN NEW;
  END IF;
  SELECT min(x) INTO v_bad FROM unnest(NEW.scopes) x WHERE NOT pgleader.may_campaign(x, session_user);
  IF v_bad IS NOT NULL THEN
    PERFORM pgleader.refuse_unbound(v_bad, session_user);
  END IF;
  RETURN NEW;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.nodes'::regclass AND tgname = 'nodes_scope_bindings') THEN
    CREATE TRIGGER nodes_scope_bindings
      BEFORE INSERT OR UPDATE OF scopes ON pgleader.nodes
      FOR EACH ROW
      EXECUTE FUNCTION pgleader.check_node_scopes();
  END IF;
END $$;
