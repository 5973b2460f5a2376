-- pgleader schema, version 4: an operator (or the collector) can ask a leader to
-- resign gracefully through the database.
--
-- request_resign marks the scope's open term; the holder's next heartbeat reports
-- the mark (column resign) and its engine resigns as if Scope.Resign had been
-- called: the gate closes to new work, in-flight work drains, the term is released
-- as 'resigned' and a follower takes over at once. The mark names an epoch, so it
-- never outlives the term it was meant for. Needs no privilege beyond writing the
-- pgleader tables (unlike pg_terminate_backend).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 4 $$;
-- +goose StatementEnd

ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS resign_requested_epoch bigint;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS resign_requested_by text;

-- request_resign: mark the open term of p_scope (of epoch p_epoch, or whichever is
-- open when p_epoch is NULL) for a graceful resignation. Returns false when no such
-- term is open (already released, or a successor took over).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.request_resign(p_scope text, p_epoch bigint, p_by text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_holder text;
  v_epoch  bigint;
BEGIN
  UPDATE pgleader.leader_state s
     SET resign_requested_epoch = s.epoch, resign_requested_by = p_by
   WHERE s.scope = p_scope AND s.released_at IS NULL AND s.holder IS NOT NULL
     AND (p_epoch IS NULL OR s.epoch = p_epoch)
  RETURNING s.holder, s.epoch INTO v_holder, v_epoch;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, v_holder, v_epoch, 'resign_requested', jsonb_build_object('by', p_by));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', v_epoch, 'holder', v_holder, 'event', 'resign_requested')::text);
  RETURN true;
END $$;
-- +goose StatementEnd

-- heartbeat as in version 2, plus the resign column (a new result column needs a new
-- function). Engines select the columns by name, so older ones keep working.
DROP FUNCTION IF EXISTS pgleader.heartbeat(text, text[], bigint[], text[], text[]);
-- +goose StatementBegin
CREATE FUNCTION pgleader.heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                              p_follow text[] DEFAULT '{}',
                                              p_settled text[] DEFAULT '{}')
RETURNS TABLE (scope text, led boolean, ok boolean, epoch bigint, holder text, resign boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_leads text[];
BEGIN
  -- A lost heartbeat costs nothing: skip the WAL flush wait.
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now(), backend_pid = pg_backend_pid()
   WHERE n.node_id = p_node;
  RETURN QUERY
  WITH locks AS MATERIALIZED (
    SELECT l.pid, l.key FROM pgleader.advisory_locks() l WHERE l.mode = 'ExclusiveLock'
  ), want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(),
           unresolved_guards = CASE WHEN s.scope = ANY (p_settled) THEN '{}' ELSE s.unresolved_guards END,
           unresolved_trust_ms = CASE WHEN s.scope = ANY (p_settled) THEN 0 ELSE s.unresolved_trust_ms END
      FROM want
     WHERE s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL
       AND EXISTS (SELECT 1 FROM locks WHERE locks.pid = pg_backend_pid() AND locks.key = s.lock_key)
    RETURNING s.scope
  )
  SELECT want.scope, true, EXISTS (SELECT 1 FROM upd WHERE upd.scope = want.scope),
         want.epoch, p_node,
         EXISTS (SELECT 1 FROM pgleader.leader_state r
                  WHERE r.scope = want.scope AND r.resign_requested_epoch = want.epoch)
    FROM want
  UNION ALL
  SELECT s.scope, false, false, s.epoch,
         CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
               AND EXISTS (SELECT 1 FROM locks WHERE locks.pid = s.holder_pid AND locks.key = s.lock_key)
              THEN s.holder END,
         false
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_follow);
  -- nodes.leads is what this heartbeat confirmed (the rows it stamped with now()),
  -- so a node that lost a scope stops claiming it at its next heartbeat.
  -- Computed once; the row is written only when it changed.
  SELECT coalesce(array_agg(s.scope ORDER BY s.scope), '{}') INTO v_leads
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
     AND s.last_heartbeat = now();
  UPDATE pgleader.nodes n SET leads = v_leads
   WHERE n.node_id = p_node AND n.leads IS DISTINCT FROM v_leads;
END $$;
-- +goose StatementEnd
