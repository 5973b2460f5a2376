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
--
-- And preferred nodes (failback). A node registered with a failback delay
-- (`pgleader node --preferred`, Config.Preferred) takes back the scopes it
-- campaigns for from a live leader of lower priority, by a handover the leader's
-- own heartbeat requests, once
--   * the preferred node has been registered (continuously: a reconnection
--     registers anew) for its delay,
--   * the leader's term is as old as that delay,
--   * no handover or resignation is pending on the scope, the preferred node is not
--     cooling down after resigning it, and no failback was requested for the
--     scope within the delay,
--   * the leader's term did not begin with an operator's handover: failback undoes
--     failovers, not an operator's choice.
-- Handovers it requests only ever go to a strictly higher priority, and at most
-- one per scope per delay: failback cannot flap.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 10 $$;
-- +goose StatementEnd

ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS registered_at timestamptz;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS failback_after_ms int;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS failback_not_before timestamptz;
-- Config.Validate refuses these first; the table holds every writer to them.
ALTER TABLE pgleader.nodes DROP CONSTRAINT IF EXISTS nodes_failback_check;
ALTER TABLE pgleader.nodes ADD CONSTRAINT nodes_failback_check
  CHECK (failback_after_ms IS NULL OR (failback_after_ms > 0 AND priority >= 1));

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
  UPDATE pgleader.nodes n SET priority = p_priority, resign_cooldown_ms = p_cooldown_ms,
         registered_at = now(), failback_after_ms = NULL
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
         priority, resign_cooldown_ms, mode, lease_token, registered_at)
  VALUES (p_node, p_hostname, p_os_pid, p_version, NULL, p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, NULL, NULL, session_user, p_priority, p_cooldown_ms, 'lease', p_token, now())
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version, backend_pid = NULL, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms, trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms, beacon_key = NULL, guard_key = NULL,
         login_role = EXCLUDED.login_role, priority = EXCLUDED.priority,
         resign_cooldown_ms = EXCLUDED.resign_cooldown_ms, mode = 'lease', lease_token = EXCLUDED.lease_token,
         last_seen = now(), stopped_at = NULL, leads = '{}',
         registered_at = now(), failback_after_ms = NULL;
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

-- register_node and lease_register with a failback delay: as above, then the node
-- is preferred (p_failback_ms > 0, at priority 1 or more: nodes_failback_check) or
-- not (NULL). The engine of schema 10 calls these.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.register_node(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_beacon_key bigint, p_guard_key bigint,
    p_priority int, p_cooldown_ms int, p_failback_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
BEGIN
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key,
                                 p_priority, p_cooldown_ms);
  UPDATE pgleader.nodes n SET failback_after_ms = p_failback_ms
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_register(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_token bigint, p_priority int, p_cooldown_ms int,
    p_failback_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
BEGIN
  PERFORM pgleader.lease_register(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                  p_interval_ms, p_trust_ms, p_lease_ms, p_token, p_priority, p_cooldown_ms);
  UPDATE pgleader.nodes n SET failback_after_ms = p_failback_ms
   WHERE n.node_id = p_node AND n.lease_token = p_token;
END $$;
-- +goose StatementEnd

-- request_failbacks: run by a leader's heartbeat, before it reads its led scopes'
-- pending handovers: for each scope it leads (p_scopes at p_epochs) that a
-- preferred live node of higher priority campaigns for (conditions above), it
-- requests a handover to the best such node (highest priority, then node id), as
-- request_handover would with a 30 s timeout, audited with via = 'failback'. The
-- heartbeat that ran it then hands the scope over. p_locks: the heartbeat's read
-- of pg_locks (NULL: read it here, if there is anything to do).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.request_failbacks(p_node text, p_scopes text[], p_epochs bigint[], p_locks jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_prio int;
  r      record;
BEGIN
  -- The common case (every leader heartbeat) is this one statement on the small
  -- nodes table, and a return: nobody preferred outranks this node.
  SELECT me.priority INTO v_prio FROM pgleader.nodes me
   WHERE me.node_id = p_node
     AND EXISTS (SELECT 1 FROM pgleader.nodes n
                  WHERE n.failback_after_ms IS NOT NULL AND n.stopped_at IS NULL
                    AND n.priority > me.priority AND n.scopes && p_scopes);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOR r IN
    WITH cand AS (
      SELECT ln.node_id, ln.priority, ln.scopes, n.failback_after_ms AS after_ms
        FROM pgleader.live_nodes(coalesce(p_locks, pgleader.lock_map())) ln
        JOIN pgleader.nodes n ON n.node_id = ln.node_id
       WHERE n.failback_after_ms IS NOT NULL AND ln.priority > v_prio
         AND n.registered_at <= now() - make_interval(secs => n.failback_after_ms / 1000.0)
    )
    SELECT s.scope, s.epoch, c.node_id AS target, c.priority, c.after_ms
      FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
      JOIN pgleader.leader_state s ON s.scope = w.scope AND s.epoch = w.epoch
      CROSS JOIN LATERAL (
        SELECT cand.node_id, cand.priority, cand.after_ms FROM cand
         WHERE s.scope = ANY (cand.scopes)
           AND s.acquired_at <= now() - make_interval(secs => cand.after_ms / 1000.0)
           AND NOT coalesce(cand.node_id = s.last_holder AND s.cooldown_until > now(), false)
         ORDER BY cand.priority DESC, cand.node_id LIMIT 1) c
     WHERE s.holder = p_node AND s.released_at IS NULL
       AND (s.handover_deadline IS NULL OR s.handover_deadline <= now())
       AND s.resign_requested_epoch IS DISTINCT FROM s.epoch
       AND coalesce(s.failback_not_before <= now(), true)
       -- failback undoes failovers, not an operator's choice: a term that began
       -- with a handover to its holder other than a failback stays
       AND NOT EXISTS (
         SELECT 1 FROM (SELECT t.epoch, t.handed_to, t.acquired_at FROM pgleader.terms t
                         WHERE t.scope = s.scope AND t.epoch < s.epoch ORDER BY t.epoch DESC LIMIT 1) p
          WHERE p.handed_to = s.holder
            AND NOT EXISTS (SELECT 1 FROM pgleader.audit a
                             WHERE a.scope = s.scope AND a.at >= p.acquired_at AND a.kind = 'handover_requested'
                               AND a.epoch = p.epoch AND a.detail->>'via' = 'failback'))
     FOR NO KEY UPDATE OF s SKIP LOCKED
  LOOP
    UPDATE pgleader.leader_state s SET handover_to = r.target, handover_epoch = r.epoch,
           handover_deadline = now() + interval '30 seconds', handover_by = session_user,
           failback_not_before = now() + make_interval(secs => r.after_ms / 1000.0)
     WHERE s.scope = r.scope;
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    VALUES (r.scope, p_node, r.epoch, 'handover_requested',
            jsonb_build_object('to', r.target, 'by', session_user, 'via', 'failback', 'timeout_ms', 30000,
                               'priority', r.priority, 'holder_priority', v_prio));
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', r.scope, 'epoch', r.epoch, 'holder', p_node, 'event', 'handover_requested', 'to', r.target)::text);
  END LOOP;
END $$;
-- +goose StatementEnd

-- node_heartbeat, version 10: requests failbacks first (request_failbacks).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.node_heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                                   p_follow text[], p_known bigint[],
                                                   p_settled text[] DEFAULT '{}')
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, resign boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_leads text[];
  v_locks jsonb := pgleader.lock_map(); -- one read of pg_locks, looked up by 'pid:key'
  v_me    text := pg_backend_pid()::text || ':';
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
  IF cardinality(p_scopes) > 0 THEN
    PERFORM pgleader.request_failbacks(p_node, p_scopes, p_epochs, v_locks);
  END IF;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(),
           unresolved_guards = CASE WHEN s.scope = ANY (p_settled) THEN '{}' ELSE s.unresolved_guards END,
           unresolved_trust_ms = CASE WHEN s.scope = ANY (p_settled) THEN 0 ELSE s.unresolved_trust_ms END
      FROM want
     WHERE s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL
       AND v_locks ? (v_me || s.lock_key::text)
    RETURNING s.scope,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
  ), follow AS (
    -- A scope without a row was never claimed (its lock may be squatted): it has
    -- no live holder either.
    SELECT f.scope, coalesce(s.epoch, 0) AS epoch, f.known,
           CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                 AND v_locks ? (s.holder_pid::text || ':' || s.lock_key::text)
                THEN s.holder END AS live
      FROM unnest(p_follow, p_known) AS f(scope, known)
      LEFT JOIN pgleader.leader_state s ON s.scope = f.scope
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, upd.handover, coalesce(upd.resign, false)
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, follow.scope, false, follow.epoch, follow.live, false
    FROM follow
   WHERE follow.live IS NULL OR follow.epoch IS DISTINCT FROM follow.known
  UNION ALL
  (SELECT 'ring'::text, NULL::text, true, n.beacon_key, n.node_id, false
     FROM pgleader.nodes n
    WHERE n.node_id <> p_node AND n.stopped_at IS NULL AND n.beacon_key IS NOT NULL
      AND v_locks ? (n.backend_pid::text || ':' || n.beacon_key::text)
    ORDER BY n.node_id <= p_node, n.node_id
    LIMIT 1);
  SELECT coalesce(array_agg(s.scope ORDER BY s.scope), '{}') INTO v_leads
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
     AND s.last_heartbeat = now();
  UPDATE pgleader.nodes n SET leads = v_leads
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid() AND n.leads IS DISTINCT FROM v_leads;
END $$;
-- +goose StatementEnd

-- lease_heartbeat, version 10: likewise.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_heartbeat(p_node text, p_token bigint, p_scopes text[], p_epochs bigint[],
                                                    p_follow text[])
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, seq bigint, resign boolean, handover text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_mine boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease'
  RETURNING true INTO v_mine;
  IF coalesce(v_mine, false) AND cardinality(p_scopes) > 0 THEN
    PERFORM pgleader.request_failbacks(p_node, p_scopes, p_epochs, NULL);
  END IF;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(), lease_seq = s.lease_seq + 1
      FROM want
     WHERE coalesce(v_mine, false) AND s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL AND s.mode = 'lease'
    RETURNING s.scope, s.lease_seq,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, p_node, upd.lease_seq,
         coalesce(upd.resign, false), upd.handover
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, f.scope, false, coalesce(s.epoch, 0),
         CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL THEN s.holder END,
         coalesce(s.lease_seq, 0), false, NULL::text
    FROM unnest(p_follow) AS f(scope) LEFT JOIN pgleader.leader_state s ON s.scope = f.scope;
  UPDATE pgleader.nodes n SET leads = coalesce(
           (SELECT array_agg(s.scope ORDER BY s.scope) FROM pgleader.leader_state s
             WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL AND s.last_heartbeat = now()), '{}')
   WHERE n.node_id = p_node AND n.lease_token = p_token;
END $$;
-- +goose StatementEnd

-- Ownership, search_path and grants, re-applied as after every migration.
SELECT pgleader.apply_privileges();
