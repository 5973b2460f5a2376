-- pgleader schema, version 10: registration commits without waiting for a
-- synchronous standby.
--
-- Registering a node is liveness, not a grant: nothing is lost if it is lost with
-- a failed primary (the node registers again on the new one). But a committing
-- transaction that has notified (register_node and lease_register pg_notify
-- node_joined) holds the database's notification lock until its commit returns,
-- and with synchronous replication the commit returns only when the standby
-- confirms it. A node re-registering while the synchronous standby is gone thus
-- stalled every claim's commit behind it (claims notify too), so no successor
-- could even commit a grant locally. Both functions now set synchronous_commit to
-- local for their own transaction. Claims, releases and the fence keep the
-- server's setting: a grant is acknowledged only once it is durable where the DBA
-- asked (docs/ha.md).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 10 $$;
-- +goose StatementEnd

-- register_node, version 10 (the 12-argument form of 008, which the engine calls).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.register_node(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_beacon_key bigint, p_guard_key bigint,
    p_priority int, p_cooldown_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
BEGIN
  -- Transaction-local: it holds until this registration's commit, which is what
  -- must not wait (a function-level SET would be undone before the commit).
  PERFORM set_config('synchronous_commit', 'local', true);
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key);
  UPDATE pgleader.nodes n SET priority = p_priority, resign_cooldown_ms = p_cooldown_ms
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
  WITH revived AS (
    UPDATE pgleader.leader_state s SET retired_at = NULL, retired_by = NULL
     WHERE s.scope = ANY (p_scopes) AND s.retired_at IS NOT NULL
    RETURNING s.scope, s.epoch
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT r.scope, p_node, r.epoch, 'scope_revived', jsonb_build_object('by', p_node) FROM revived r;
END $$;
-- +goose StatementEnd

-- lease_register, version 10.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_register(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_token bigint, p_priority int, p_cooldown_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  n pgleader.nodes;
BEGIN
  PERFORM set_config('synchronous_commit', 'local', true); -- liveness, not a grant
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  IF FOUND AND n.login_role IS DISTINCT FROM session_user::text AND n.login_role IS NOT NULL
     AND n.stopped_at IS NULL AND EXISTS (SELECT 1 FROM pgleader.live_nodes(pgleader.lock_map()) ln WHERE ln.node_id = p_node) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF06',
      MESSAGE = format('pgleader: node %L is running under login role %I; role %I may not register it', p_node, n.login_role, session_user),
      HINT = 'give each process its own node id';
  END IF;
  INSERT INTO pgleader.nodes AS x (node_id, hostname, os_pid, version, backend_pid, scopes,
         heartbeat_interval_ms, trust_window_ms, session_lease_ms, beacon_key, guard_key, login_role,
         priority, resign_cooldown_ms, mode, lease_token)
  VALUES (p_node, p_hostname, p_os_pid, p_version, NULL, p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, NULL, NULL, session_user, p_priority, p_cooldown_ms, 'lease', p_token)
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version, backend_pid = NULL, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms, trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms, beacon_key = NULL, guard_key = NULL,
         login_role = EXCLUDED.login_role, priority = EXCLUDED.priority,
         resign_cooldown_ms = EXCLUDED.resign_cooldown_ms, mode = 'lease', lease_token = EXCLUDED.lease_token,
         last_seen = now(), stopped_at = NULL, leads = '{}';
  WITH revived AS (
    UPDATE pgleader.leader_state s SET retired_at = NULL, retired_by = NULL
     WHERE s.scope = ANY (p_scopes) AND s.retired_at IS NOT NULL
    RETURNING s.scope, s.epoch
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT r.scope, p_node, r.epoch, 'scope_revived', jsonb_build_object('by', p_node) FROM revived r;
  PERFORM pg_notify('leader_change', json_build_object('event', 'node_joined', 'holder', p_node)::text);
END $$;
-- +goose StatementEnd

-- Ownership, search_path and grants, re-applied as after every migration.
SELECT pgleader.apply_privileges();
