-- Append-only: rows are never changed or deleted one by one (retention: TRUNCATE or
-- drop old partitions).
CREATE OR REPLACE FUNCTION pgleader.audit_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  RAISE EXCEPTION 'pgleader.audit is append-only (% refused)', TG_OP;
END $function$;

-- Its trigger, created when missing: a trigger whose definition changes gets
-- a new name (recreating one would lock the table under running nodes).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'pgleader.audit'::regclass AND tgname = 'audit_append_only') THEN
    CREATE TRIGGER audit_append_only
      BEFORE DELETE OR UPDATE ON pgleader.audit
      FOR EACH ROW
      EXECUTE FUNCTION pgleader.audit_append_only();
  END IF;
END $$;
