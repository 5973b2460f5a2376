-- pgleader schema, version 2: fenced writes that the database refused are audited.
--
-- pgleader.fence raises PLF01 inside the writer's transaction, which then rolls back
-- and takes any audit row with it. The refused writer (or its library) reports the
-- refusal afterwards, in a transaction of its own, through fence_rejected: an
-- append-only audit row of kind 'fence_rejected' and a leader_change notification,
-- so the collector and the alert "a zombie tried to act" see it within one poll.
--
-- heartbeat also keeps pgleader.nodes.leads exact: a node that lost a scope without
-- a clean release stops listing it at its next heartbeat (the collector's
-- "two nodes report leading" check relies on it).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 2 $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.fence_rejected(
    p_scope text, p_epoch bigint, p_node text, p_detail text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_current bigint;
BEGIN
  SELECT s.epoch INTO v_current FROM pgleader.leader_state s WHERE s.scope = p_scope;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_node, p_epoch, 'fence_rejected',
          jsonb_build_object('current_epoch', v_current, 'detail', p_detail));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', p_epoch, 'holder', p_node, 'event', 'fence_rejected')::text);
END $$;
-- +goose StatementEnd

-- heartbeat as in version 1, plus the nodes.leads upkeep at the end.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                              p_follow text[] DEFAULT '{}',
                                              p_settled text[] DEFAULT '{}')
RETURNS TABLE (scope text, led boolean, ok boolean, epoch bigint, holder text)
LANGUAGE plpgsql AS $$
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
         want.epoch, p_node
    FROM want
  UNION ALL
  SELECT s.scope, false, false, s.epoch,
         CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
               AND EXISTS (SELECT 1 FROM locks WHERE locks.pid = s.holder_pid AND locks.key = s.lock_key)
              THEN s.holder END
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_follow);
  -- nodes.leads is what this heartbeat confirmed (the rows it stamped with now()),
  -- so a node that lost a scope stops claiming it at its next heartbeat.
  UPDATE pgleader.nodes n SET leads = coalesce((
      SELECT array_agg(s.scope ORDER BY s.scope) FROM pgleader.leader_state s
       WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
         AND s.last_heartbeat = now()), '{}')
   WHERE n.node_id = p_node AND n.leads IS DISTINCT FROM coalesce((
      SELECT array_agg(s.scope ORDER BY s.scope) FROM pgleader.leader_state s
       WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
         AND s.last_heartbeat = now()), '{}');
END $$;
-- +goose StatementEnd
