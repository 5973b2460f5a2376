-- pgleader schema, version 3: the publication the collector's logical-replication
-- source subscribes to (collector/logical).
--
-- pgleader_events publishes every change of leader_state, terms and audit (inserts,
-- updates, deletes, truncates). A publication is only a catalog entry: creating it
-- works whatever wal_level is, and it costs nothing until a replication slot reads
-- through it. Reading it needs wal_level = logical and a role with REPLICATION (or a
-- superuser); without them the collector simply keeps polling.
--
-- Idempotent: the publication is created when missing, and a publication of that name
-- made by hand is completed with whichever of the three tables it lacks (nothing is
-- removed from it).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 3 $$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
  v_table text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'pgleader_events') THEN
    CREATE PUBLICATION pgleader_events
      FOR TABLE pgleader.leader_state, pgleader.terms, pgleader.audit;
    RETURN;
  END IF;
  -- A publication FOR ALL TABLES already covers them (and cannot be altered).
  IF (SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = 'pgleader_events') THEN
    RETURN;
  END IF;
  FOREACH v_table IN ARRAY ARRAY['leader_state', 'terms', 'audit'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables
                    WHERE pubname = 'pgleader_events'
                      AND schemaname = 'pgleader' AND tablename = v_table) THEN
      EXECUTE format('ALTER PUBLICATION pgleader_events ADD TABLE %I.%I', 'pgleader', v_table);
    END IF;
  END LOOP;
END $$;
-- +goose StatementEnd

-- No Down section (see 001_schema.sql).
