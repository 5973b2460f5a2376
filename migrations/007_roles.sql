-- pgleader schema, version 7: least privilege.
--
-- Before this version every function ran with its caller's rights, so a node, the
-- collector and the exporter had to run as the schema's owner: any of them could
-- rewrite leader_state, terms or audit directly. Now:
--
--   * four NOLOGIN roles (names recorded in pgleader.roles; defaults below) that a
--     DBA grants to login roles:
--       pgleader_owner     owns the schema and everything in it; nothing else
--       pgleader_node      EXECUTE on the engine's functions only (claim, heartbeat,
--                          release, await, register, fence); no table privilege
--       pgleader_reader    SELECT on the tables and EXECUTE on the read-only
--                          functions (collector, exporter, status, history, top)
--       pgleader_operator  a reader that may also ask a leader to resign and record
--                          an eviction (pg_terminate_backend needs pg_signal_backend
--                          on top: docs/security.md)
--   * the functions that write are SECURITY DEFINER (they run as the owner), and
--     every function pins search_path to pg_catalog, pgleader, pg_temp: an object a
--     role plants in public (or in pg_temp) can never shadow what a function calls.
--     S2 is unchanged: pg_backend_pid() is still the calling backend, so a claim
--     still proves that the session which asked holds the lock.
--   * PUBLIC loses every privilege on the schema, its tables and its functions.
--   * audit rows record the session role (session_user) and client address of the
--     session that caused them: a caller cannot choose its own attribution.
--   * nodes register through register_node, bound to the login role that
--     registered them: another login cannot take over a live node's row.
--   * the node's guard and beacon locks are taken through session_lock, so a DBA
--     may revoke the advisory-lock functions from PUBLIC altogether.
--   * interference() names the sessions that hold or wait on a scope's lock
--     without being one of its candidates (squatters).
--
-- Role names other than the defaults are chosen at the first migration with the
-- session settings pgleader.role_owner, pgleader.role_node, pgleader.role_reader,
-- pgleader.role_operator (`pgleader migrate --roles node=svc_node,…`). A role that
-- does not exist is created NOLOGIN when the migrating role may create roles;
-- otherwise the migration stops and names the statement a DBA must run first.
-- Every later migration ends with SELECT pgleader.apply_privileges(), so objects it
-- adds get the same treatment.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 7 $$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS pgleader.roles (
  kind      text PRIMARY KEY CHECK (kind IN ('owner', 'node', 'reader', 'operator')),
  role_name name NOT NULL UNIQUE
);
INSERT INTO pgleader.roles (kind, role_name)
SELECT k, coalesce(nullif(current_setting('pgleader.role_' || k, true), ''), 'pgleader_' || k)::name
  FROM unnest(ARRAY['owner', 'node', 'reader', 'operator']) AS k
ON CONFLICT (kind) DO NOTHING;

-- Who caused each audit row, filled in by the database, not by the caller.
ALTER TABLE pgleader.audit ADD COLUMN IF NOT EXISTS session_role text DEFAULT session_user;
ALTER TABLE pgleader.audit ADD COLUMN IF NOT EXISTS client_addr inet DEFAULT inet_client_addr();
-- The login role that registered a node.
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS login_role text;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS resign_requested_role text;

-- session_lock: take a session-level advisory lock on p_key for the calling session
-- (a node's guard or beacon: random keys the engine draws per session). Refuses
-- the key of a scope, so it cannot be used to squat one.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.session_lock(p_key bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = p_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF05',
      MESSAGE = format('pgleader: key %s is the lock key of a scope: session_lock takes guard and beacon keys only', p_key);
  END IF;
  PERFORM pg_advisory_lock(p_key);
END $$;
-- +goose StatementEnd

-- register_node: record (or refresh) the calling node in pgleader.nodes, on the
-- calling backend (its leadership session), and announce it (node_joined). A node
-- id that is live (its beacon held) under another login role is refused: node ids
-- are not secrets, and a second login must not take over a running node's row.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.register_node(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_beacon_key bigint, p_guard_key bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  n pgleader.nodes;
BEGIN
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  IF FOUND AND n.login_role IS DISTINCT FROM session_user::text AND n.login_role IS NOT NULL
     AND n.stopped_at IS NULL AND n.backend_pid IS DISTINCT FROM pg_backend_pid()
     AND pgleader.lock_held(n.beacon_key, n.backend_pid) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF06',
      MESSAGE = format('pgleader: node %L is running (backend %s) under login role %I; role %I may not register it',
                       p_node, n.backend_pid, n.login_role, session_user),
      HINT = 'give each process its own node id';
  END IF;
  INSERT INTO pgleader.nodes AS x (node_id, hostname, os_pid, version, backend_pid, scopes,
         heartbeat_interval_ms, trust_window_ms, session_lease_ms, beacon_key, guard_key, login_role)
  VALUES (p_node, p_hostname, p_os_pid, p_version, pg_backend_pid(), p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key, session_user)
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version,
         backend_pid = EXCLUDED.backend_pid, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms,
         trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms,
         beacon_key = EXCLUDED.beacon_key, guard_key = EXCLUDED.guard_key,
         login_role = EXCLUDED.login_role,
         last_seen = now(), stopped_at = NULL, leads = '{}';
  PERFORM pg_notify('leader_change', json_build_object('event', 'node_joined', 'holder', p_node)::text);
END $$;
-- +goose StatementEnd

-- node_stopped: record a clean shutdown of the node registered on this backend.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.node_stopped(p_node text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
  UPDATE pgleader.nodes n SET stopped_at = now(), last_seen = now(), leads = '{}'
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid()
  RETURNING true
$$;
-- +goose StatementEnd

-- request_resign, version 7: as version 4, but the request is attributed to the
-- session's login role (session_user), recorded in resign_requested_role and in
-- the audit row; p_by is kept as what the caller says it is (a tool name).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.request_resign(p_scope text, p_epoch bigint, p_by text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_holder text;
  v_epoch  bigint;
BEGIN
  UPDATE pgleader.leader_state s
     SET resign_requested_epoch = s.epoch, resign_requested_by = p_by,
         resign_requested_role = session_user
   WHERE s.scope = p_scope AND s.released_at IS NULL AND s.holder IS NOT NULL
     AND (p_epoch IS NULL OR s.epoch = p_epoch)
  RETURNING s.holder, s.epoch INTO v_holder, v_epoch;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, v_holder, v_epoch, 'resign_requested',
          jsonb_build_object('by', session_user, 'via', p_by,
                             'application_name', current_setting('application_name')));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', v_epoch, 'holder', v_holder, 'event', 'resign_requested')::text);
  RETURN true;
END $$;
-- +goose StatementEnd

-- record_eviction: audit an eviction (and announce it) before the operator's
-- session terminates the holder's backend, if the holder is still the expected one.
-- Returns the audit id, or NULL when the holder changed. The termination itself
-- runs with the operator's own rights (pg_signal_backend).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.record_eviction(p_scope text, p_epoch bigint, p_holder text,
                                                   p_pid int, p_reason text, p_via text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM 1 FROM pgleader.leader_state st
   WHERE st.scope = p_scope AND st.epoch = p_epoch AND st.holder = p_holder
     AND st.holder_pid = p_pid AND st.released_at IS NULL;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_holder, p_epoch, 'evicted',
          jsonb_build_object('reason', p_reason, 'pid', p_pid, 'by', session_user, 'via', p_via,
                             'application_name', current_setting('application_name')))
  RETURNING id INTO v_id;
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', p_epoch, 'holder', p_holder, 'event', 'evicted')::text);
  RETURN v_id;
END $$;
-- +goose StatementEnd

-- interference: every session that holds or waits on a scope's advisory lock (in
-- any mode) without being a live candidate of that scope: not the backend on record
-- as the scope's holder, and not the leadership backend of a running node that
-- campaigns for it. Scopes: those in leader_state and those a running node
-- campaigns for (p_scopes narrows them). Session details come from
-- pg_stat_activity; client_addr is NULL unless the owner role may read all
-- statistics (pg_read_all_stats).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.interference(p_scopes text[] DEFAULT NULL)
RETURNS TABLE (scope text, lock_key bigint, pid int, mode text, granted boolean,
               role text, application_name text, client_addr text,
               backend_start timestamptz, wait_start timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  -- lock key → [scope, holder_pid]: looked up by jsonb key (O(log n)) rather than
  -- joined, since pg_lock_status is estimated at one row and joins against it
  -- degenerate into nested loops.
  v_scopes jsonb;
BEGIN
  SELECT coalesce(jsonb_object_agg(k.key::text, jsonb_build_array(k.scope, k.holder_pid)), '{}') INTO v_scopes FROM (
    SELECT s.lock_key AS key, s.scope, s.holder_pid FROM pgleader.leader_state s
     WHERE p_scopes IS NULL OR s.scope = ANY (p_scopes)
    UNION ALL
    SELECT pgleader.lock_key(c.scope), c.scope, NULL
      FROM (SELECT DISTINCT unnest(n.scopes) AS scope FROM pgleader.nodes n WHERE n.stopped_at IS NULL) c
     WHERE (p_scopes IS NULL OR c.scope = ANY (p_scopes))
       AND NOT EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = c.scope)) k;
  RETURN QUERY
  WITH l AS MATERIALIZED (
    -- the locks on scope keys held or awaited by another backend than the holder
    -- on record: normally none (followers hold no lock on a scope's key)
    SELECT v_scopes->(x.key::text)->>0 AS scope, x.*
      FROM (SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint AS key, l.mode, l.granted, l.waitstart
              FROM pg_catalog.pg_locks l
             WHERE l.locktype = 'advisory' AND l.objsubid = 1
               AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())) x
     WHERE v_scopes ? (x.key::text)
       AND x.pid IS DISTINCT FROM (v_scopes->(x.key::text)->>1)::int
  )
  SELECT l.scope, l.key, l.pid, l.mode, l.granted, a.usename::text, a.application_name,
         host(a.client_addr), a.backend_start, l.waitstart
    FROM l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
   WHERE NOT EXISTS (SELECT 1 FROM pgleader.nodes n
                      WHERE n.backend_pid = l.pid AND n.stopped_at IS NULL AND l.scope = ANY (n.scopes))
   ORDER BY l.scope, l.pid;
END $$;
-- +goose StatementEnd

-- node_heartbeat, version 7: as version 5, but the node's row (last_seen, leads)
-- is updated only from the session that registered it (register_node): another
-- session naming the node can no longer make it look alive or move its backend.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.node_heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                                   p_follow text[], p_known bigint[],
                                                   p_settled text[] DEFAULT '{}')
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, resign boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_leads text[];
  v_locks jsonb := pgleader.lock_map(); -- one read of pg_locks, looked up by 'pid:key'
  v_me    text := pg_backend_pid()::text || ':';
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
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
    RETURNING s.scope, s.resign_requested_epoch = want.epoch AS resign
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
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, p_node, coalesce(upd.resign, false)
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

-- apply_privileges: make the schema's ownership and grants what docs/security.md
-- lists, for the roles named in pgleader.roles. Idempotent; every migration from
-- version 7 on ends by calling it. Runs with the migrating role's rights.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.apply_privileges() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  r        record;
  v_owner  name;
  v_node   name;
  v_reader name;
  v_oper   name;
  v_can    boolean;
  -- Functions that run as the owner: they write, or call what a DBA may revoke
  -- from PUBLIC (the advisory-lock functions).
  v_definer text[] := ARRAY['claim_batch', 'release_batch', 'node_heartbeat', 'unlock_held_many',
                            'await_release', 'ring_next', 'register_node', 'node_stopped', 'session_lock',
                            'fence', 'fence_rejected', 'request_resign', 'record_eviction', 'interference'];
  v_node_fn text[] := ARRAY['schema_version', 'lock_key', 'claim_batch', 'release_batch', 'node_heartbeat',
                            'unlock_held_many', 'await_release', 'ring_next', 'register_node', 'node_stopped',
                            'session_lock', 'fence', 'fence_rejected', 'epoch_floor', 'wal_timeline',
                            'interference'];
  v_read_fn text[] := ARRAY['schema_version', 'lock_key', 'lock_held', 'advisory_locks', 'lock_map',
                            'wal_timeline', 'epoch_floor', 'interference'];
  v_oper_fn text[] := ARRAY['request_resign', 'record_eviction'];
BEGIN
  SELECT role_name INTO v_owner FROM pgleader.roles WHERE kind = 'owner';
  SELECT role_name INTO v_node FROM pgleader.roles WHERE kind = 'node';
  SELECT role_name INTO v_reader FROM pgleader.roles WHERE kind = 'reader';
  SELECT role_name INTO v_oper FROM pgleader.roles WHERE kind = 'operator';
  SELECT u.rolsuper OR u.rolcreaterole INTO v_can FROM pg_catalog.pg_roles u WHERE u.rolname = current_user;

  FOR r IN SELECT x AS name FROM unnest(ARRAY[v_owner, v_node, v_reader, v_oper]) x
            WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = x) LOOP
    IF NOT v_can THEN
      RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = format('pgleader: role %I does not exist, and %I may not create roles', r.name, current_user),
        HINT = format('have a DBA run: CREATE ROLE %I NOLOGIN; GRANT %I TO %I; (all four roles: docs/security.md), or migrate once as a role with CREATEROLE',
                      r.name, v_owner, current_user);
    END IF;
    -- Roles are shared by every database of the cluster: another database's
    -- migration may create the same role at the same time.
    BEGIN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r.name);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
  END LOOP;
  IF NOT pg_catalog.pg_has_role(current_user, v_owner, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_owner, current_user);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  IF NOT pg_catalog.pg_has_role(v_oper, v_reader, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_reader, v_oper);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  -- interference() reports the client address of a squatter's session.
  IF NOT pg_catalog.pg_has_role(v_owner, 'pg_read_all_stats', 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT pg_read_all_stats TO %I', v_owner);
    EXCEPTION WHEN unique_violation THEN NULL;
              WHEN insufficient_privilege THEN
      RAISE NOTICE 'pgleader: % may not grant pg_read_all_stats to %: squatters will be named without their client address', current_user, v_owner;
    END;
  END IF;

  -- Ownership: the schema and everything in it (the publication of the logical
  -- source stays with whoever created it: a publication's owner needs CREATE on the
  -- database).
  EXECUTE format('ALTER SCHEMA pgleader OWNER TO %I', v_owner);
  FOR r IN SELECT c.oid::regclass AS obj, c.relkind FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'pgleader'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = v_owner) LOOP
    IF r.relkind = 'S' THEN
      -- a sequence owned by a column follows its table
      CONTINUE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_class'::regclass
                             AND d.objid = r.obj::oid AND d.deptype IN ('a', 'i'));
      EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.obj, v_owner);
    ELSE
      EXECUTE format('ALTER TABLE %s OWNER TO %I', r.obj, v_owner);
    END IF;
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname, p.prosecdef, p.proconfig FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.fn, v_owner);
    IF r.proconfig IS NULL OR NOT ('search_path=pg_catalog, pgleader, pg_temp' = ANY (r.proconfig)) THEN
      EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pgleader, pg_temp', r.fn);
    END IF;
    IF (r.proname = ANY (v_definer)) <> r.prosecdef THEN
      EXECUTE format('ALTER FUNCTION %s %s', r.fn,
                     CASE WHEN r.proname = ANY (v_definer) THEN 'SECURITY DEFINER' ELSE 'SECURITY INVOKER' END);
    END IF;
  END LOOP;

  -- Grants: nothing to PUBLIC; each role exactly its list (re-applied from
  -- scratch, so a grant removed from the list is taken back).
  FOR r IN SELECT x AS name FROM unnest(ARRAY['public', v_node, v_reader, v_oper]) x LOOP
    EXECUTE format('REVOKE ALL ON SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
  END LOOP;
  EXECUTE format('GRANT USAGE ON SCHEMA pgleader TO %I, %I, %I', v_node, v_reader, v_oper);
  EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA pgleader TO %I', v_reader);
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    IF r.proname = ANY (v_node_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_node);
    END IF;
    IF r.proname = ANY (v_read_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_reader);
    END IF;
    IF r.proname = ANY (v_oper_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_oper);
    END IF;
  END LOOP;
END $$;
-- +goose StatementEnd

SELECT pgleader.apply_privileges();
